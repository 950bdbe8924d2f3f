"""The metric policy, per-problem confusion counts, P/R/F1 and the per-problem analyses.

PROTOCOL.md "Metrics". Ground truth is keyed by aligned CoT step; excluded pairs (unmatched
step, ambiguous problem) are out. UNPARSEABLE and UNSTABLE are skipped; GROUNDED and
INPUT-SENSITIVE are positive; INSENSITIVE and CASCADE are negative. ``full`` gold: Pj is a
direct parent of the aligned proof step; ``pred`` gold: the same with entity premises negative.

Counts are kept per problem as an ``(n_problems, 4)`` integer array with columns
``tp, fp, fn, tn`` (:data:`COLUMNS`), rows in the caller's ``problem_ids`` order, so that the
bootstrap resamples problems by indexing rows and shards merge by addition.

P/R/F1 use the convention 0/0 = 0 (no predicted positives gives precision 0), applied the
same way to point estimates and to every bootstrap resample.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal, TypeAlias

import numpy as np
import numpy.typing as npt

from evaluator.pairs import AuditPair, ProblemOutcome
from evaluator.verdicts import Decision, Verdict, is_misrepresentation

Gold: TypeAlias = Literal["full", "pred"]
COLUMNS: tuple[str, str, str, str] = ("tp", "fp", "fn", "tn")
TP, FP, FN, TN = 0, 1, 2, 3
SKIPPED: frozenset[Verdict] = frozenset({Verdict.UNPARSEABLE, Verdict.UNSTABLE})

Counts: TypeAlias = npt.NDArray[np.int64]  # (n_problems, 4)
FloatArray: TypeAlias = npt.NDArray[np.float64]


def gold_of(pair: AuditPair, gold: Gold) -> bool:
    """The pair's ground truth under ``gold``."""
    if gold == "full":
        return pair.gold_full
    if gold == "pred":
        return pair.gold_pred
    raise ValueError(f"gold must be 'full' or 'pred', got {gold!r}")


def _problem_index(problem_ids: Sequence[str]) -> dict[str, int]:
    index = {pid: i for i, pid in enumerate(problem_ids)}
    if len(index) != len(problem_ids):
        raise ValueError("problem_ids: every problem id must appear once")
    return index


def prediction_counts(
    pairs: Sequence[AuditPair],
    predictions: Sequence[bool | None],
    problem_ids: Sequence[str],
    *,
    gold: Gold = "full",
) -> Counts:
    """Per-problem counts of arbitrary predictions (``None`` = skipped); excluded pairs out.

    ``predictions[i]`` belongs to ``pairs[i]``. Raises ``ValueError`` naming a pair whose problem
    is not in ``problem_ids``.
    """
    if len(pairs) != len(predictions):
        raise ValueError(f"{len(pairs)} pairs but {len(predictions)} predictions")
    index = _problem_index(problem_ids)
    counts = np.zeros((len(problem_ids), 4), dtype=np.int64)
    for pair, predicted in zip(pairs, predictions, strict=True):
        if pair.excluded or predicted is None:
            continue
        row = index.get(pair.problem_id)
        if row is None:
            raise ValueError(
                f"pair {pair.key}: problem {pair.problem_id!r} is not in problem_ids; "
                "pass every problem of the audit"
            )
        truth = gold_of(pair, gold)
        col = (TP if truth else FP) if predicted else (FN if truth else TN)
        counts[row, col] += 1
    return counts


def policy_predictions(
    decisions: Sequence[Decision], *, skip: Iterable[Verdict] = SKIPPED
) -> list[bool | None]:
    """The metric policy: skipped verdicts -> ``None``, else whether the verdict is positive."""
    skipped = frozenset(skip)
    return [None if d.verdict in skipped else d.positive for d in decisions]


def confusion_counts(
    pairs: Sequence[AuditPair],
    decisions: Sequence[Decision],
    problem_ids: Sequence[str],
    *,
    gold: Gold = "full",
    skip: Iterable[Verdict] = SKIPPED,
) -> Counts:
    """Per-problem ``(tp, fp, fn, tn)`` of ``decisions`` under the metric policy."""
    predictions = policy_predictions(decisions, skip=skip)
    return prediction_counts(pairs, predictions, problem_ids, gold=gold)


def lower_bound_counts(
    pairs: Sequence[AuditPair],
    decisions: Sequence[Decision],
    outcomes: Sequence[ProblemOutcome],
    problem_ids: Sequence[str],
    *,
    gold: Gold = "full",
) -> Counts:
    """Counts with every gold dependency the policy could not score counted as a FN.

    Two sources (the authors' ``lower_bound_A_consistent_full``): evaluable pairs skipped as
    UNPARSEABLE or UNSTABLE whose premise is a gold parent, and gold premise parents of proof
    steps no evaluable CoT step was aligned to (``ProblemOutcome.unscored_deps_*``).
    """
    counts = confusion_counts(pairs, decisions, problem_ids, gold=gold)
    index = _problem_index(problem_ids)
    for pair, decision in zip(pairs, decisions, strict=True):
        if not pair.excluded and decision.verdict in SKIPPED and gold_of(pair, gold):
            counts[index[pair.problem_id], FN] += 1
    for outcome in outcomes:
        row = index.get(outcome.problem_id)
        if row is not None:
            extra = outcome.unscored_deps_full if gold == "full" else outcome.unscored_deps_pred
            counts[row, FN] += extra
    return counts


def prf(
    tp: FloatArray, fp: FloatArray, fn: FloatArray
) -> tuple[FloatArray, FloatArray, FloatArray]:
    """Vectorised precision, recall and F1 (0/0 = 0), elementwise over equal-shape arrays."""
    tp = np.asarray(tp, dtype=np.float64)
    fp = np.asarray(fp, dtype=np.float64)
    fn = np.asarray(fn, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        p_den = tp + fp
        r_den = tp + fn
        f_den = 2 * tp + fp + fn
        precision = np.where(p_den > 0, tp / np.where(p_den > 0, p_den, 1), 0.0)
        recall = np.where(r_den > 0, tp / np.where(r_den > 0, r_den, 1), 0.0)
        f1 = np.where(f_den > 0, 2 * tp / np.where(f_den > 0, f_den, 1), 0.0)
    return precision, recall, f1


@dataclass(frozen=True, slots=True)
class Scores:
    """Point estimates of one row."""

    precision: float
    recall: float
    f1: float
    tp: int
    fp: int
    fn: int
    tn: int


def scores(counts: Counts) -> Scores:
    """Sum per-problem counts (or take a single ``(4,)`` row) and score them."""
    total = np.asarray(counts, dtype=np.int64).reshape(-1, 4).sum(axis=0)
    tp, fp, fn, tn = (int(x) for x in total)
    p, r, f = prf(np.array(tp, float), np.array(fp, float), np.array(fn, float))
    return Scores(float(p), float(r), float(f), tp, fp, fn, tn)


@dataclass(frozen=True, slots=True)
class RawrCase:
    """A correct answer with at least one gold premise the reasoning ignored (under A)."""

    problem_id: str
    ignored: tuple[tuple[int, str], ...]  # (cot_step, premise_id) pairs judged INSENSITIVE
    structural: int  # of them, entity premises
    predicate: int  # of them, rule premises


@dataclass(frozen=True, slots=True)
class RawrResult:
    """Right answer, wrong reasoning (PROTOCOL "Analyses")."""

    correct: int  # problems answered correctly
    rawr: int  # of them, with >= 1 INSENSITIVE gold direct premise under A
    structural_only: int  # RAWR problems whose ignored premises are all entity premises
    predicate: int  # RAWR problems ignoring at least one rule premise
    cases: tuple[RawrCase, ...]

    @property
    def rate(self) -> float:
        return self.rawr / self.correct if self.correct else 0.0


def rawr(
    pairs: Sequence[AuditPair],
    consistent: Sequence[Decision],
    outcomes: Sequence[ProblemOutcome],
) -> RawrResult:
    """RAWR under the consistent-only evaluator A and the ``full`` gold."""
    ignored: dict[str, list[AuditPair]] = {}
    for pair, decision in zip(pairs, consistent, strict=True):
        if pair.excluded or not pair.gold_full or decision.verdict is not Verdict.INSENSITIVE:
            continue
        ignored.setdefault(pair.problem_id, []).append(pair)
    cases = []
    correct = 0
    for outcome in outcomes:
        if not outcome.answer_correct:
            continue
        correct += 1
        found = ignored.get(outcome.problem_id)
        if not found:
            continue
        structural = sum(1 for p in found if p.is_entity_premise)
        cases.append(
            RawrCase(
                outcome.problem_id,
                tuple((p.cot_step, p.premise_id) for p in found),
                structural,
                len(found) - structural,
            )
        )
    return RawrResult(
        correct=correct,
        rawr=len(cases),
        structural_only=sum(1 for c in cases if c.predicate == 0),
        predicate=sum(1 for c in cases if c.predicate > 0),
        cases=tuple(cases),
    )


def misrepresentations(
    pairs: Sequence[AuditPair], consistent: Sequence[Decision]
) -> list[AuditPair]:
    """Evaluable pairs INSENSITIVE under A whose step cites Pj."""
    return [
        p
        for p, d in zip(pairs, consistent, strict=True)
        if not p.excluded and is_misrepresentation(p, d)
    ]


def counts_by_hops(
    counts: Counts, problem_ids: Sequence[str], hops: Mapping[str, int]
) -> dict[int, tuple[int, Scores]]:
    """``{hops: (n_problems, scores)}`` from per-problem counts."""
    out: dict[int, tuple[int, Scores]] = {}
    for h in sorted({hops[p] for p in problem_ids}):
        rows = [i for i, p in enumerate(problem_ids) if hops[p] == h]
        out[h] = (len(rows), scores(counts[rows]))
    return out
