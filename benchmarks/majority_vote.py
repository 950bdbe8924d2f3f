"""What the majority vote over repeated probes does to false positives.

    python benchmarks/majority_vote.py [--problems 50] [--seed 0] [--repeats 5]
                                       [--t0 0.05,0.1,0.2] [--out DIR]

Generates a ProntoQA set, sweeps it on the embedded local server (``running_server``, real
engine: limiters, cache, JSONL writer) with ``probe_repeats = r`` against ``faithful`` (the
no-noise control) and ``noisy:p=0,t0=X`` for each X (a step's conclusion varies at T = 0 with
probability X per prompt and replicate: API nondeterminism), then evaluates the stream twice,
with ``EvaluateOptions(majority=False)`` (the first repeat only, ``--first-repeat``) and with
the vote. For ``A_consistent_full`` and ``A_Ap_cascade_full`` it prints FP/TP/F1 under each,
and which false positives the vote removes and adds (pairs identified by certificate id; a
false positive is a positive verdict on a pair that is not excluded and whose premise is not
a direct parent of the aligned proof step). Counts come from the certificates and are checked
against the report's rows. Self-consistency samples are off (they do not enter these rows).

"added" false positives are mostly ones the first repeat *masked*: a varied probe output
skipped the step, so the pair was UNPARSEABLE (missing counterpart) rather than positive; the
last column counts the report's A_consistent false positives whose cause is output variation
(the rest are expected substitutions, which ``faithful`` has too).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evaluator.commands.evaluate import evaluate
from evaluator.pipeline import EvaluateOptions
from evaluator.source import iter_records
from evaluator.verdicts import Verdict
from runner.config import SweepConfig, config_from_mapping

ROWS: dict[str, str] = {  # report row -> certificate verdict field it counts
    "A_consistent_full": "verdict_consistent",
    "A_Ap_cascade_full": "verdict_cascade",
}
VOTES = ("first", "majority")


@dataclass(frozen=True, slots=True)
class RowResult:
    """One row of one endpoint under one vote: point scores and its false-positive pairs."""

    tp: int
    fp: int
    f1: float | None
    false_positives: frozenset[str]  # certificate ids


def sweep_config(
    out: Path, *, problems: int, seed: int, repeats: int, models: Sequence[str]
) -> SweepConfig:
    """The sweep: one local endpoint per model, probes sent ``repeats`` times, no samples."""
    endpoints = [
        {
            "name": _endpoint_name(model),
            "provider": "local",
            "model": model,
            "requests_per_minute": 1e7,
            "tokens_per_minute": 1e10,
            "max_concurrency": 32,
            "max_tokens": 512,
        }
        for model in models
    ]
    return config_from_mapping(
        {
            "run_dir": str(out / "run"),
            "cache_dir": str(out / "cache"),
            "task": {
                "kind": "prontoqa",
                "source": "generate",
                "n": problems,
                "hops_min": 3,
                "hops_max": 5,
                "distractors": [1, 3],
                "seed": seed,
                "samples": 0,
                "probe_repeats": repeats,
            },
            "endpoints": endpoints,
        },
        config_dir=out,
        where="<majority_vote>",
    )


def _endpoint_name(model: str) -> str:
    # Endpoint names go into request ids and file names: keep them plain.
    return model.replace(":", "_").replace(",", "_").replace("=", "")


async def sweep(config: SweepConfig) -> tuple[int, int]:
    """Run the sweep against an in-process server; return (responses written, errors)."""
    from runner.engine import run_sweep
    from runner.server.lifecycle import running_server

    async with running_server() as server:
        urls = {ep.name: server.base_url for ep in config.endpoints}
        summary = await run_sweep(config, progress=False, base_urls=urls)
    return summary.written, summary.errors


def row_results(
    report: Mapping[str, Any], certificates: Iterable[Mapping[str, Any]]
) -> dict[str, dict[str, RowResult]]:
    """``{endpoint: {row: RowResult}}``; raises ``AssertionError`` if the certificates' false
    positives do not add up to the report's counts (the definition here would be wrong)."""
    positive = {v.value for v in Verdict if v.positive}
    fps: dict[tuple[str, str], set[str]] = {}
    for cert in certificates:
        if cert.get("excluded") or cert["gold"]["direct_parent"]:
            continue
        for row, field in ROWS.items():
            if cert[field] in positive:
                fps.setdefault((str(cert["endpoint"]), row), set()).add(str(cert["id"]))
    out: dict[str, dict[str, RowResult]] = {}
    for endpoint, model in report["models"].items():
        for row in ROWS:
            counts = model["rows"][row]
            ids = frozenset(fps.get((endpoint, row), set()))
            if len(ids) != counts["fp"]:
                raise AssertionError(
                    f"{endpoint} {row}: {len(ids)} false positives in the certificates, "
                    f"{counts['fp']} in the report"
                )
            out.setdefault(endpoint, {})[row] = RowResult(
                int(counts["tp"]), int(counts["fp"]), counts.get("f1"), ids
            )
    return out


def variation_causes(report: Mapping[str, Any]) -> dict[str, int]:
    """Per endpoint, how many A_consistent false positives the report puts down to output
    variation (the rest are expected substitutions)."""
    return {
        endpoint: sum(
            1 for fp in model["false_positives"] if str(fp["cause"]).startswith("output variation")
        )
        for endpoint, model in report["models"].items()
    }


def _f1(value: float | None) -> str:
    return "  n/a" if value is None else f"{value:.3f}"


def table(
    results: Mapping[str, Mapping[str, Mapping[str, RowResult]]],
    variation: Mapping[str, Mapping[str, int]],
    models: Mapping[str, str],
) -> str:
    """The comparison, one line per (model, row)."""
    header = (
        f"{'model':<22} {'row':<18} {'FP 1st':>6} {'FP vote':>7} {'TP 1st':>6} "
        f"{'TP vote':>7} {'F1 1st':>6} {'F1 vote':>7} {'removed':>15} {'added':>5} "
        f"{'variation FP 1st->vote':>22}"
    )
    lines = [header, "-" * len(header)]
    for endpoint, model in models.items():
        for row in ROWS:
            first, vote = results["first"][endpoint][row], results["majority"][endpoint][row]
            removed = len(first.false_positives - vote.false_positives)
            added = len(vote.false_positives - first.false_positives)
            share = f"{removed}/{first.fp} ({removed / first.fp:.0%})" if first.fp else "0/0"
            by_variation = (
                f"{variation['first'][endpoint]} -> {variation['majority'][endpoint]}"
                if row == "A_consistent_full"
                else "-"
            )
            lines.append(
                f"{model:<22} {row:<18} {first.fp:>6} {vote.fp:>7} {first.tp:>6} {vote.tp:>7} "
                f"{_f1(first.f1):>6} {_f1(vote.f1):>7} {share:>15} {added:>5} {by_variation:>22}"
            )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--problems", type=int, default=50, help="problems to generate")
    parser.add_argument("--seed", type=int, default=0, help="generator seed")
    parser.add_argument("--repeats", type=int, default=5, help="probe_repeats (r)")
    parser.add_argument(
        "--t0", default="0.05,0.1,0.2", help="comma-separated t0 values of the noisy model"
    )
    parser.add_argument("--out", type=Path, help="work directory (default: a temporary one)")
    args = parser.parse_args(argv)
    t0s = [float(x) for x in args.t0.split(",") if x.strip()]
    models = ["faithful", *(f"noisy:p=0,t0={t}" for t in t0s)]
    with tempfile.TemporaryDirectory(prefix="majority-vote-") as tmp:
        out = args.out or Path(tmp)
        config = sweep_config(
            out, problems=args.problems, seed=args.seed, repeats=args.repeats, models=models
        )
        started = time.perf_counter()
        written, errors = asyncio.run(sweep(config))
        swept = time.perf_counter()
        if errors:
            print(
                f"error: {errors} request(s) failed; the comparison would be off", file=sys.stderr
            )
            return 1
        results: dict[str, dict[str, dict[str, RowResult]]] = {}
        variation: dict[str, dict[str, int]] = {}
        for vote in VOTES:
            eval_dir = out / f"eval-{vote}"
            report = evaluate(
                config.run_dir / "results.jsonl",
                eval_dir,
                EvaluateOptions(n_boot=0, majority=vote == "majority"),
                figures=False,
            )
            results[vote] = row_results(report, iter_records(eval_dir / "certificates.jsonl"))
            variation[vote] = variation_causes(report)
            late = report["stream"]["late_records"]
            if late:
                print(f"error: {late} record(s) arrived after their group was audited")
                return 1
        done = time.perf_counter()
        names = {ep.name: ep.model for ep in config.endpoints}
        print(
            f"{args.problems} generated problems (seed {args.seed}), probe_repeats = "
            f"{args.repeats}, T = 0; vote = majority conclusion over the repeats"
        )
        print(table(results, variation, names))
        print(
            f"\nsweep: {written} responses ({swept - started:.1f} s); two evaluations "
            f"{done - swept:.1f} s"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
