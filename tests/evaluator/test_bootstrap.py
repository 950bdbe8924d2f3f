"""The vectorised bootstrap against a per-resample loop, scipy, and degenerate inputs."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from evaluator.bootstrap import (
    bootstrap_scores,
    paired_f1_difference,
    resample_indices,
    resampled_totals,
    resampled_totals_loop,
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
    g = bootstrap_scores(counts, n_resamples=500, rng=np.random.default_rng(42))
    assert g.seed is None and g.f1 == a.f1
    shared = resample_indices(20, 500, rng=42)
    assert shared.seed == 42
    assert bootstrap_scores(counts, indices=shared) == a
    raw = bootstrap_scores(counts, indices=np.array(shared.indices))  # a plain, checked array
    assert raw.seed is None and raw.f1 == a.f1
    with pytest.raises(ValueError, match="drawn for 21 problems"):
        bootstrap_scores(counts, indices=resample_indices(21, 10, rng=0))


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


def test_large_index_matrices_are_stored_compactly_and_sum_the_same(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import evaluator.bootstrap as bootstrap

    monkeypatch.setattr(bootstrap, "_COMPACT_ABOVE", 1_000)
    counts = synthetic_counts(300, seed=6)
    compact = resample_indices(300, 50, rng=4)
    assert compact.indices.dtype == np.uint16
    assert np.array_equal(resampled_totals(counts, compact), resampled_totals_loop(counts, compact))
    assert resample_indices(70_000, 2, rng=0).indices.dtype == np.uint32
    assert resample_indices(10, 5, rng=0).indices.dtype == np.intp  # small: fastest layout
