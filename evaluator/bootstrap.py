"""Percentile bootstrap of precision, recall and F1 over problems, vectorised.

PROTOCOL.md "Metrics": 95% percentile intervals, B = 10,000 resamples of *problems* with
replacement, seedable; paired intervals of an F1 difference between two methods on the same
resamples.

Shape after scipy's ``stats/_resampling.py``: each public function validates its input and
names the bad parameter, the arithmetic is plain numpy, results are frozen dataclasses. One
``(B, n_problems)`` index matrix is drawn once (:func:`resample_indices`) and may be shared by
every row of a report, which is what makes paired differences paired. Resampled totals are a
single matrix product: the index matrix becomes a ``(B, n_problems)`` multiplicity matrix by one
``bincount`` and ``multiplicities @ counts`` sums every resample at once - no Python loop over
resamples (:func:`resampled_totals_loop` is that loop, kept as the reference for tests and
benchmarks).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from evaluator.metrics import FN, FP, TP, Counts, FloatArray, Scores, prf, scores

IndexMatrix = npt.NDArray[np.intp]  # (B, n_problems)

DEFAULT_N_RESAMPLES = 10_000  # resamples (PROTOCOL: B = 10,000)
DEFAULT_CONFIDENCE = 0.95


def _generator(rng: np.random.Generator | int | None) -> np.random.Generator:
    if isinstance(rng, np.random.Generator):
        return rng
    if rng is None or (isinstance(rng, int) and not isinstance(rng, bool)):
        return np.random.default_rng(rng)
    raise TypeError(f"rng must be a numpy Generator, an int seed or None, got {type(rng).__name__}")


def _check_counts(counts: npt.ArrayLike, name: str = "counts") -> Counts:
    arr = np.asarray(counts)
    if arr.ndim != 2 or arr.shape[1] != 4:
        raise ValueError(
            f"{name} must have shape (n_problems, 4) with columns tp, fp, fn, tn; "
            f"got shape {arr.shape}"
        )
    if arr.shape[0] == 0:
        raise ValueError(f"{name} has no problems; the bootstrap needs at least one")
    if not np.issubdtype(arr.dtype, np.integer) and (
        not np.all(np.isfinite(arr)) or np.any(arr != np.round(arr))
    ):
        raise ValueError(f"{name} must hold whole-number counts")
    out = arr.astype(np.int64)
    if np.any(out < 0):
        raise ValueError(f"{name} must be non-negative")
    return out


def _check_indices(indices: npt.ArrayLike, n_problems: int) -> IndexMatrix:
    idx = np.asarray(indices)
    if idx.ndim != 2 or idx.shape[0] == 0 or idx.shape[1] != n_problems:
        raise ValueError(
            f"indices must have shape (n_resamples, {n_problems}) for {n_problems} problems; "
            f"got shape {idx.shape}"
        )
    if not np.issubdtype(idx.dtype, np.integer) or idx.min() < 0 or idx.max() >= n_problems:
        raise ValueError(f"indices must be integers in [0, {n_problems})")
    return idx.astype(np.intp, copy=False)


def _check_confidence(confidence_level: float) -> float:
    if not 0.0 < confidence_level < 1.0:
        raise ValueError(f"confidence_level must be in (0, 1), got {confidence_level!r}")
    return float(confidence_level)


def resample_indices(
    n_problems: int,
    n_resamples: int = DEFAULT_N_RESAMPLES,
    *,
    rng: np.random.Generator | int | None = None,
) -> IndexMatrix:
    """A ``(n_resamples, n_problems)`` matrix of problem indices drawn with replacement."""
    if isinstance(n_problems, bool) or not isinstance(n_problems, int) or n_problems < 1:
        raise ValueError(f"n_problems must be a positive int, got {n_problems!r}")
    if isinstance(n_resamples, bool) or not isinstance(n_resamples, int) or n_resamples < 1:
        raise ValueError(f"n_resamples must be a positive int, got {n_resamples!r}")
    gen = _generator(rng)
    return gen.integers(0, n_problems, size=(n_resamples, n_problems), dtype=np.intp)


def multiplicities(indices: IndexMatrix, n_problems: int) -> FloatArray:
    """How often each problem is drawn in each resample: ``(B, n_problems)``."""
    idx = _check_indices(indices, n_problems)
    n_resamples = idx.shape[0]
    offsets = idx + (np.arange(n_resamples, dtype=np.intp) * n_problems)[:, None]
    flat = np.bincount(offsets.ravel(), minlength=n_resamples * n_problems)
    return flat.reshape(n_resamples, n_problems).astype(np.float64)


def resampled_totals(counts: npt.ArrayLike, indices: IndexMatrix) -> FloatArray:
    """Summed ``(tp, fp, fn, tn)`` of every resample: ``(B, 4)``, by one matrix product."""
    arr = _check_counts(counts)
    weights = multiplicities(indices, arr.shape[0])
    # Float64 holds these integer sums exactly (far below 2**53), and BLAS makes it fast.
    totals: FloatArray = weights @ arr.astype(np.float64)
    return totals


def resampled_totals_loop(counts: npt.ArrayLike, indices: IndexMatrix) -> FloatArray:
    """The same as :func:`resampled_totals` by a Python loop over resamples (reference only)."""
    arr = _check_counts(counts)
    idx = _check_indices(indices, arr.shape[0])
    out = np.empty((idx.shape[0], 4), dtype=np.float64)
    for b in range(idx.shape[0]):
        out[b] = arr[idx[b]].sum(axis=0)
    return out


def _interval(values: FloatArray, confidence_level: float) -> tuple[float, float]:
    alpha = (1.0 - confidence_level) / 2.0
    low, high = np.percentile(values, [100.0 * alpha, 100.0 * (1.0 - alpha)])
    return float(low), float(high)


@dataclass(frozen=True, slots=True)
class Interval:
    """A percentile interval with the resampling distribution's mean and standard deviation."""

    low: float
    high: float
    mean: float
    std: float

    def as_list(self) -> list[float]:
        return [self.low, self.high]


def _summarise(values: FloatArray, confidence_level: float) -> Interval:
    low, high = _interval(values, confidence_level)
    std = float(values.std(ddof=1)) if values.size > 1 else 0.0
    return Interval(low, high, float(values.mean()), std)


@dataclass(frozen=True, slots=True)
class BootstrapResult:
    """Point estimates and percentile intervals of one row.

    ``seed`` is the int seed the index matrix was drawn with, or ``None`` when the caller
    passed a Generator or explicit indices (then the caller records its own seed).
    """

    point: Scores
    precision: Interval
    recall: Interval
    f1: Interval
    n_resamples: int
    confidence_level: float
    seed: int | None


def bootstrap_scores(
    counts: npt.ArrayLike,
    *,
    n_resamples: int = DEFAULT_N_RESAMPLES,
    confidence_level: float = DEFAULT_CONFIDENCE,
    rng: np.random.Generator | int | None = None,
    indices: IndexMatrix | None = None,
) -> BootstrapResult:
    """Percentile intervals of P, R and F1 from per-problem ``(tp, fp, fn, tn)`` counts.

    Pass ``indices`` (from :func:`resample_indices`) to share resamples between rows;
    otherwise they are drawn here from ``rng`` (an int seed is recorded in the result).
    """
    arr = _check_counts(counts)
    level = _check_confidence(confidence_level)
    seed = rng if isinstance(rng, int) and not isinstance(rng, bool) else None
    if indices is None:
        indices = resample_indices(arr.shape[0], n_resamples, rng=rng)
    else:
        seed = None
    totals = resampled_totals(arr, indices)
    p, r, f = prf(totals[:, TP], totals[:, FP], totals[:, FN])
    return BootstrapResult(
        point=scores(arr),
        precision=_summarise(p, level),
        recall=_summarise(r, level),
        f1=_summarise(f, level),
        n_resamples=int(totals.shape[0]),
        confidence_level=level,
        seed=seed,
    )


@dataclass(frozen=True, slots=True)
class PairedDifference:
    """F1 of method a minus F1 of method b, with its interval over shared resamples."""

    difference: float
    interval: Interval
    n_resamples: int
    confidence_level: float


def paired_f1_difference(
    counts_a: npt.ArrayLike,
    counts_b: npt.ArrayLike,
    *,
    indices: IndexMatrix | None = None,
    n_resamples: int = DEFAULT_N_RESAMPLES,
    confidence_level: float = DEFAULT_CONFIDENCE,
    rng: np.random.Generator | int | None = None,
) -> PairedDifference:
    """Paired percentile interval of ``F1(a) - F1(b)``: both rows on the same resamples.

    ``counts_a`` and ``counts_b`` must have their rows in the same problem order.
    """
    a = _check_counts(counts_a, "counts_a")
    b = _check_counts(counts_b, "counts_b")
    if a.shape != b.shape:
        raise ValueError(
            f"counts_a {a.shape} and counts_b {b.shape} must cover the same problems in the "
            "same order"
        )
    level = _check_confidence(confidence_level)
    if indices is None:
        indices = resample_indices(a.shape[0], n_resamples, rng=rng)
    weights = multiplicities(indices, a.shape[0])
    ta = weights @ a.astype(np.float64)
    tb = weights @ b.astype(np.float64)
    fa = prf(ta[:, TP], ta[:, FP], ta[:, FN])[2]
    fb = prf(tb[:, TP], tb[:, FP], tb[:, FN])[2]
    return PairedDifference(
        difference=scores(a).f1 - scores(b).f1,
        interval=_summarise(fa - fb, level),
        n_resamples=int(weights.shape[0]),
        confidence_level=level,
    )
