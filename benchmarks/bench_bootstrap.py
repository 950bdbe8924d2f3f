"""The vectorised bootstrap against a per-resample Python loop over the same resamples.

    /work/venv/bin/python benchmarks/bench_bootstrap.py [--problems 1000] [--resamples 10000]

The resamples come from ``evaluator.bootstrap.resample_indices`` (a recipe that regenerates the
``(B, n_problems)`` index matrix chunk by chunk). Both sides produce 95% percentile intervals
of P, R and F1 from the same indices:

* same indices: the chunks are materialised once (not timed); the loop sums each resample's
  rows and scores it in Python, the vectorised side is ``bootstrap_scores(counts,
  indices=matrix)``. This compares the arithmetic alone.
* incl. drawing: what a report pays, ``bootstrap_scores(counts, indices=resamples)`` drawing
  its chunks as it goes, against the loop drawing the same chunks (``Resamples.chunks``).

Loop and vectorised runs alternate (``--repeat`` rounds) and the median of the per-round
ratios is the headline, which keeps the ratio fair on a machine whose load changes; also
printed: best and median times and the largest F1 CI difference (must be 0 to 1e-12).
Targets: B = 10,000 over 1,000 problems in under 1 s, at least 20x faster than the
loop.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable, Iterable
from statistics import median

import numpy as np

from evaluator.bootstrap import BootstrapResult, bootstrap_scores, resample_indices


def synthetic_counts(n_problems: int, seed: int) -> np.ndarray:
    """Per-problem (tp, fp, fn, tn) shaped like the GPT-4o audit (~20 pairs a problem)."""
    rng = np.random.default_rng(seed)
    return np.stack([rng.poisson(lam, n_problems) for lam in (3.0, 0.8, 0.7, 13.5)], axis=1)


def loop_interval(
    counts: np.ndarray, blocks: Iterable[np.ndarray], n_resamples: int
) -> tuple[float, float]:
    """The reference: one resample at a time, scoring P, R and F1 like the vectorised side."""
    stats = np.empty((n_resamples, 3))
    b = 0
    for block in blocks:
        for sample in block:
            tp, fp, fn, _ = counts[sample].sum(axis=0)
            precision = tp / (tp + fp) if tp + fp else 0.0
            recall = tp / (tp + fn) if tp + fn else 0.0
            f1 = 2 * tp / (2 * tp + fp + fn) if 2 * tp + fp + fn else 0.0
            stats[b] = (precision, recall, f1)
            b += 1
    low, high = np.percentile(stats[:, 2], [2.5, 97.5])
    np.percentile(stats[:, :2], [2.5, 97.5], axis=0)  # P and R intervals, as the other side
    return float(low), float(high)


def timed(fn: Callable[[], object]) -> tuple[float, object]:
    start = time.perf_counter()
    result = fn()
    return time.perf_counter() - start, result


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--problems", type=int, default=1000)
    parser.add_argument("--resamples", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    counts = synthetic_counts(args.problems, args.seed)
    resamples = resample_indices(args.problems, args.resamples, rng=args.seed + 1)
    matrix = resamples.matrix()  # the same indices, materialised once for the "same" runs
    # Loop and vectorised runs alternate, so that each ratio compares two runs under the same
    # machine load; the median ratio is the headline, the best times are printed too.
    loops, vecs, ratios, loops_d, vecs_d, ratios_d = [], [], [], [], [], []
    loop_ci: object = None
    result: object = None
    drawn: object = None
    for _ in range(args.repeat):
        t_loop, loop_ci = timed(lambda: loop_interval(counts, [matrix], args.resamples))
        t_vec, result = timed(lambda: bootstrap_scores(counts, indices=matrix))
        t_loop_d, _ = timed(
            lambda: loop_interval(
                counts, (block for _, block in resamples.chunks()), args.resamples
            )
        )
        t_vec_d, drawn = timed(lambda: bootstrap_scores(counts, indices=resamples))
        loops.append(t_loop)
        vecs.append(t_vec)
        ratios.append(t_loop / t_vec)
        loops_d.append(t_loop_d)
        vecs_d.append(t_vec_d)
        ratios_d.append(t_loop_d / t_vec_d)
    assert isinstance(loop_ci, tuple) and isinstance(result, BootstrapResult)
    assert isinstance(drawn, BootstrapResult)
    vec_ci = (result.f1.low, result.f1.high)
    diff = max(abs(a - b) for a, b in zip(vec_ci, loop_ci, strict=True))
    diff_d = max(abs(a - b) for a, b in zip((drawn.f1.low, drawn.f1.high), loop_ci, strict=True))
    print(
        f"bootstrap B={args.resamples} over {args.problems} problems ({args.repeat} rounds, "
        f"{resamples.n_chunks} chunks of {resamples.chunk_rows} resamples)"
    )
    print(f"  per-resample Python loop : best {min(loops):7.4f} s  median {median(loops):7.4f} s")
    print(f"  vectorised (same indices): best {min(vecs):7.4f} s  median {median(vecs):7.4f} s")
    print(f"  ratio loop/vectorised    : median {median(ratios):5.1f} x  (min {min(ratios):.1f} x)")
    print(
        f"  loop drawing the chunks  : best {min(loops_d):7.4f} s  median {median(loops_d):7.4f} s"
    )
    print(f"  vectorised incl. drawing : best {min(vecs_d):7.4f} s  median {median(vecs_d):7.4f} s")
    print(
        f"  ratio, both drawing      : median {median(ratios_d):5.1f} x  "
        f"(min {min(ratios_d):.1f} x)"
    )
    print(
        f"  F1 95% CI {vec_ci[0]:.6f}..{vec_ci[1]:.6f}; max |vectorised - loop| = {diff:.1e} "
        f"(same indices), {diff_d:.1e} (drawn in chunks)"
    )


if __name__ == "__main__":
    main()
