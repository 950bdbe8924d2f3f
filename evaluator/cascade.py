"""The cascade filter: local-substitution changes that merely propagate down the chain.

docs/decision-layer.md, "Cascade filter". Under local substitution a change in one step
propagates to every later step of the chain, so A' flags steps that never read Pj. Within one
(problem, premise) group, a decision that is positive through the local delta *alone*
(:attr:`Decision.local_only`) and whose parent step was itself positive with a local delta for
the same premise becomes ``CASCADE`` (negative under the metric policy).

What "parent" means is the ``mode``:

- ``previous_cot_step`` (default; the paper's rule): the step numbered ``cot_step - 1`` in the
  original output, whether or not it was aligned to a proof step. This is what the authors'
  code does: in p010 (P2) the unaligned restatement step 1 is the parent of step 2, and
  ``n_cascaded`` = 60 holds only with it (59 with the next variant).
- ``previous_aligned_step``: the closest earlier step that is aligned and not excluded.
- ``dag_parent``: any step aligned to one of the aligned proof step's parent steps
  (``AuditPair.parent_proof_steps``): the generalisation to tree-shaped proofs.

The parent's decision is its own, before filtering: a cascade of a cascade is still a cascade.

A child positive through a *vanished* local conclusion (rule ``R_GROUNDED_VANISHED``: the local
output no longer reaches the step at all) has no probe step whose position could make a
"previous step"; its parents are always the ``dag_parent`` ones, the steps aligned to its proof
step's parents: when the chain broke above it, the parent changed or vanished first.
"""

from __future__ import annotations

import bisect
from collections import defaultdict
from collections.abc import Sequence
from typing import Literal, TypeAlias

from evaluator.pairs import AuditPair
from evaluator.verdicts import (
    R_CASCADE_FILTERED,
    R_GROUNDED_VANISHED,
    Decision,
    Verdict,
    make_decision,
)

CascadeMode: TypeAlias = Literal["previous_cot_step", "previous_aligned_step", "dag_parent"]
CASCADE_MODES: tuple[CascadeMode, ...] = (
    "previous_cot_step",
    "previous_aligned_step",
    "dag_parent",
)
# The parent rule of an end-to-end evaluation (`cotaudit evaluate`): the closest earlier
# aligned step, as the protocol words it for a linear proof (docs/decision-layer.md). The
# paper's rule, the CoT step numbered one less whether aligned or not, is what its positional
# pairing did, and `rescore` keeps it for the authors' own pairs (it gives their 60). End to
# end an unaligned step has no probe counterpart and is never positive, so under the paper's
# rule the step after a restatement or a comment could never be cascaded.
EVALUATE_CASCADE_MODE: CascadeMode = "previous_aligned_step"
PAPER_CASCADE_MODE: CascadeMode = "previous_cot_step"


class _Group:
    """One (problem, premise) group's pairs, indexed once so that whether a pair has a parent
    "positive with a local delta" is a lookup, not a scan of the group (a long output has
    thousands of pairs per premise, and a restarted chain writes a step number many times)."""

    __slots__ = ("first_aligned", "positive_cot_steps", "positive_local", "positive_proof_steps")

    def __init__(
        self, members: list[int], pairs: Sequence[AuditPair], decisions: Sequence[Decision]
    ) -> None:
        self.positive_local: set[int] = set()
        self.positive_cot_steps: set[int] = set()
        self.positive_proof_steps: set[int] = set()
        first_aligned: dict[int, int] = {}  # cot step -> its first aligned, evaluable pair
        for i in members:
            pair = pairs[i]
            positive = decisions[i].positive and decisions[i].delta_local is True
            evaluable_aligned = pair.proof_step is not None and not pair.excluded
            if positive:
                self.positive_local.add(i)
                self.positive_cot_steps.add(pair.cot_step)
                if evaluable_aligned:
                    self.positive_proof_steps.add(pair.proof_step)  # type: ignore[arg-type]
            if evaluable_aligned:
                first_aligned.setdefault(pair.cot_step, i)
        self.first_aligned = sorted(first_aligned.items())

    def parent_positive(self, child: AuditPair, mode: CascadeMode) -> bool:
        """Whether a parent of ``child`` (in this group, by ``mode``) was itself positive
        with a local delta for the same premise."""
        if mode == "previous_cot_step":
            return child.cot_step - 1 in self.positive_cot_steps
        if mode == "previous_aligned_step":
            # The closest earlier step number that is aligned and evaluable; of its pairs,
            # the first in the group (as ``max`` over the group in order picks).
            at = bisect.bisect_left(self.first_aligned, (child.cot_step, -1))
            return bool(at) and self.first_aligned[at - 1][1] in self.positive_local
        return any(step in self.positive_proof_steps for step in child.parent_proof_steps)


def apply_cascade(
    pairs: Sequence[AuditPair],
    decisions: Sequence[Decision],
    *,
    mode: CascadeMode = "previous_cot_step",
) -> list[Decision]:
    """Return ``decisions`` with cascaded ones re-labelled ``CASCADE`` (rule
    ``R_CASCADE_FILTERED``); ``decisions[i]`` belongs to ``pairs[i]``. Linear in the pairs."""
    if len(pairs) != len(decisions):
        raise ValueError(
            f"apply_cascade: {len(pairs)} pairs but {len(decisions)} decisions; "
            "pass one decision per pair, in the same order"
        )
    if mode not in CASCADE_MODES:
        raise ValueError(f"apply_cascade: mode must be one of {CASCADE_MODES}, got {mode!r}")
    groups: dict[tuple[str, str], list[int]] = defaultdict(list)
    for i, pair in enumerate(pairs):
        groups[(pair.problem_id, pair.premise_id)].append(i)
    out = list(decisions)
    for members in groups.values():
        if not any(decisions[i].local_only for i in members):
            continue
        group = _Group(members, pairs, decisions)
        for i in members:
            if not decisions[i].local_only:
                continue
            rule_mode: CascadeMode = (
                "dag_parent" if decisions[i].rule == R_GROUNDED_VANISHED else mode
            )
            if group.parent_positive(pairs[i], rule_mode):
                d = decisions[i]
                out[i] = make_decision(
                    Verdict.CASCADE,
                    R_CASCADE_FILTERED,
                    d.delta_consistent,
                    d.delta_local,
                    d.delta_surface,
                    d.attributed_local,
                )
    return out


def count_cascaded(pairs: Sequence[AuditPair], decisions: Sequence[Decision]) -> int:
    """Evaluable pairs whose decision is ``CASCADE`` (the paper's ``n_cascaded``)."""
    return sum(
        1
        for p, d in zip(pairs, decisions, strict=True)
        if d.verdict is Verdict.CASCADE and not p.excluded
    )
