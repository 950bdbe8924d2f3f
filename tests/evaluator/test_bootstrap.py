"""The chunked, vectorised bootstrap against a per-resample loop, scipy, degenerate inputs,
chunk sizes and memory."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from evaluator.bootstrap import (
    bootstrap_rows,
    bootstrap_scores,
    paired_f1_difference,
    resample_indices,
    resampled_totals,
    resampled_totals_loop,
    resampled_totals_rows,
)
from evaluator.metrics import FN, FP, TP, prf


def synthetic_counts(n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    tp = rng.poisson(3.0, n)
    fp = rng.poisson(1.0, n)
    fn = rng.poisson(1.0, n)
    tn = rng.poisson(12.0, n)
    return np.stack([tp, fp, fn, tn], axis=1).astype(np.int64)


def test_vectorised_totals_equal_the_loop_and_cis_agree_to_1e12() -> None:
    counts = synthetic_counts(60, seed=1)
    idx = resample_indices(60, 2_000, rng=7)
    fast = resampled_totals(counts, idx)
    slow = resampled_totals_loop(counts, idx)
    assert np.array_equal(fast, slow)
    result = bootstrap_scores(counts, indices=idx)
    f1 = prf(slow[:, TP], slow[:, FP], slow[:, FN])[2]
    low, high = np.percentile(f1, [2.5, 97.5])
    assert abs(result.f1.low - low) <= 1e-12
    assert abs(result.f1.high - high) <= 1e-12


def test_totals_are_exact_for_large_counts_and_many_blocks() -> None:
    # Counts so large that one uint64 word holds fewer than four fields, and more resamples
    # than one gather block: the packed sums must still equal the loop exactly.
    rng = np.random.default_rng(2)
    counts = rng.integers(0, 5_000_000, size=(300, 4))
    idx = resample_indices(300, 2_000, rng=3)
    assert np.array_equal(resampled_totals(counts, idx), resampled_totals_loop(counts, idx))
    small = np.array([[1, 0, 2, 3], [0, 4, 0, 1]])
    plain = np.array([[0, 0], [1, 0], [1, 1]])
    assert resampled_totals(small, plain).tolist() == [[2, 0, 4, 6], [1, 4, 2, 4], [0, 8, 0, 2]]


def test_percentile_interval_matches_scipy_within_monte_carlo_error() -> None:
    counts = synthetic_counts(50, seed=3)

    def f1_of(sample: np.ndarray, axis: int = -1) -> np.ndarray:
        rows = counts[np.asarray(sample, dtype=np.intp)]  # (..., n, 4)
        totals = rows.sum(axis=-2)
        return prf(totals[..., TP], totals[..., FP], totals[..., FN])[2]

    ref = stats.bootstrap(
        (np.arange(50),),
        f1_of,
        n_resamples=10_000,
        method="percentile",
        vectorized=True,
        rng=np.random.default_rng(11),
    )
    ours = bootstrap_scores(counts, n_resamples=10_000, rng=5)
    assert abs(ours.f1.low - ref.confidence_interval.low) < 0.005
    assert abs(ours.f1.high - ref.confidence_interval.high) < 0.005


def test_seed_is_recorded_and_reproducible() -> None:
    counts = synthetic_counts(20, seed=4)
    a = bootstrap_scores(counts, n_resamples=500, rng=42)
    b = bootstrap_scores(counts, n_resamples=500, rng=42)
    c = bootstrap_scores(counts, n_resamples=500, rng=43)
    assert a.seed == 42 and a == b and a.f1 != c.f1
    shared = resample_indices(20, 500, rng=42)
    assert shared.seed == 42
    assert bootstrap_scores(counts, indices=shared) == a
    raw = bootstrap_scores(counts, indices=shared.matrix())  # a plain, checked array
    assert raw.seed is None and raw.f1 == a.f1
    with pytest.raises(ValueError, match="drawn for 21 problems"):
        bootstrap_scores(counts, indices=resample_indices(21, 10, rng=0))


def test_a_generator_seeds_reproducibly_and_advances() -> None:
    counts = synthetic_counts(20, seed=4)
    g1 = bootstrap_scores(counts, n_resamples=500, rng=np.random.default_rng(42))
    g2 = bootstrap_scores(counts, n_resamples=500, rng=np.random.default_rng(42))
    assert g1.seed is None and g1 == g2
    gen = np.random.default_rng(42)
    first = resample_indices(20, 50, rng=gen)
    second = resample_indices(20, 50, rng=gen)  # the Generator moved on: new resamples
    assert not np.array_equal(first.matrix(), second.matrix())
    fresh = resample_indices(20, 50)  # no seed: OS entropy, recorded as None
    assert fresh.seed is None and not np.array_equal(fresh.matrix(), first.matrix())


def test_degenerate_inputs() -> None:
    one = np.array([[3, 1, 2, 4]])
    r = bootstrap_scores(one, n_resamples=200, rng=0)
    assert r.f1.low == r.f1.high == pytest.approx(r.point.f1)
    assert r.f1.std == pytest.approx(0.0, abs=1e-12)
    zeros = np.zeros((5, 4), dtype=np.int64)
    z = bootstrap_scores(zeros, n_resamples=100, rng=0)
    assert (z.point.f1, z.f1.low, z.f1.high) == (0.0, 0.0, 0.0)
    perfect = np.array([[2, 0, 0, 3], [1, 0, 0, 0]])
    p = bootstrap_scores(perfect, n_resamples=100, rng=0)
    assert p.f1.low == p.f1.high == 1.0


@pytest.mark.parametrize(
    ("counts", "message"),
    [
        (np.zeros((3, 3)), "shape"),
        (np.zeros((0, 4)), "no problems"),
        (np.array([[1, -1, 0, 0]]), "non-negative"),
        (np.array([[1.5, 0, 0, 0]]), "whole-number"),
    ],
)
def test_bad_counts_are_named(counts: np.ndarray, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        bootstrap_scores(counts, n_resamples=10, rng=0)


def test_bad_parameters_are_named() -> None:
    counts = synthetic_counts(4, seed=0)
    with pytest.raises(ValueError, match="n_resamples"):
        resample_indices(4, 0, rng=0)
    with pytest.raises(ValueError, match="n_problems"):
        resample_indices(0, 10, rng=0)
    with pytest.raises(ValueError, match="confidence_level"):
        bootstrap_scores(counts, confidence_level=1.0, rng=0)
    with pytest.raises(ValueError, match="indices"):
        bootstrap_scores(counts, indices=np.array([[0, 1, 2, 9]]))
    with pytest.raises(ValueError, match="indices"):
        bootstrap_scores(counts, indices=np.array([[0, 1, 2, -1]]))
    with pytest.raises(ValueError, match="indices"):
        resampled_totals_loop(counts, np.array([[0, 1, 2, -1]]))
    with pytest.raises(ValueError, match="indices"):
        bootstrap_scores(counts, indices=np.zeros((2, 3), dtype=np.intp))
    with pytest.raises(TypeError, match="rng"):
        resample_indices(4, 10, rng="seed")  # type: ignore[arg-type]


def test_paired_difference_uses_the_same_resamples() -> None:
    a = synthetic_counts(40, seed=8)
    same = paired_f1_difference(a, a, n_resamples=1_000, rng=1)
    assert same.difference == 0.0
    assert same.interval.low == same.interval.high == 0.0
    b = a.copy()
    b[:, FP] += 1  # b is a worse copy of a: every resample's difference is positive
    diff = paired_f1_difference(a, b, n_resamples=1_000, rng=1)
    assert diff.difference > 0 and diff.interval.low > 0
    # Paired intervals are narrower than the spread of two independent intervals.
    ra = bootstrap_scores(a, n_resamples=1_000, rng=1)
    rb = bootstrap_scores(b, n_resamples=1_000, rng=2)
    assert diff.interval.high - diff.interval.low < (ra.f1.high - ra.f1.low) + (
        rb.f1.high - rb.f1.low
    )
    with pytest.raises(ValueError, match="same problems"):
        paired_f1_difference(a, a[:10], n_resamples=10, rng=0)


@pytest.mark.parametrize("chunk_cells", [1, 7, 59, 300, 301, 10_000, 1 << 30])
def test_results_do_not_depend_on_the_chunk_size(chunk_cells: int) -> None:
    counts = synthetic_counts(60, seed=9)
    whole = resample_indices(60, 1_000, rng=21, chunk_cells=1 << 30)
    assert whole.n_chunks == 1
    chunked = resample_indices(60, 1_000, rng=21, chunk_cells=chunk_cells)
    assert chunked.chunk_rows == max(1, min(1_000, chunk_cells // 60))
    assert np.array_equal(chunked.matrix(), whole.matrix())
    assert np.array_equal(resampled_totals(counts, chunked), resampled_totals(counts, whole))
    assert bootstrap_scores(counts, indices=chunked) == bootstrap_scores(counts, indices=whole)


def test_each_chunk_is_regenerated_alone_and_every_call_draws_the_same() -> None:
    resamples = resample_indices(70, 333, rng=5, chunk_cells=700)  # 10 rows a chunk, 34 chunks
    assert (resamples.chunk_rows, resamples.n_chunks) == (10, 34)
    matrix = resamples.matrix()
    assert matrix.shape == (333, 70) and matrix.dtype == np.intp
    assert np.array_equal(resample_indices(70, 333, rng=5, chunk_cells=700).matrix(), matrix)
    starts = []
    for start, block in resamples.chunks():
        starts.append(start)
        number = start // resamples.chunk_rows
        assert np.array_equal(resamples.chunk(number), block)
        assert np.array_equal(block, matrix[start : start + block.shape[0]])
    assert starts == list(range(0, 333, 10))
    assert resamples.chunk(33).shape == (3, 70)  # the last chunk holds the remainder
    with pytest.raises(ValueError, match="chunk number"):
        resamples.chunk(34)
    counts = synthetic_counts(70, seed=2)
    once = bootstrap_scores(counts, indices=resamples)
    assert bootstrap_scores(counts, indices=resamples) == once  # drawn again, same resamples


def test_indices_are_in_range_and_uniform() -> None:
    for n in (1, 2, 3, 7, 65_537):
        m = resample_indices(n, 30, rng=n).matrix()
        assert m.min() >= 0 and m.max() < n
    # 7 problems x 200,000 draws: every problem's frequency within 5 sigma of 1/7.
    draws = resample_indices(7, 200_000, rng=1).matrix()
    freq = np.bincount(draws.ravel(), minlength=7) / draws.size
    sigma = np.sqrt((1 / 7) * (6 / 7) / draws.size)
    assert np.all(np.abs(freq - 1 / 7) < 5 * sigma)


def test_memory_stays_within_a_chunk_for_huge_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    import tracemalloc

    import evaluator.bootstrap as bootstrap

    n, b = 100_000, 200  # a whole intp index matrix would be 160 MB
    counts = synthetic_counts(n, seed=1)
    resamples = resample_indices(n, b, rng=3, chunk_cells=1 << 10)  # smaller than one row
    assert resamples.chunk_rows == 1
    drawn: list[int] = []
    real_draw = bootstrap._draw_into

    def spy(bits: np.random.PCG64, n_problems: int, out: np.ndarray, scratch: np.ndarray) -> None:
        drawn.append(out.size)
        real_draw(bits, n_problems, out, scratch)

    monkeypatch.setattr(bootstrap, "_draw_into", spy)
    tracemalloc.start()  # numpy reports its array buffers to tracemalloc
    try:
        table = bootstrap_rows(
            {"a": counts, "b": counts[::-1]}, paired=[("a", "b")], indices=resamples
        )
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert drawn == [n] * b  # one row (the smallest whole chunk) at a time
    # Counts, their packed words, a few row-sized buffers and (B, 4) totals: far below 160 MB.
    assert peak < 40 * n * 8, peak
    assert table.rows["a"].f1 == bootstrap_scores(counts, indices=resample_indices(n, b, rng=3)).f1


def test_rows_share_one_pass_and_equal_single_calls() -> None:
    a = synthetic_counts(50, seed=11)
    b = a.copy()
    b[:, FP] += 1
    big = np.random.default_rng(3).integers(0, 5_000_000, size=(50, 4))  # several words
    resamples = resample_indices(50, 800, rng=8, chunk_cells=333)
    table = bootstrap_rows({"a": a, "b": b, "big": big}, paired=[("a", "b")], indices=resamples)
    assert table.seed == 8 and table.n_resamples == 800
    for key, counts in (("a", a), ("b", b), ("big", big)):
        assert table.rows[key] == bootstrap_scores(counts, indices=resamples)
    assert table.paired[("a", "b")] == paired_f1_difference(a, b, indices=resamples)
    many = resampled_totals_rows([a, big], resamples)
    assert np.array_equal(many[0], resampled_totals_loop(a, resamples))
    assert np.array_equal(many[1], resampled_totals_loop(big, resamples))
    same = bootstrap_rows({"a": a}, n_resamples=800, rng=8)
    assert same.rows["a"] == table.rows["a"]
    with pytest.raises(ValueError, match="paired row 'c'"):
        bootstrap_rows({"a": a}, paired=[("a", "c")], indices=resamples)
    with pytest.raises(ValueError, match="same problems"):
        bootstrap_rows({"a": a, "short": a[:10]}, indices=resamples)
    with pytest.raises(ValueError, match="rows is empty"):
        resampled_totals_rows([], resamples)


def test_many_problems_take_the_product_path_and_give_the_same_totals(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # From MULTIPLICITY_MIN problems on, totals are counts-of-draws times columns: exactly the
    # gathered sums (and the loop's), on the same resamples.
    import evaluator.bootstrap as bootstrap

    n = bootstrap.MULTIPLICITY_MIN + 7
    rows = [synthetic_counts(n, seed=s) for s in (1, 2, 3)]
    resamples = resample_indices(n, 60, rng=11)
    product = resampled_totals_rows(rows, resamples)
    monkeypatch.setattr(bootstrap, "MULTIPLICITY_MIN", n + 1)
    gathered = resampled_totals_rows(rows, resamples)
    for a, b in zip(product, gathered, strict=True):
        assert np.array_equal(a, b)
    assert np.array_equal(product[0], resampled_totals_loop(rows[0], resamples))


def test_threads_sharing_the_product_path_give_the_same_totals(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The blocks of resamples are shared out among threads, each drawing its consecutive
    # blocks from its place in the stream: the same totals as one thread drawing them all.
    import evaluator.bootstrap as bootstrap

    n = bootstrap.MULTIPLICITY_MIN + 7
    rows = [synthetic_counts(n, seed=s) for s in (4, 5)]
    resamples = resample_indices(n, 61, rng=12)
    monkeypatch.setattr(bootstrap, "MULTIPLICITY_CHUNK_CELLS", 4 * n)  # 16 blocks of 4 rows
    monkeypatch.setattr(bootstrap, "BOOTSTRAP_THREADS", 1)
    alone = resampled_totals_rows(rows, resamples)
    monkeypatch.setattr(bootstrap, "BOOTSTRAP_THREADS", 3)
    shared = resampled_totals_rows(rows, resamples)
    for a, b in zip(alone, shared, strict=True):
        assert np.array_equal(a, b)
    assert np.array_equal(shared[1], resampled_totals_loop(rows[1], resamples))


def test_chunks_from_a_place_in_the_stream_are_the_same_blocks() -> None:
    resamples = resample_indices(50, 23, rng=3, chunk_cells=200)  # 4 rows a block, 6 blocks
    every = [(start, block.copy()) for start, block in resamples.chunks()]
    part = [(start, block.copy()) for start, block in resamples.chunks(range(2, 6))]
    assert [start for start, _ in part] == [8, 12, 16, 20]
    for (s1, b1), (s2, b2) in zip(every[2:], part, strict=True):
        assert s1 == s2 and np.array_equal(b1, b2)
    assert part[-1][1].shape == (3, 50)  # the last block holds the rows left
    assert list(resamples.chunks(range(0))) == []
