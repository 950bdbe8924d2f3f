"""The metric policy, per-problem confusion counts, P/R/F1 and the per-problem analyses.

docs/decision-layer.md, "Metric policy" and "Bootstrap". Ground truth is keyed by aligned CoT
step; excluded pairs (unmatched step, ambiguous problem) are out. UNPARSEABLE and UNSTABLE are
skipped; GROUNDED and INPUT-SENSITIVE are positive; INSENSITIVE and CASCADE are negative.
``full`` gold: Pj is a direct parent of the aligned proof step; ``pred`` gold: the same with
entity premises negative.

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


def _problem_index(problem_ids: Sequence[str]) -> dict[str, int]:
    index = {pid: i for i, pid in enumerate(problem_ids)}
    if len(index) != len(problem_ids):
        raise ValueError("problem_ids: every problem id must appear once")
    return index


_PREDICTION_CODE = {True: 1, False: 0, None: -1}
_VERDICT_CODE = {v: i for i, v in enumerate(Verdict)}
_POSITIVE_CODES = np.array([_VERDICT_CODE[v] for v in Verdict if v.positive])


@dataclass(frozen=True, slots=True, eq=False)
class PairColumns:
    """The pairs as numpy columns, built once and shared by every row of a report.

    Counting is then a few array operations and one ``bincount`` per row instead of a Python
    loop over pairs per row (a million-pair sweep has a dozen rows).
    """

    problem_ids: tuple[str, ...]
    row: npt.NDArray[np.intp]  # problem row of each pair
    evaluable: npt.NDArray[np.bool_]
    gold_full: npt.NDArray[np.bool_]
    gold_pred: npt.NDArray[np.bool_]

    @classmethod
    def from_pairs(cls, pairs: Sequence[AuditPair], problem_ids: Sequence[str]) -> PairColumns:
        """Raises ``ValueError`` naming a pair whose problem is not in ``problem_ids``."""
        index = _problem_index(problem_ids)
        n = len(pairs)
        try:
            row = np.fromiter((index[p.problem_id] for p in pairs), dtype=np.intp, count=n)
        except KeyError as exc:
            bad = next(p for p in pairs if p.problem_id not in index)
            raise ValueError(
                f"pair {bad.key}: problem {exc.args[0]!r} is not in problem_ids; "
                "pass every problem of the audit"
            ) from None
        full = np.fromiter((p.is_direct_parent for p in pairs), dtype=np.bool_, count=n)
        entity = np.fromiter((p.is_entity_premise for p in pairs), dtype=np.bool_, count=n)
        evaluable = np.fromiter((not p.exclusion_reasons for p in pairs), dtype=np.bool_, count=n)
        return cls(tuple(problem_ids), row, evaluable, full, full & ~entity)

    def __len__(self) -> int:
        return int(self.row.shape[0])

    def gold(self, gold: Gold) -> npt.NDArray[np.bool_]:
        if gold == "full":
            return self.gold_full
        if gold == "pred":
            return self.gold_pred
        raise ValueError(f"gold must be 'full' or 'pred', got {gold!r}")

    def count(
        self,
        predicted: npt.NDArray[np.bool_],
        scored: npt.NDArray[np.bool_],
        *,
        gold: Gold = "full",
    ) -> Counts:
        """Per-problem counts of ``predicted`` over evaluable pairs where ``scored``."""
        truth = self.gold(gold)
        col = np.where(predicted, np.where(truth, TP, FP), np.where(truth, FN, TN))
        keep = scored & self.evaluable
        n_problems = len(self.problem_ids)
        flat = np.bincount(self.row[keep] * 4 + col[keep], minlength=4 * n_problems)
        return flat.reshape(n_problems, 4).astype(np.int64)


def _check_length(columns: PairColumns, values: Sequence[object], what: str) -> None:
    if len(columns) != len(values):
        raise ValueError(f"{len(columns)} pairs but {len(values)} {what}")


def verdict_codes(decisions: Sequence[Decision]) -> npt.NDArray[np.int8]:
    """Each decision's verdict as a small integer (position in :class:`Verdict`)."""
    return np.fromiter(
        (_VERDICT_CODE[d.verdict] for d in decisions), dtype=np.int8, count=len(decisions)
    )


def columns_prediction_counts(
    columns: PairColumns, predictions: Sequence[bool | None], *, gold: Gold = "full"
) -> Counts:
    """:func:`prediction_counts` on prebuilt columns."""
    _check_length(columns, predictions, "predictions")
    code = np.fromiter(
        (_PREDICTION_CODE[p] for p in predictions), dtype=np.int8, count=len(predictions)
    )
    return columns.count(code == 1, code >= 0, gold=gold)


def columns_confusion_counts(
    columns: PairColumns,
    decisions: Sequence[Decision] | npt.NDArray[np.int8],
    *,
    gold: Gold = "full",
    skip: Iterable[Verdict] = SKIPPED,
) -> Counts:
    """:func:`confusion_counts` on prebuilt columns; ``decisions`` may be
    :func:`verdict_codes` already."""
    codes = decisions if isinstance(decisions, np.ndarray) else verdict_codes(decisions)
    if len(columns) != len(codes):
        raise ValueError(f"{len(columns)} pairs but {len(codes)} decisions")
    skipped = np.array([_VERDICT_CODE[v] for v in skip], dtype=np.int8)
    return columns.count(np.isin(codes, _POSITIVE_CODES), ~np.isin(codes, skipped), gold=gold)


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
    columns = PairColumns.from_pairs(pairs, problem_ids)
    return columns_prediction_counts(columns, predictions, gold=gold)


def confusion_counts(
    pairs: Sequence[AuditPair],
    decisions: Sequence[Decision],
    problem_ids: Sequence[str],
    *,
    gold: Gold = "full",
    skip: Iterable[Verdict] = SKIPPED,
) -> Counts:
    """Per-problem ``(tp, fp, fn, tn)`` of ``decisions`` under the metric policy."""
    if len(pairs) != len(decisions):
        raise ValueError(f"{len(pairs)} pairs but {len(decisions)} decisions")
    columns = PairColumns.from_pairs(pairs, problem_ids)
    return columns_confusion_counts(columns, decisions, gold=gold, skip=skip)


def lower_bound_counts(
    pairs: Sequence[AuditPair] | PairColumns,
    decisions: Sequence[Decision] | npt.NDArray[np.int8],
    outcomes: Sequence[ProblemOutcome],
    problem_ids: Sequence[str],
    *,
    gold: Gold = "full",
) -> Counts:
    """Counts with every gold dependency the policy could not score counted as a FN.

    Two sources (the authors' ``lower_bound_A_consistent_full``): evaluable pairs skipped as
    UNPARSEABLE or UNSTABLE whose premise is a gold parent, and gold premise parents of proof
    steps no evaluable CoT step was aligned to (``ProblemOutcome.unscored_deps_*``).
    ``pairs`` may be prebuilt :class:`PairColumns`, ``decisions`` :func:`verdict_codes`.
    """
    columns = (
        pairs if isinstance(pairs, PairColumns) else PairColumns.from_pairs(pairs, problem_ids)
    )
    codes = decisions if isinstance(decisions, np.ndarray) else verdict_codes(decisions)
    counts = columns_confusion_counts(columns, codes, gold=gold)
    skipped = np.isin(codes, np.array([_VERDICT_CODE[v] for v in SKIPPED], dtype=np.int8))
    unscored = skipped & columns.evaluable & columns.gold(gold)
    counts[:, FN] += np.bincount(columns.row[unscored], minlength=len(columns.problem_ids))
    index = _problem_index(problem_ids)
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
    """Right answer, wrong reasoning (docs/decision-layer.md)."""

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
