"""``cotaudit reproduce PACK_DIR``: the paper's Table 1 from its recorded outputs, no API key.

The evidence pack's recorded GPT-4o outputs are served by the local server's ``replay`` model;
the paper's 50 problems and all their probes are swept through the real engine (the same
plan, prompts, cache and stream as a live sweep), the stream is evaluated with our parser and
content alignment, and our table is printed beside the published one with the differences.

The pack keeps only summaries of its self-consistency samples, so those cannot be replayed:
they are read from ``baselines/self_consistency/MODEL/`` and fed to the evaluation beside the
stream (as ``import-evidence`` does), and the sweep sends no samples.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cotaudit.commands.interrupts import evaluation_interrupts, sweep_interrupted
from cotaudit.commands.sweep_advice import advice_in_command_terms
from cotaudit.constants import BOOTSTRAP_SEED, DEFAULT_MAX_TOKENS
from cotaudit.flags import integer_flag, output_dir
from runner.config import SweepConfig, config_from_mapping

if TYPE_CHECKING:
    from runner.engine import RunSummary

HELP = (
    "Replay the paper's recorded outputs through the engine, evaluate, compare with Table 1; "
    "writes the run, its cache and DIR/run/eval/report.md into --out DIR (default: "
    "reproduce-MODEL)."
)

# What ``reproduce --out DIR`` writes into DIR (anything else there is someone else's).
REPRODUCE_ENTRIES = frozenset({"run", "cache"})
# (our report row, the published key in final_report.json, label)
COMPARED_ROWS: tuple[tuple[str, str, str], ...] = (
    ("A_consistent_full", "A_consistent_full", "A consistent, full"),
    ("A_consistent_pred", "A_consistent_pred", "A consistent, pred"),
    ("A_Ap_combined_full", "A_Ap_combined_full", "A+A' combined, full"),
    ("A_Ap_cascade_full", "A_Ap_cascade_full", "A+A'+cascade, full"),
    ("self_consistency_full", "self_consistency_full", "self-consistency, full"),
    ("string_diff_full", "string_diff_full", "string diff, full"),
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "pack", type=Path, help="root of the evidence pack (holds data/, evidence/)"
    )
    parser.add_argument(
        "--model", default="gpt-4o", help="model directory under evidence/ (default: %(default)s)"
    )
    parser.add_argument(
        "--out",
        type=output_dir,
        default=None,
        metavar="DIR",
        help="output directory (default: reproduce-MODEL)",
    )
    parser.add_argument(
        "--seed",
        type=integer_flag(low=0, fix="give e.g. --seed 1"),
        default=None,
        help=f"bootstrap seed (default: the evaluator's, {BOOTSTRAP_SEED})",
    )
    parser.add_argument("--quiet", action="store_true", help="no progress output")
    parser.add_argument(
        "--no-figures", action="store_true", help="skip the figures (PNG, SVG and PDF)"
    )


def reproduce_config(pack: Path, model: str, out: Path) -> SweepConfig:
    """One local endpoint named after the model, answering from the pack via ``replay``."""
    out = out.resolve()  # the config resolves relative paths against out itself
    from runner.evidence_pack import pack_dirs
    from runner.server.replay import ReplayIndex

    problems, evidence = pack_dirs(pack, model)
    # A replay is cut at the request's max_tokens like any answer: ask for at least the
    # longest recorded answer, so that every recorded text comes back whole (the pack's
    # longest, 1,024 tokens, is twice the default).
    longest = ReplayIndex([pack]).longest_output_tokens() or 0
    return config_from_mapping(
        {
            "run_dir": str(out / "run"),
            "cache_dir": str(out / "cache"),
            "task": {
                "kind": "prontoqa",
                "source": "paper50",
                "path": str(problems),
                "samples": 0,
                # The authors used another fresh word in 10 probes; the probe files record it.
                "fresh_words_from": str(evidence),
            },
            "endpoints": [
                {
                    "name": model,
                    "provider": "local",
                    "model": f"replay:model={model}",
                    "max_tokens": max(DEFAULT_MAX_TOKENS, longest),
                    "max_concurrency": 32,
                    "requests_per_minute": 600_000,
                    "tokens_per_minute": 1e10,
                }
            ],
        },
        config_dir=out,
        where="<reproduce>",
    )


def check_reproduce_out(out: Path, pack: Path, model: str, *, default: bool) -> None:
    """Refuse ``--out`` before anything is written: a file, a directory inside the pack, one
    that holds files an earlier reproduce did not write. The pack is checked first: a
    mistyped PACK_DIR is the error to report (``default``: the user typed no ``--out``)."""
    from cotaudit.commands.demo import check_sweep_out
    from cotaudit.output_file import check_output_dir
    from runner.evidence_pack import check_out_of_pack, pack_dirs

    pack_dirs(pack, model)
    default_of = f"--model {model}" if default else None
    check_output_dir(
        out,
        flag="--out",
        holds="the replayed run, its cache and report",
        example=f"reproduce-{model}",
        default_of=default_of,
    )
    check_out_of_pack(out, pack, flag="--out")
    check_sweep_out(
        out,
        flag="--out",
        entries=REPRODUCE_ENTRIES,
        command="cotaudit reproduce",
        default_of=default_of,
    )


async def _sweep(config: SweepConfig, pack: Path, *, progress: bool) -> RunSummary:
    from runner.engine import run_sweep, stop_on_signals
    from runner.server import replay
    from runner.server.lifecycle import running_server
    from runner.server.settings import ServerConfig

    try:
        with stop_on_signals() as stop:
            async with running_server(ServerConfig(replay=(pack,))) as server:
                urls = {ep.name: server.base_url for ep in config.endpoints}
                summary = await run_sweep(
                    config, progress=progress, base_urls=urls, stop_event=stop
                )
    finally:
        replay.configure([])
    return summary


def _summary_records(pack: Path, model: str) -> Iterator[dict[str, Any]]:
    from runner.evidence_pack import iter_sample_summaries

    yield from iter_sample_summaries(pack, model)


def comparison(report: Mapping[str, Any], published: Mapping[str, Any] | None) -> str:
    """Our rows beside the published ones, with the F1 difference."""
    rows = report["rows"]
    counts = "tp/fp/fn/tn"
    lines = [
        f"{'row':<24} {'ours F1':>8} {counts:>17}   {'paper F1':>8} {counts:>17}  {'dF1':>7}",
    ]
    for key, pub_key, label in COMPARED_ROWS:
        ours = rows.get(key)
        theirs = (published or {}).get(pub_key)
        o_f1 = f"{ours['f1']:.3f}" if ours and ours.get("f1") is not None else "n/a"
        o_c = "/".join(str(ours.get(k)) for k in ("tp", "fp", "fn", "tn")) if ours else ""
        t_f1 = f"{theirs['f1']:.3f}" if theirs and theirs.get("f1") is not None else "n/a"
        t_c = "/".join(str(theirs.get(k)) for k in ("tp", "fp", "fn", "tn")) if theirs else ""
        diff = (
            f"{ours['f1'] - theirs['f1']:+.3f}"
            if ours and theirs and ours.get("f1") is not None and theirs.get("f1") is not None
            else ""
        )
        lines.append(f"{label:<24} {o_f1:>8} {o_c:>17}   {t_f1:>8} {t_c:>17}  {diff:>7}")
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    from evaluator.commands.evaluate import evaluate
    from evaluator.pipeline import EvaluateOptions
    from evaluator.report import load_published

    pack: Path = args.pack.resolve()
    out: Path = args.out or Path(f"reproduce-{args.model}")
    check_reproduce_out(out, pack, args.model, default=args.out is None)
    config = reproduce_config(pack, args.model, out)
    out.mkdir(parents=True, exist_ok=True)
    stream = config.run_dir / "results.jsonl"
    # The run directory may belong to another config, or the stream be refused by the
    # evaluation: advice written for `cotaudit run` is given in reproduce's terms.
    with advice_in_command_terms(
        out=out, run_dir=config.run_dir, anew="replay the pack anew", rerun="rerun (no key needed)"
    ):
        summary = asyncio.run(_sweep(config, pack, progress=not args.quiet))
        interrupted = sweep_interrupted("reproduce", summary)
        if interrupted is not None:
            return interrupted
        options = EvaluateOptions() if args.seed is None else EvaluateOptions(seed=args.seed)
        with evaluation_interrupts("reproduce"):
            report = evaluate(
                stream,
                config.run_dir / "eval",
                options,
                published_pack=pack,
                extra_records=_summary_records(pack, args.model),
                figures=not args.no_figures,
            )
    model = report["models"][args.model]
    print(comparison(model, load_published(pack, args.model)))
    print(
        "\nDifferences come from our parser and content alignment of probe steps "
        "(docs/reproduction.md reconciles them by cause)."
    )
    print(f"report: {config.run_dir / 'eval' / 'report.md'}")
    return _failed_replays(summary, out)


def _failed_replays(summary: RunSummary, out: Path) -> int:
    """Say how many replayed requests failed for good, now or in an earlier run of ``out``, and
    return the exit status ``cotaudit run`` gives them (3), else 0: a script must not take a
    table with outputs missing for the paper's."""
    failed = summary.failed
    if not failed:
        return 0
    types = summary.error_types
    kinds = f" ({', '.join(f'{n:,} {t}' for t, n in sorted(types.items()))})" if types else ""
    print(
        f"cotaudit reproduce: {failed:,} replayed request{'s' if failed != 1 else ''} failed "
        f"for good{kinds}; the table is computed without their outputs, and their error records "
        f"are in {summary.run_dir / 'results.jsonl'}. A replay fails where the pack holds no "
        "recorded output for the prompt: restore the pack, then reproduce into a new --out "
        f"directory (a rerun into {out} keeps the errors).",
        file=sys.stderr,
    )
    return 3
