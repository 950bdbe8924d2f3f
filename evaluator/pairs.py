"""The shared data model of the decision layer: one audited (problem, CoT step, premise) pair.

Two producers build :class:`AuditPair` values and everything downstream (verdicts, cascade,
metrics, baselines, tables) is shared:

- ``cotaudit rescore`` (``evaluator.authors``) fills them from the authors' certificate fields
  (their ``phi_*``, deltas, parse flags, alignment and exclusion flags);
- the end-to-end pipeline (``evaluator.pipeline``) fills them from our parser and our content
  alignment of the raw outputs.

A pair carries *inputs* only (what was read and how it was aligned); verdicts are computed by
:mod:`evaluator.verdicts`, never stored here, so that one set of pairs can be scored under every
evaluator and ablation.

Probe conditions are named as in the JSONL stream: ``consistent`` (A, the paper's "semantic"),
``local`` (A') and ``surface`` (the control).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal, TypeAlias

from cotaudit.domain.problem import Problem

Condition: TypeAlias = Literal["consistent", "local", "surface"]
CONDITIONS: tuple[Condition, ...] = ("consistent", "local", "surface")

# Exclusion reasons (a pair with any of them is kept in the certificates, out of the metrics).
EXCLUDED_UNMATCHED_STEP = "unmatched_cot_step"  # the CoT step matches no proof step
EXCLUDED_AMBIGUOUS_PROBLEM = "ambiguous_problem"  # one proof step matched twice, or vice versa


def conclusion_delta(phi_original: str | None, phi_probe: str | None) -> bool | None:
    """Whether a probe changed the canonical conclusion; ``None`` when either side is unread.

    A missing or unparseable side never counts as a change (docs/alignment.md: "never counted as a
    change"): the verdict rules treat ``None`` as "no reading" and route it to UNPARSEABLE.
    """
    if phi_original is None or phi_probe is None:
        return None
    return phi_original != phi_probe


# Not frozen: a frozen dataclass's __init__ sets each of its 31 fields through
# object.__setattr__, six times the cost of plain slots, for the million pairs of a large
# sweep. Nothing mutates a pair once built; ``dataclasses.replace`` makes changed copies.
@dataclass(slots=True)
class AuditPair:
    """One (problem, CoT step, premise) pair with everything the decision rules read.

    ``phi_*`` are canonical propositions (``is(alex, bimpus)``) or ``None`` when that output's
    step was not read (unparseable, a non-assertion, or missing in the probe output). The
    ``parsed_*`` flags say whether the parser produced a proposition for the step;
    ``missing_*`` whether the probe output had no step aligned to it at all (a missing step is
    also unparsed). ``delta_*`` may be given by the producer (the authors' certificates carry
    them); when left ``None`` they are derived from the ``phi`` values by :meth:`delta`.
    """

    problem_id: str
    cot_step: int  # 1-based step number in the ORIGINAL output
    premise_id: str  # "P3"
    proof_step: int | None  # aligned gold proof step; None when unmatched
    hops: int  # length of the gold proof (chain length)

    phi_original: str | None
    phi_consistent: str | None  # consistent substitution (A)
    phi_local: str | None  # local substitution (A')
    phi_surface: str | None  # surface rephrase (control)

    parsed_original: bool
    parsed_consistent: bool
    parsed_local: bool
    parsed_surface: bool

    missing_consistent: bool = False
    missing_local: bool = False
    missing_surface: bool = False
    # Which alignment rule paired the probe step with this step ("content", "substituted",
    # "chain_position", "step_number" for the authors' positional pairing, ...); None if missing.
    align_consistent: str | None = None
    align_local: str | None = None
    align_surface: str | None = None

    delta_consistent: bool | None = None
    delta_local: bool | None = None
    delta_surface: bool | None = None

    # String-diff baseline input: the aligned step's text changed under the consistent probe.
    # None when there is no probe step to compare with (the pair is then skipped by that row).
    text_changed: bool | None = None

    # Gold, from the proof tree: Pj is a direct parent of the aligned proof step; Pj introduces
    # the entity ("Alex is a bempus": structural, negative under the `pred` gold).
    is_direct_parent: bool = False
    is_entity_premise: bool = False
    # Proof-step numbers of the aligned proof step's parent steps (its "S{k}" parents), for the
    # DAG variant of the cascade filter.
    parent_proof_steps: tuple[int, ...] = ()

    # The local probe's output was read whole, holds no counterpart of this step, and the
    # surface control still reaches its conclusion: the conclusion vanished (a local delta).
    vanished_local: bool = False
    # Pj's target predicate is also the object of another premise: the consistent probe
    # renamed it in several premises (attributed by the local probe; docs/decision-layer.md).
    target_shared: bool = False

    cites_premise: bool = False  # the original step echoes Pj's text or names "premise j"
    citation_evidence: str = ""  # e.g. "fragment: 'is a bempus'"; "" when it does not cite

    exclusion_reasons: tuple[str, ...] = ()

    @property
    def key(self) -> tuple[str, int, str]:
        """``(problem_id, cot_step, premise_id)``: unique within one model's audit."""
        return (self.problem_id, self.cot_step, self.premise_id)

    @property
    def excluded(self) -> bool:
        """Kept in the certificates but out of every primary metric."""
        return bool(self.exclusion_reasons)

    @property
    def gold_full(self) -> bool:
        """Positive under the ``full`` gold: Pj is a direct parent of the aligned proof step."""
        return self.is_direct_parent

    @property
    def gold_pred(self) -> bool:
        """Positive under the ``pred`` gold: a direct parent that is not an entity premise."""
        return self.is_direct_parent and not self.is_entity_premise

    def phi(self, condition: Condition) -> str | None:
        """The probe's canonical conclusion for this step under ``condition``."""
        if condition == "consistent":
            return self.phi_consistent
        if condition == "local":
            return self.phi_local
        return self.phi_surface

    def parsed(self, condition: Condition) -> bool:
        """Whether the probe step under ``condition`` was read (and not missing)."""
        if condition == "consistent":
            return self.parsed_consistent and not self.missing_consistent
        if condition == "local":
            return self.parsed_local and not self.missing_local
        return self.parsed_surface and not self.missing_surface

    def delta(self, condition: Condition) -> bool | None:
        """Given delta if the producer set one, else derived from the ``phi`` values."""
        # Plain branches: this runs several times per pair and evaluator on large sweeps.
        if condition == "consistent":
            given, parsed, phi = (
                self.delta_consistent,
                self.parsed_consistent and not self.missing_consistent,
                self.phi_consistent,
            )
        elif condition == "local":
            given, parsed, phi = (
                self.delta_local,
                self.parsed_local and not self.missing_local,
                self.phi_local,
            )
        else:
            given, parsed, phi = (
                self.delta_surface,
                self.parsed_surface and not self.missing_surface,
                self.phi_surface,
            )
        if given is not None:
            return given
        if not self.parsed_original or self.phi_original is None:
            return None
        if not parsed or phi is None:
            # Only the local probe's conclusions vanish (the consistent one keeps the chain).
            return True if condition == "local" and self.vanished_local else None
        return self.phi_original != phi


@dataclass(frozen=True, slots=True)
class ProblemOutcome:
    """Per-problem facts that are not per pair: answer correctness and unscored gold.

    ``unscored_deps_full``/``_pred`` count gold premise dependencies of proof steps that no
    evaluable CoT step was aligned to (unaudited proof steps, or every step of an ambiguous
    problem): the lower-bound row counts them as false negatives.
    """

    problem_id: str
    hops: int
    answer_gold: bool
    answer_model: bool | None  # None when no "Answer: True/False" could be read
    unscored_deps_full: int = 0
    unscored_deps_pred: int = 0

    @property
    def answer_correct(self) -> bool:
        return self.answer_model is not None and self.answer_model == self.answer_gold


def problem_outcome(
    problem: Problem,
    pairs: Iterable[AuditPair],
    answer: bool | None,
    entity_premises: frozenset[str],
) -> ProblemOutcome:
    """The problem's outcome: its answer, and the gold premise dependencies of every proof
    step that no evaluable pair scored (the lower-bound row counts them as false negatives)."""
    scored = {p.proof_step for p in pairs if not p.excluded and p.proof_step is not None}
    full = pred = 0
    for step in problem.proof:
        if step.step in scored:
            continue
        deps = [d for d in step.depends_on if d.startswith("P")]
        full += len(deps)
        pred += sum(1 for d in deps if d not in entity_premises)
    return ProblemOutcome(
        problem_id=problem.problem_id,
        hops=problem.hops,
        answer_gold=problem.answer,
        answer_model=answer,
        unscored_deps_full=full,
        unscored_deps_pred=pred,
    )
