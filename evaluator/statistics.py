"""One problem's pairs and decisions -> the per-problem counts every report section is made of.

A report (``evaluator.tables``) is a sum over problems, plus bootstrap intervals over the
per-problem counts of each row. So a problem's audit is reduced, as soon as it is done, to
:class:`ProblemStatistics`: one integer vector (the confusion counts of every row, the verdict
and rule mixes, the vanished, shared-target, cascade, certificate, misrepresentation and RAWR
counts; the layout is :data:`LAYOUT`), its self-consistency counts, truth rows and the few
listed cases. Problems audited in parallel then merge by addition, and what the statistics
keep is proportional to the problems, not to the pairs.

Most pairs of a run look alike to the statistics: the same exclusion, gold, string-diff and
citation flags under the same few hundred shared decisions. A pair is therefore reduced to a
*kind* (a tuple of those), each kind's contribution to the vector is computed once per process,
and a problem's vector is its kinds' counts times their contributions.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from cotaudit.domain.problem import Problem
from evaluator.baselines import SampleStepSummary, self_consistency_counts
from evaluator.metrics import FN, FP, SKIPPED, TN, TP
from evaluator.pairs import AuditPair, ProblemOutcome
from evaluator.verdicts import R_GROUNDED_VANISHED, RULES, Decision, Verdict

Vector = npt.NDArray[np.int64]

# (row, decisions field, gold, verdicts skipped): the rows counted from the pairs' decisions.
DECISION_ROWS: tuple[tuple[str, str, str, frozenset[Verdict]], ...] = (
    ("A_consistent_full", "consistent", "full", SKIPPED),
    ("A_consistent_pred", "consistent", "pred", SKIPPED),
    ("A_local_full", "local", "full", SKIPPED),
    ("A_Ap_combined_full", "combined", "full", SKIPPED),
    ("A_Ap_no_surface_full", "no_surface", "full", SKIPPED),
    ("A_Ap_cascade_full", "cascaded", "full", SKIPPED),
    ("A_Ap_cascade_pred", "cascaded", "pred", SKIPPED),
    # The authors' ablation "A alone": UNSTABLE counted negative.
    ("A_consistent_unstable_negative_full", "consistent", "full", frozenset({Verdict.UNPARSEABLE})),
)
STRING_DIFF_ROW = "string_diff_full"
LOWER_BOUND_ROW = "A_consistent_lower_bound_full"
PAIR_ROWS: tuple[str, ...] = (*(r[0] for r in DECISION_ROWS), STRING_DIFF_ROW, LOWER_BOUND_ROW)
SELF_CONSISTENCY_ROWS = ("self_consistency_full", "self_consistency_pred")
# The evaluators whose verdict and rule mixes a report shows, and their decisions field.
MIX_EVALUATORS: tuple[tuple[str, str], ...] = (
    ("A", "consistent"),
    ("A'", "local"),
    ("A+A'", "combined"),
    ("A+A'+cascade", "cascaded"),
)
VERDICTS: tuple[Verdict, ...] = tuple(Verdict)
# Per evaluator, the headline's uses of gold premises (evaluator.headline.found), by premise kind.
HEADLINE_COUNTS: tuple[str, ...] = (
    "judged_rule",
    "dependent_rule",
    "ignored_rule",
    "judged_entity",
    "dependent_entity",
    "ignored_entity",
)
DECISION_FIELDS = ("consistent", "local", "combined", "no_surface", "cascaded")


@dataclass(frozen=True, slots=True)
class Layout:
    """Where each count sits in a problem's vector."""

    rows: Mapping[str, int]  # row -> offset of its (tp, fp, fn, tn)
    verdict_mix: Mapping[str, int]  # evaluator -> offset of one count per verdict
    verdict_mix_excluded: Mapping[str, int]  # the same, of excluded pairs
    rule_mix: Mapping[str, int]  # evaluator -> offset of one count per rule in RULES
    vanished: int  # pairs, grounded_by_vanished, cascaded
    target_shared: int  # pairs, positive_consistent, positive_combined
    n_cascaded: int
    certificates: int  # total, evaluable
    misrepresentations: int
    rawr: Mapping[str, int]  # evaluator -> ignored entity premises, ignored rule premises
    headline: Mapping[str, int]  # evaluator -> HEADLINE_COUNTS
    size: int


def _layout() -> Layout:
    at = 0

    def take(n: int) -> int:
        nonlocal at
        start, at = at, at + n
        return start

    rows = {row: take(4) for row in PAIR_ROWS}
    verdict_mix = {name: take(len(VERDICTS)) for name, _ in MIX_EVALUATORS}
    verdict_mix_excluded = {name: take(len(VERDICTS)) for name, _ in MIX_EVALUATORS}
    rule_mix = {name: take(len(RULES)) for name, _ in MIX_EVALUATORS}
    vanished, target_shared, n_cascaded = take(3), take(3), take(1)
    certificates, misrep = take(2), take(1)
    rawr = {name: take(2) for name, _ in MIX_EVALUATORS}
    headline = {name: take(len(HEADLINE_COUNTS)) for name, _ in MIX_EVALUATORS}
    return Layout(
        rows,
        verdict_mix,
        verdict_mix_excluded,
        rule_mix,
        vanished,
        target_shared,
        n_cascaded,
        certificates,
        misrep,
        rawr,
        headline,
        at,
    )


LAYOUT = _layout()
_VERDICT_INDEX = {v: i for i, v in enumerate(VERDICTS)}
_RULE_INDEX = {r: i for i, r in enumerate(RULES)}

# A pair kind: excluded, gold (full), entity premise, text changed (None: no probe step),
# vanished local conclusion, shared target, cites the premise, then one code per decision.
PairKind = tuple[bool, bool, bool, bool | None, bool, bool, bool, int, int, int, int, int]


class _Kinds:
    """Pair kinds and their contributions, computed once per process.

    Decisions are shared objects (``evaluator.verdicts.make_decision``), so a decision is coded
    by identity first (cheap) and by value on a miss; ``_alive`` keeps every coded object, so
    that no identity is reused while it is in the table.
    """

    def __init__(self) -> None:
        self._by_identity: dict[int, int] = {}
        self._by_value: dict[Decision, int] = {}
        self._decisions: list[Decision] = []
        self._alive: list[Decision] = []
        self.index: dict[PairKind, int] = {}
        self._rows: list[Vector] = []
        self._matrix: Vector = np.zeros((0, LAYOUT.size), dtype=np.int64)

    def code(self, decision: Decision) -> int:
        found = self._by_identity.get(id(decision))
        if found is not None:
            return found
        value = self._by_value.get(decision)
        if value is None:
            value = self._by_value[decision] = len(self._decisions)
            self._decisions.append(decision)
        self._by_identity[id(decision)] = value
        self._alive.append(decision)
        return value

    def kind_index(self, kind: PairKind) -> int:
        found = self.index.get(kind)
        if found is None:
            found = self.index[kind] = len(self._rows)
            self._rows.append(self._contribution(kind))
        return found

    def matrix(self) -> Vector:
        if self._matrix.shape[0] != len(self._rows):
            self._matrix = np.stack(self._rows)
        return self._matrix

    def _contribution(self, kind: PairKind) -> Vector:
        excluded, gold_full, entity, text_changed, vanished, shared, cites = kind[:7]
        decided = dict(zip(DECISION_FIELDS, (self._decisions[c] for c in kind[7:]), strict=True))
        out = np.zeros(LAYOUT.size, dtype=np.int64)
        out[LAYOUT.certificates] = 1
        if excluded:
            for name, attr in MIX_EVALUATORS:
                out[LAYOUT.verdict_mix_excluded[name] + _VERDICT_INDEX[decided[attr].verdict]] += 1
            return out
        out[LAYOUT.certificates + 1] = 1
        gold = {"full": gold_full, "pred": gold_full and not entity}

        def count(row: str, predicted: bool, truth: bool) -> None:
            col = (TP if truth else FP) if predicted else (FN if truth else TN)
            out[LAYOUT.rows[row] + col] += 1

        for row, name, which, skip in DECISION_ROWS:
            verdict = decided[name].verdict
            if verdict not in skip:
                count(row, verdict.positive, gold[which])
        if text_changed is not None:
            count(STRING_DIFF_ROW, text_changed, gold_full)
        consistent = decided["consistent"].verdict
        if consistent in SKIPPED:
            if gold_full:  # an unscored gold dependency: a false negative of the lower bound
                out[LAYOUT.rows[LOWER_BOUND_ROW] + FN] += 1
        else:
            count(LOWER_BOUND_ROW, consistent.positive, gold_full)
        for name, attr in MIX_EVALUATORS:
            d = decided[attr]
            out[LAYOUT.verdict_mix[name] + _VERDICT_INDEX[d.verdict]] += 1
            out[LAYOUT.rule_mix[name] + _RULE_INDEX[d.rule]] += 1
        cascaded = decided["cascaded"].verdict is Verdict.CASCADE
        if vanished:
            out[LAYOUT.vanished] += 1
            if decided["combined"].rule == R_GROUNDED_VANISHED:
                out[LAYOUT.vanished + 1] += 1
                out[LAYOUT.vanished + 2] += cascaded
        if shared:
            out[LAYOUT.target_shared] += 1
            out[LAYOUT.target_shared + 1] += decided["consistent"].positive
            out[LAYOUT.target_shared + 2] += decided["combined"].positive
        out[LAYOUT.n_cascaded] += cascaded
        if consistent is Verdict.INSENSITIVE and cites:
            out[LAYOUT.misrepresentations] += 1
        for name, attr in MIX_EVALUATORS:
            verdict = decided[attr].verdict
            if gold_full and verdict is Verdict.INSENSITIVE:
                out[LAYOUT.rawr[name] + (0 if entity else 1)] += 1
            if gold_full and verdict not in SKIPPED:
                at = LAYOUT.headline[name] + (3 if entity else 0)
                out[at] += 1
                out[at + 1] += verdict.positive
                out[at + 2] += verdict is Verdict.INSENSITIVE
        return out


_KINDS = _Kinds()


@dataclass(slots=True)
class ProblemStatistics:
    """What the report keeps of one audited problem (see the module docstring)."""

    problem_id: str
    hops: int
    answer_correct: bool
    vector: Vector  # LAYOUT
    misrepresentation_cases: list[dict[str, Any]] = field(default_factory=list)
    # Self-consistency rows (full, pred) and (scored, unmatched, ambiguous) proof steps;
    # None when the problem has no sample summaries.
    self_consistency: Vector | None = None
    self_consistency_alignment: tuple[int, int, int] | None = None
    extra: dict[str, Vector] = field(default_factory=dict)  # further rows (truth), (4,) each

    def row(self, name: str) -> Vector:
        """The (tp, fp, fn, tn) of one pair row."""
        at = LAYOUT.rows[name]
        return self.vector[at : at + 4]


def problem_statistics(
    problem_id: str,
    pairs: Sequence[AuditPair],
    decisions: Mapping[str, Sequence[Decision]],
    outcome: ProblemOutcome,
    *,
    problem: Problem | None = None,
    summaries: Sequence[SampleStepSummary] | None = None,
    entity_premises: Collection[str] = (),
) -> ProblemStatistics:
    """The statistics of one problem's pairs (all of ``problem_id``) and decisions (one per
    pair under each of ``DECISION_FIELDS``). ``summaries`` (with ``problem``) add the
    self-consistency rows."""
    kinds: Counter[PairKind] = Counter()
    code = _KINDS.code
    columns = [decisions[name] for name in DECISION_FIELDS]
    cases: list[dict[str, Any]] = []
    for i, pair in enumerate(pairs):
        kind: PairKind = (
            bool(pair.exclusion_reasons),
            pair.is_direct_parent,
            pair.is_entity_premise,
            pair.text_changed,
            pair.vanished_local,
            pair.target_shared,
            pair.cites_premise,
            code(columns[0][i]),
            code(columns[1][i]),
            code(columns[2][i]),
            code(columns[3][i]),
            code(columns[4][i]),
        )
        kinds[kind] += 1
        if (
            pair.cites_premise
            and not pair.exclusion_reasons
            and columns[0][i].verdict is Verdict.INSENSITIVE
        ):
            cases.append(
                {
                    "problem_id": pair.problem_id,
                    "cot_step": pair.cot_step,
                    "premise_id": pair.premise_id,
                    "gold_dependency": pair.is_direct_parent,
                    "evidence": pair.citation_evidence,
                }
            )
    if kinds:
        rows = [_KINDS.kind_index(k) for k in kinds]
        weights = np.fromiter(kinds.values(), dtype=np.int64, count=len(kinds))
        vector = weights @ _KINDS.matrix()[rows]
    else:
        vector = np.zeros(LAYOUT.size, dtype=np.int64)
    vector[LAYOUT.rows[LOWER_BOUND_ROW] + FN] += outcome.unscored_deps_full
    stats = ProblemStatistics(problem_id, outcome.hops, outcome.answer_correct, vector, cases)
    if summaries is not None and problem is not None:
        sc = np.zeros((2, 4), dtype=np.int64)
        alignment = None
        for r, gold in enumerate(("full", "pred")):
            counts, met = self_consistency_counts(
                {problem_id: problem},
                {problem_id: summaries},
                [problem_id],
                {problem_id: entity_premises},
                gold=gold,  # type: ignore[arg-type]
            )
            sc[r] = counts[0]
            alignment = (
                met.proof_steps_scored,
                met.proof_steps_unmatched,
                met.proof_steps_ambiguous,
            )
        stats.self_consistency = sc
        stats.self_consistency_alignment = alignment
    return stats
