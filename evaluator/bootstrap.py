"""Percentile bootstrap of precision, recall and F1 over problems, vectorised, in bounded memory.

docs/decision-layer.md, "Metric policy" and "Bootstrap": 95% percentile intervals, B = 10,000
resamples of *problems* with replacement, seedable; paired intervals of an F1 difference between
two methods on the same resamples.

Shape after scipy's ``stats/_resampling.py``: each public function validates its input and
names the bad parameter, the arithmetic is plain numpy, results are frozen dataclasses.

The resamples are never stored whole: at B = 10,000 over 56,000 problems a ``(B, n_problems)``
int64 index matrix is 4.5 GB. :func:`resample_indices` returns :class:`Resamples`, a recipe
that regenerates the matrix in chunks of at most ``BOOTSTRAP_CHUNK_CELLS`` indices (whole
rows; one row when a row is larger). Index ``(b, j)`` is made from the ``(b * n_problems +
j)``-th 64-bit output of a PCG64 stream seeded with the seed, so chunk ``k`` is regenerated
from (seed, k) alone (``PCG64.advance`` jumps to its first cell) and the resamples do not
depend on the chunk size: every row of a report and both sides of a paired difference see
exactly the same resamples, and the same ones whatever the chunk limit.

Resampled totals come from fancy indexing, one chunk at a time: the count columns of every row
are packed into uint64 words per problem (each field wide enough that no resample total
carries into the next), so one gather ``word[chunk]`` and a row sum total several columns of
every resample in the chunk at once. Only the ``(B, 4)`` totals per row are kept, and
:func:`resampled_totals_rows` / :func:`bootstrap_rows` total many rows over one pass of the
chunks, drawing each chunk once. There is no Python loop per resample
(:func:`resampled_totals_loop` is that loop, kept as the reference for tests and benchmarks).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from threadpoolctl import threadpool_limits

from cotaudit.constants import BOOTSTRAP_CHUNK_CELLS, BOOTSTRAP_CONFIDENCE, BOOTSTRAP_RESAMPLES
from evaluator.cpus import usable_cpus
from evaluator.metrics import FN, FP, TP, Counts, FloatArray, Scores, prf, scores

IndexMatrix = npt.NDArray[np.intp]  # (rows, n_problems) problem indices
UIntArray = npt.NDArray[np.uint64]

DEFAULT_N_RESAMPLES = BOOTSTRAP_RESAMPLES  # B = 10,000 (docs/decision-layer.md)
DEFAULT_CONFIDENCE = BOOTSTRAP_CONFIDENCE
# 2**17 indices (1 MiB as intp, plus as much gathered) stay in a core's cache between drawing
# and gathering: measured fastest among 2**15-2**24 on the 2-core development machine, where
# 2**24 is 5x slower to draw (each pass over the chunk then goes to memory).
DEFAULT_CHUNK_CELLS = BOOTSTRAP_CHUNK_CELLS
# From this many problems on, resampled totals are a matrix product of how often each
# resample drew each problem with the count columns, rather than gathers: the gathered
# columns then outgrow the caches (measured: 56,200 problems, B = 10,000, 14 rows).
MULTIPLICITY_MIN = 8192
# ... drawn in blocks of this many indices (16 MiB as intp; about three times that in use
# while a block is counted), so that each product reads the count columns once per block.
MULTIPLICITY_CHUNK_CELLS = 1 << 21
# Threads sharing a multiplicity pass's blocks: two, or one where one CPU is usable.
BOOTSTRAP_THREADS = min(2, usable_cpus())

# A raw 64-bit draw keeps its top 53 bits (a double's mantissa): floor(u * n) with u the
# double in [0, 1) is an index in [0, n) (for n < 2**53 the product rounds below n), uniform to
# within n / 2**53, and it uses exactly one draw per index, which is what lets a chunk start
# anywhere in the stream. (numpy's Generator.integers rejects draws, so its position in the
# stream after a chunk depends on the draws themselves.)
_RAW_SHIFT = np.uint64(11)
_UNIT = 2.0**-53


def _positive_int(value: object, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a positive int, got {value!r}")
    return value


def _entropy(rng: np.random.Generator | int | None) -> tuple[int, int | None]:
    """The stream's seed and the int seed to record (None: drawn from a Generator or fresh)."""
    if isinstance(rng, np.random.Generator):
        # One draw from the caller's Generator seeds the stream: the Generator advances, so
        # two calls with it get different resamples, as two draws from it would.
        return int(rng.integers(0, 2**63)), None
    if rng is None:
        entropy = np.random.SeedSequence().entropy
        assert isinstance(entropy, int)  # a fresh SeedSequence draws an int from the OS
        return entropy, None
    if isinstance(rng, int) and not isinstance(rng, bool):
        if rng < 0:
            raise ValueError(f"rng seed must be non-negative, got {rng!r}")
        return rng, rng
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
    return idx.astype(np.intp, copy=False)


def _check_range(block: IndexMatrix, n_problems: int) -> IndexMatrix:
    # One pass: seen as unsigned, a negative index is huge, so max() catches both ends.
    if int(block.view(np.uintp).max()) >= n_problems:
        raise ValueError(f"indices must be integers in [0, {n_problems})")
    return block


def _draw_into(
    bits: np.random.PCG64, n_problems: int, out: IndexMatrix, scratch: FloatArray
) -> None:
    """Fill flat ``out`` with the next ``out.size`` indices of the stream (see ``_RAW_SHIFT``)."""
    raw = bits.random_raw(out.size)
    np.right_shift(raw, _RAW_SHIFT, out=raw)
    np.multiply(raw, n_problems * _UNIT, out=scratch, casting="unsafe")
    np.copyto(out, scratch, casting="unsafe")  # truncation is floor: every value is >= 0


@dataclass(frozen=True, slots=True)
class Resamples:
    """``n_resamples`` resamples of ``n_problems`` problems, regenerated chunk by chunk.

    A recipe, not a matrix: :meth:`chunks` draws the ``(n_resamples, n_problems)`` index matrix
    in blocks of ``chunk_rows`` whole rows (at most ``chunk_cells`` indices, or one row), and
    drawing it again gives the same indices, so every row of a report shares it without it
    being stored. Chunk ``k`` alone is :meth:`chunk`. The indices do not depend on
    ``chunk_cells``. Being drawn here, they lie in ``[0, n_problems)`` and are not re-checked.
    """

    n_problems: int
    n_resamples: int
    seed: int | None  # the int seed, or None when drawn from a caller's Generator or fresh
    entropy: int  # the stream's seed (equal to ``seed`` when that is an int)
    chunk_cells: int = DEFAULT_CHUNK_CELLS

    @property
    def chunk_rows(self) -> int:
        """Resamples per chunk: as many whole rows as fit in ``chunk_cells``, at least one."""
        return max(1, min(self.n_resamples, self.chunk_cells // self.n_problems))

    @property
    def n_chunks(self) -> int:
        return -(-self.n_resamples // self.chunk_rows)

    def _bits(self) -> np.random.PCG64:
        return np.random.PCG64(np.random.SeedSequence(self.entropy))

    def chunk(self, number: int) -> IndexMatrix:
        """Chunk ``number`` (rows ``number * chunk_rows`` on), drawn on its own."""
        if isinstance(number, bool) or not isinstance(number, int):
            raise TypeError(f"chunk number must be an int, got {type(number).__name__}")
        if not 0 <= number < self.n_chunks:
            raise ValueError(f"chunk number must be in [0, {self.n_chunks}), got {number}")
        start = number * self.chunk_rows
        rows = min(self.chunk_rows, self.n_resamples - start)
        bits = self._bits()
        bits.advance(start * self.n_problems)
        out = np.empty(rows * self.n_problems, dtype=np.intp)
        _draw_into(bits, self.n_problems, out, np.empty(out.size, dtype=np.float64))
        return out.reshape(rows, self.n_problems)

    def chunks(self, numbers: range | None = None) -> Iterator[tuple[int, IndexMatrix]]:
        """``(first row, block)`` for every chunk in order (or for the chunks ``numbers``,
        consecutive), the same as :meth:`chunk` gives.

        The block is a buffer reused by the next chunk: copy it to keep it.
        """
        n, step = self.n_problems, self.chunk_rows
        numbers = numbers if numbers is not None else range(self.n_chunks)
        bits = self._bits()  # drawing chunks in order continues one stream: one advance
        if numbers:
            bits.advance(numbers[0] * step * n)
        out = np.empty(step * n, dtype=np.intp)
        scratch = np.empty(out.size, dtype=np.float64)
        for start in range(numbers.start * step, min(numbers.stop * step, self.n_resamples), step):
            rows = min(self.chunk_rows, self.n_resamples - start)
            block = out[: rows * n]
            _draw_into(bits, n, block, scratch[: rows * n])
            yield start, block.reshape(rows, n)

    def matrix(self) -> IndexMatrix:
        """The whole ``(n_resamples, n_problems)`` matrix: for tests and small references only."""
        out = np.empty((self.n_resamples, self.n_problems), dtype=np.intp)
        for start, block in self.chunks():
            out[start : start + block.shape[0]] = block
        return out


IndexLike = Resamples | npt.ArrayLike


def _index_chunks(
    indices: IndexLike, n_problems: int
) -> tuple[int, Iterator[tuple[int, IndexMatrix]]]:
    """``(n_resamples, chunks)`` of drawn resamples or of a caller's (checked) index matrix."""
    if isinstance(indices, Resamples):
        if indices.n_problems != n_problems:
            raise ValueError(
                f"indices were drawn for {indices.n_problems} problems, the counts have "
                f"{n_problems}; draw them with resample_indices({n_problems}, ...)"
            )
        return indices.n_resamples, indices.chunks()
    idx = _check_indices(indices, n_problems)
    rows = max(1, DEFAULT_CHUNK_CELLS // n_problems)
    # The range is checked chunk by chunk, while the chunk is in cache for its gather.
    chunks = (
        (s, _check_range(idx[s : s + rows], n_problems)) for s in range(0, idx.shape[0], rows)
    )
    return idx.shape[0], chunks


def _check_confidence(confidence_level: float) -> float:
    if not 0.0 < confidence_level < 1.0:
        raise ValueError(f"confidence_level must be in (0, 1), got {confidence_level!r}")
    return float(confidence_level)


def resample_indices(
    n_problems: int,
    n_resamples: int = DEFAULT_N_RESAMPLES,
    *,
    rng: np.random.Generator | int | None = None,
    chunk_cells: int = DEFAULT_CHUNK_CELLS,
) -> Resamples:
    """``n_resamples`` resamples of problem indices drawn with replacement, seeded by ``rng``.

    Nothing is drawn yet: the returned :class:`Resamples` draws its chunks when they are used.
    ``chunk_cells`` bounds the indices held at once (memory, not results).
    """
    _positive_int(n_problems, "n_problems")
    _positive_int(n_resamples, "n_resamples")
    _positive_int(chunk_cells, "chunk_cells")
    entropy, seed = _entropy(rng)
    return Resamples(n_problems, n_resamples, seed, entropy, chunk_cells)


@dataclass(frozen=True, slots=True)
class _Field:
    """Where one count column of one row sits in the packed words."""

    row: int
    col: int
    word: int
    shift: int
    width: int


def _pack(rows: Sequence[Counts], n_draws: int) -> tuple[list[UIntArray], list[_Field]]:
    """Pack every count column of every row into as few uint64 words per problem as fit.

    Each column gets ``width`` bits, enough for its largest possible resample total
    (``n_draws`` times its largest per-problem count), so summing packed words over any
    resample sums every field exactly and no field overflows into the next. Columns of
    different rows share words (first fit, in order): at 56,000 problems a column needs about
    20 bits, so 14 rows take 19 words instead of 28, and each word is one gather.
    """
    n = rows[0].shape[0]
    words: list[UIntArray] = []
    fields: list[_Field] = []
    used = 64  # bits taken in the last word: a full word forces a new one
    for r, arr in enumerate(rows):
        for col in range(4):
            width = max(1, (int(arr[:, col].max()) * n_draws).bit_length())
            if width > 64:
                raise ValueError("counts are too large to sum exactly in 64 bits")
            if used + width > 64:
                words.append(np.zeros(n, dtype=np.uint64))
                used = 0
            words[-1] |= arr[:, col].astype(np.uint64) << np.uint64(used)
            fields.append(_Field(r, col, len(words) - 1, used, width))
            used += width
    return words, fields


def _totals_by_multiplicity(rows: Sequence[Counts], resamples: Resamples) -> list[FloatArray]:
    """:func:`_totals` for many problems: each resample as how often it drew each problem
    (one ``bincount`` per block of resamples), times the count columns of every row (one
    matrix product). Exact: every product and partial sum is an integer below 2**53.

    A gather touches each count column once per drawn index, and with tens of thousands of
    problems the columns no longer sit in the nearest caches; the product reads them once
    per block of resamples instead.
    """
    n = resamples.n_problems
    columns = np.concatenate([r.astype(np.float64) for r in rows], axis=1)  # (n, 4 * rows)
    if float(columns.max(initial=0.0)) * n >= 2.0**53:
        raise ValueError("counts are too large to sum exactly in 64-bit floats")
    wide = Resamples(
        n, resamples.n_resamples, resamples.seed, resamples.entropy, MULTIPLICITY_CHUNK_CELLS
    )
    sums = np.empty((resamples.n_resamples, columns.shape[1]), dtype=np.float64)

    def fill(numbers: range) -> None:
        for start, block in wide.chunks(numbers):
            r = block.shape[0]
            block += (np.arange(r, dtype=np.intp) * n)[:, None]  # row b at b * n + index
            drawn = np.bincount(block.ravel(), minlength=r * n).reshape(r, n)
            np.matmul(drawn.astype(np.float64), columns, out=sums[start : start + r])

    # The blocks are independent (each drawn from its place in the stream, summed into its
    # own rows), so threads share them out with the same result: numpy lets go of the GIL
    # while it draws, counts and multiplies. The statistics run after the last audit, when
    # the worker processes are idle. One BLAS thread each: on a shared two-core machine a
    # multi-threaded product was up to ten times slower (it spun waiting for a core).
    threads = min(BOOTSTRAP_THREADS, wide.n_chunks)
    shares = _consecutive(wide.n_chunks, threads)
    with threadpool_limits(limits=1, user_api="blas"):
        if threads == 1:
            fill(shares[0])
        else:
            with ThreadPoolExecutor(threads, thread_name_prefix="cotaudit-bootstrap") as pool:
                for done in [pool.submit(fill, share) for share in shares]:
                    done.result()
    return [np.ascontiguousarray(sums[:, 4 * i : 4 * i + 4]) for i in range(len(rows))]


def _consecutive(n: int, parts: int) -> list[range]:
    """``range(n)`` cut into ``parts`` consecutive ranges of sizes differing by at most one."""
    cuts = [n * p // parts for p in range(parts + 1)]
    return [range(a, b) for a, b in itertools.pairwise(cuts)]


def _totals(rows: Sequence[Counts], indices: IndexLike) -> list[FloatArray]:
    """``(B, 4)`` resampled totals of every row in one pass over the chunks of ``indices``."""
    n = rows[0].shape[0]
    if (
        isinstance(indices, Resamples)
        and indices.n_problems == n
        and n >= MULTIPLICITY_MIN
        and indices.chunk_cells >= DEFAULT_CHUNK_CELLS  # a smaller bound asked for: gather
    ):
        return _totals_by_multiplicity(rows, indices)
    n_resamples, chunks = _index_chunks(indices, n)
    words, fields = _pack(rows, n)
    sums = np.empty((len(words), n_resamples), dtype=np.uint64)
    gathered: UIntArray | None = None
    for start, block in chunks:
        stop = start + block.shape[0]
        if gathered is None or gathered.shape != block.shape:
            gathered = np.empty(block.shape, dtype=np.uint64)
        for w, word in enumerate(words):
            # Indices are in range (checked or drawn here): "clip" skips numpy's own check.
            np.take(word, block, mode="clip", out=gathered)
            gathered.sum(axis=1, dtype=np.uint64, out=sums[w, start:stop])
    out = [np.empty((n_resamples, 4), dtype=np.float64) for _ in rows]
    for f in fields:
        mask = np.uint64((1 << f.width) - 1)
        out[f.row][:, f.col] = (sums[f.word] >> np.uint64(f.shift)) & mask
    return out


def _check_rows(rows: Sequence[npt.ArrayLike], names: Sequence[str]) -> list[Counts]:
    arrs = [_check_counts(c, name) for c, name in zip(rows, names, strict=True)]
    for arr, name in zip(arrs[1:], names[1:], strict=True):
        if arr.shape != arrs[0].shape:
            raise ValueError(
                f"{name} {arr.shape} and {names[0]} {arrs[0].shape} must cover the same "
                "problems in the same order"
            )
    return arrs


def resampled_totals(counts: npt.ArrayLike, indices: IndexLike) -> FloatArray:
    """Summed ``(tp, fp, fn, tn)`` of every resample: ``(B, 4)``, by fancy indexing per chunk."""
    return _totals([_check_counts(counts)], indices)[0]


def resampled_totals_rows(rows: Sequence[npt.ArrayLike], indices: IndexLike) -> list[FloatArray]:
    """:func:`resampled_totals` of several rows on the same problems, drawing each chunk once."""
    if not rows:
        raise ValueError("rows is empty; pass at least one (n_problems, 4) counts array")
    return _totals(_check_rows(rows, [f"rows[{i}]" for i in range(len(rows))]), indices)


def resampled_totals_loop(counts: npt.ArrayLike, indices: IndexLike) -> FloatArray:
    """The same as :func:`resampled_totals` by a Python loop over resamples (reference only)."""
    arr = _check_counts(counts)
    n_resamples, chunks = _index_chunks(indices, arr.shape[0])
    out = np.empty((n_resamples, 4), dtype=np.float64)
    for start, block in chunks:
        for b in range(block.shape[0]):
            out[start + b] = arr[block[b]].sum(axis=0)
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

    ``seed`` is the int seed the resamples were drawn with, or ``None`` when the caller
    passed a Generator or explicit indices (then the caller records its own seed).
    """

    point: Scores
    precision: Interval
    recall: Interval
    f1: Interval
    n_resamples: int
    confidence_level: float
    seed: int | None


def _result(arr: Counts, totals: FloatArray, level: float, seed: int | None) -> BootstrapResult:
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


def _seed_of(indices: IndexLike) -> int | None:
    return indices.seed if isinstance(indices, Resamples) else None


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
    the int seed the resamples were drawn with, when known. For many rows on the same
    resamples :func:`bootstrap_rows` draws them once instead of once per row.
    """
    arr = _check_counts(counts)
    level = _check_confidence(confidence_level)
    if indices is None:
        indices = resample_indices(arr.shape[0], n_resamples, rng=rng)
    return _result(arr, _totals([arr], indices)[0], level, _seed_of(indices))


@dataclass(frozen=True, slots=True)
class PairedDifference:
    """F1 of method a minus F1 of method b, with its interval over shared resamples."""

    difference: float
    interval: Interval
    n_resamples: int
    confidence_level: float


def _paired(a: Counts, b: Counts, ta: FloatArray, tb: FloatArray, level: float) -> PairedDifference:
    fa = prf(ta[:, TP], ta[:, FP], ta[:, FN])[2]
    fb = prf(tb[:, TP], tb[:, FP], tb[:, FN])[2]
    return PairedDifference(
        difference=scores(a).f1 - scores(b).f1,
        interval=_summarise(fa - fb, level),
        n_resamples=int(ta.shape[0]),
        confidence_level=level,
    )


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
    a, b = _check_rows([counts_a, counts_b], ["counts_a", "counts_b"])
    level = _check_confidence(confidence_level)
    if indices is None:
        indices = resample_indices(a.shape[0], n_resamples, rng=rng)
    ta, tb = _totals([a, b], indices)
    return _paired(a, b, ta, tb, level)


@dataclass(frozen=True, slots=True, eq=False)
class BootstrapTable:
    """:func:`bootstrap_rows`: every row's result and the requested paired differences."""

    rows: Mapping[str, BootstrapResult]
    paired: Mapping[tuple[str, str], PairedDifference]
    n_resamples: int
    confidence_level: float
    seed: int | None


def bootstrap_rows(
    rows: Mapping[str, npt.ArrayLike],
    *,
    paired: Sequence[tuple[str, str]] = (),
    n_resamples: int = DEFAULT_N_RESAMPLES,
    confidence_level: float = DEFAULT_CONFIDENCE,
    rng: np.random.Generator | int | None = None,
    indices: IndexLike | None = None,
) -> BootstrapTable:
    """:func:`bootstrap_scores` of every row and :func:`paired_f1_difference` of every
    ``(a, b)`` pair of row names in ``paired``, all on the same resamples, drawn once.

    Equal, row for row, to calling those functions with the same ``indices``; memory is one
    chunk of indices plus ``(B, 4)`` totals per row.
    """
    if not rows:
        raise ValueError("rows is empty; pass at least one name -> (n_problems, 4) counts")
    for a, b in paired:
        for name in (a, b):
            if name not in rows:
                raise ValueError(f"paired row {name!r} is not in rows ({', '.join(rows)})")
    names = list(rows)
    arrs = _check_rows([rows[k] for k in names], names)
    level = _check_confidence(confidence_level)
    if indices is None:
        indices = resample_indices(arrs[0].shape[0], n_resamples, rng=rng)
    seed = _seed_of(indices)
    totals = dict(zip(names, _totals(arrs, indices), strict=True))
    counts = dict(zip(names, arrs, strict=True))
    return BootstrapTable(
        rows={k: _result(counts[k], totals[k], level, seed) for k in names},
        paired={
            (a, b): _paired(counts[a], counts[b], totals[a], totals[b], level) for a, b in paired
        },
        n_resamples=int(totals[names[0]].shape[0]),
        confidence_level=level,
        seed=seed,
    )
