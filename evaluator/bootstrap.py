"""Percentile bootstrap of precision, recall and F1 over problems, vectorised.

PROTOCOL.md "Metrics": 95% percentile intervals, B = 10,000 resamples of *problems* with
replacement, seedable; paired intervals of an F1 difference between two methods on the same
resamples.

Shape after scipy's ``stats/_resampling.py``: each public function validates its input and
names the bad parameter, the arithmetic is plain numpy, results are frozen dataclasses. One
``(B, n_problems)`` index matrix is drawn once (:func:`resample_indices`) and may be shared by
every row of a report, which is what makes paired differences paired. Resampled totals come
from fancy indexing: the four count columns are packed into one uint64 word per problem (each
field wide enough that no resample total carries into the next), so a single gather
``word[indices]`` and a row sum total tp, fp, fn and tn of every resample at once. The gather
runs over blocks of resamples that fit in cache, never a Python loop per resample
(:func:`resampled_totals_loop` is that loop, kept as the reference for tests and benchmarks).
A multiplicity matrix by ``bincount`` and a matrix product gives the same numbers but writes
and reads a dense ``(B, n_problems)`` float matrix, about 5x slower here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from evaluator.metrics import FN, FP, TP, Counts, FloatArray, Scores, prf, scores
from runner.constants import BOOTSTRAP_CONFIDENCE, BOOTSTRAP_RESAMPLES

IndexMatrix = npt.NDArray[np.integer[Any]]  # (B, n_problems): intp, or uint16/uint32
UIntArray = npt.NDArray[np.uint64]

DEFAULT_N_RESAMPLES = BOOTSTRAP_RESAMPLES  # PROTOCOL: B = 10,000
DEFAULT_CONFIDENCE = BOOTSTRAP_CONFIDENCE


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
    if not np.issubdtype(idx.dtype, np.integer):
        raise ValueError(f"indices must be integers in [0, {n_problems})")
    idx = idx.astype(np.intp, copy=False)
    # One pass: seen as unsigned, a negative index is huge, so max() catches both ends.
    if int(idx.view(np.uintp).max()) >= n_problems:
        raise ValueError(f"indices must be integers in [0, {n_problems})")
    return idx


@dataclass(frozen=True, slots=True, eq=False)
class Resamples:
    """A ``(B, n_problems)`` index matrix drawn by :func:`resample_indices`, and its seed.

    Being drawn here, its entries are known to lie in ``[0, n_problems)``, so functions given a
    ``Resamples`` skip the range check that they run on a plain array (one pass over B x n
    integers, a third of the cost of the totals themselves).
    """

    indices: IndexMatrix
    seed: int | None  # the int seed, or None when drawn from a caller's Generator

    @property
    def n_resamples(self) -> int:
        return int(self.indices.shape[0])

    @property
    def n_problems(self) -> int:
        return int(self.indices.shape[1])


IndexLike = Resamples | npt.ArrayLike


def _as_indices(indices: IndexLike, n_problems: int) -> IndexMatrix:
    if isinstance(indices, Resamples):
        if indices.n_problems != n_problems:
            raise ValueError(
                f"indices were drawn for {indices.n_problems} problems, the counts have "
                f"{n_problems}; draw them with resample_indices({n_problems}, ...)"
            )
        return indices.indices
    return _check_indices(indices, n_problems)


def _check_confidence(confidence_level: float) -> float:
    if not 0.0 < confidence_level < 1.0:
        raise ValueError(f"confidence_level must be in (0, 1), got {confidence_level!r}")
    return float(confidence_level)


# Index matrices with more entries than this (256 MiB as intp) are stored in the narrowest
# unsigned type that holds every problem index (uint16 up to 65,536 problems, else uint32) and
# widened block by block where they are gathered: a quarter of the memory for large sweeps, at
# the price of one cache-hot conversion per block. Smaller ones stay intp, the fastest to gather.
_COMPACT_ABOVE = 1 << 25


def resample_indices(
    n_problems: int,
    n_resamples: int = DEFAULT_N_RESAMPLES,
    *,
    rng: np.random.Generator | int | None = None,
) -> Resamples:
    """A ``(n_resamples, n_problems)`` matrix of problem indices drawn with replacement."""
    if isinstance(n_problems, bool) or not isinstance(n_problems, int) or n_problems < 1:
        raise ValueError(f"n_problems must be a positive int, got {n_problems!r}")
    if isinstance(n_resamples, bool) or not isinstance(n_resamples, int) or n_resamples < 1:
        raise ValueError(f"n_resamples must be a positive int, got {n_resamples!r}")
    gen = _generator(rng)
    seed = rng if isinstance(rng, int) and not isinstance(rng, bool) else None
    dtype: type[np.integer[Any]] = np.intp
    if n_resamples * n_problems > _COMPACT_ABOVE:
        dtype = np.uint16 if n_problems <= 1 << 16 else np.uint32
    matrix = gen.integers(0, n_problems, size=(n_resamples, n_problems), dtype=dtype)
    # Left writeable although shared by every row of a report: numpy's take copies read-only
    # index blocks, which costs a quarter of the gather time.
    return Resamples(matrix, seed)


# Entries per block of the gather: 2**17 uint64 (1 MiB, plus as much index) stay in a core's
# cache instead of materialising a (B, n) temporary; 131 resamples of 1,000 problems per block
# measured fastest among 32-256 on the 2-core development machine.
_BLOCK_ENTRIES = 1 << 17


def _pack(counts: Counts, n_draws: int) -> tuple[int, list[tuple[tuple[int, ...], UIntArray]]]:
    """Pack the 4 count columns into as few uint64 words per problem as fit without carries.

    Each column gets ``width`` bits, enough for its largest possible resample total
    (``n_draws`` times its largest per-problem count), so summing packed words over any
    resample sums every field exactly and no field overflows into the next.
    """
    largest = int(counts.max()) * n_draws
    width = max(1, largest.bit_length())
    per_word = min(4, 64 // width)
    if per_word == 0:
        raise ValueError("counts are too large to sum exactly in 64 bits")
    groups = []
    for start in range(0, 4, per_word):
        cols = tuple(range(start, min(4, start + per_word)))
        word = np.zeros(counts.shape[0], dtype=np.uint64)
        for j, col in enumerate(cols):
            word |= counts[:, col].astype(np.uint64) << np.uint64(width * j)
        groups.append((cols, word))
    return width, groups


def resampled_totals(counts: npt.ArrayLike, indices: IndexLike) -> FloatArray:
    """Summed ``(tp, fp, fn, tn)`` of every resample: ``(B, 4)``, by fancy indexing.

    The counts are packed into uint64 words (:func:`_pack`), so one gather and one row sum
    per block of resamples total all four columns at once; blocks of resamples keep the
    gathered values in cache (77 blocks for B = 10,000 over 1,000 problems).
    """
    arr = _check_counts(counts)
    idx = _as_indices(indices, arr.shape[0])
    width, groups = _pack(arr, idx.shape[1])
    mask = np.uint64((1 << width) - 1) if width < 64 else np.uint64(0xFFFFFFFFFFFFFFFF)
    n_resamples = idx.shape[0]
    block = max(1, _BLOCK_ENTRIES // idx.shape[1])
    out = np.empty((n_resamples, 4), dtype=np.float64)
    for cols, word in groups:
        sums = np.empty(n_resamples, dtype=np.uint64)
        for start in range(0, n_resamples, block):
            # Indices are in range (checked or drawn here): "clip" skips numpy's own check.
            rows = idx[start : start + block]
            if rows.dtype != np.intp:  # a compact matrix (see _COMPACT_ABOVE)
                rows = rows.astype(np.intp)
            gathered = np.take(word, rows, mode="clip")
            sums[start : start + block] = gathered.sum(axis=1, dtype=np.uint64)
        for j, col in enumerate(cols):
            out[:, col] = (sums >> np.uint64(width * j)) & mask
    return out


def resampled_totals_loop(counts: npt.ArrayLike, indices: IndexLike) -> FloatArray:
    """The same as :func:`resampled_totals` by a Python loop over resamples (reference only)."""
    arr = _check_counts(counts)
    idx = _as_indices(indices, arr.shape[0])
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
    indices: IndexLike | None = None,
) -> BootstrapResult:
    """Percentile intervals of P, R and F1 from per-problem ``(tp, fp, fn, tn)`` counts.

    Pass ``indices`` (from :func:`resample_indices`, or any valid index matrix) to share
    resamples between rows; otherwise they are drawn here from ``rng``. The result records
    the int seed the resamples were drawn with, when known.
    """
    arr = _check_counts(counts)
    level = _check_confidence(confidence_level)
    if indices is None:
        indices = resample_indices(arr.shape[0], n_resamples, rng=rng)
    seed = indices.seed if isinstance(indices, Resamples) else None
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
    indices: IndexLike | None = None,
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
    ta = resampled_totals(a, indices)
    tb = resampled_totals(b, indices)
    fa = prf(ta[:, TP], ta[:, FP], ta[:, FN])[2]
    fb = prf(tb[:, TP], tb[:, FP], tb[:, FN])[2]
    return PairedDifference(
        difference=scores(a).f1 - scores(b).f1,
        interval=_summarise(fa - fb, level),
        n_resamples=int(ta.shape[0]),
        confidence_level=level,
    )
