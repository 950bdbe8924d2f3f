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
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cotaudit import terminal
from cotaudit.commands.interrupts import (
    command_interrupts,
    evaluation_interrupts,
    sweep_interrupted,
)
from cotaudit.commands.local_sweep import sweep_in_process
from cotaudit.commands.sweep_advice import advice_in_command_terms
from cotaudit.constants import BOOTSTRAP_SEED, DEFAULT_MAX_TOKENS
from cotaudit.flags import integer_flag, output_dir
from cotaudit.terminal import Group
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
# (our report row, label): the rows of docs/reproduction.md's table, in its order; the
# published figures are found as ``cotaudit rescore`` finds them (evaluator.commands.rescore).
COMPARED_ROWS: tuple[tuple[str, str], ...] = (
    # † as in report.md: A's blind spot to entity-introduction premises moves these two rows
    # (not pred's, whose gold has no such dependency), ours and the paper's alike.
    ("A_consistent_full", "A consistent, full †"),
    ("A_consistent_pred", "A consistent, pred"),
    ("A_local_full", "A' local, full"),
    ("A_Ap_combined_full", "A+A' combined, full"),
    ("A_Ap_no_surface_full", "A+A' without surface control"),
    ("A_Ap_cascade_full", "A+A'+cascade, full"),
    ("A_Ap_cascade_pred", "A+A'+cascade, pred"),
    ("self_consistency_full", "self-consistency, full"),
    ("string_diff_full", "string diff, full"),
    ("A_consistent_lower_bound_full", "A consistent, lower bound †"),
)
# (column, meaning): the legend under the table; {boot} is the bootstrap's B and seed.
LEGEND: tuple[tuple[str, str], ...] = (
    (
        "tp/fp/fn/tn",
        "evaluable (step, premise) pairs judged dependent or not, against the proof tree's "
        "direct premises (full) or with entity-introduction premises as no dependency (pred); "
        "the lower bound counts every gold dependency left unscored as a miss; '-': a count "
        "the paper does not publish, n/a: no such number",
    ),
    (
        "F1 [95% CI]",
        "percentile bootstrap over problems ({boot}); the paper publishes intervals for some "
        "rows only",
    ),
    ("dF1", "ours minus the paper's F1"),
)
DIFFERENCES = (
    "Differences come from our parser and content alignment of probe steps "
    "(docs/reproduction.md reconciles them by cause; `cotaudit rescore` re-derives the "
    "paper's own counts from its certificates)."
)
# The table's columns after the row's name: ours, the paper's (each F1, its interval and its
# counts), then the difference. Split to fit the terminal, each side keeps its columns together
# under its title.
HEADER = ("row", "F1", "[95% CI]", "tp/fp/fn/tn", "F1", "[95% CI]", "tp/fp/fn/tn", "dF1")
GROUPS = (Group(range(1, 4), "ours"), Group(range(4, 7), "paper"), Group([7]))


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


def _sweep(config: SweepConfig, pack: Path, *, progress: bool) -> RunSummary:
    """Sweep against an in-process server replaying ``pack``."""
    from runner.server import replay
    from runner.server.settings import ServerConfig

    try:
        replaying = ServerConfig(replay=(pack,))
        summary, _ = sweep_in_process(config, progress=progress, server=replaying)
    finally:
        replay.configure([])
    return summary


def _published(pack: Path, model: str) -> dict[str, Any]:
    """The pack's published reports, read and checked before the sweep: a truncated or
    malformed one is refused (naming the file and key) before anything is written, instead of
    stopping the command after the sweep."""
    from evaluator.authors import published_reports
    from evaluator.commands.rescore import published_rows, published_scalars

    reports = published_reports(pack, model)
    where = str(pack / "evidence" / model)
    published_rows(reports, where=where)
    published_scalars(reports, where=where)
    return reports


def _summary_records(pack: Path, model: str) -> Iterator[dict[str, Any]]:
    from runner.evidence_pack import iter_sample_summaries

    yield from iter_sample_summaries(pack, model)


def _f1(value: Any) -> str:
    return "n/a" if value is None else f"{float(value):.3f}"


def _ci(ci: Any) -> str:
    if not ci or None in ci:
        return ""
    return f"[{float(ci[0]):.3f}, {float(ci[1]):.3f}]"


def _counts(row: Mapping[str, Any] | None) -> str:
    if not row:
        return "n/a"
    return "/".join("-" if row.get(k) is None else str(row[k]) for k in ("tp", "fp", "fn", "tn"))


def _diff(ours: Any, theirs: Any) -> str:
    if ours is None or theirs is None:
        return ""
    diff = float(ours) - float(theirs)
    # Below the printed 3 decimals a difference is none: "-0.000" would read as one.
    return "0" if abs(diff) < 5e-4 else f"{diff:+.3f}"


def comparison(
    model: str,
    report: Mapping[str, Any],
    published: Mapping[str, Any],
    summary: RunSummary | None = None,
    *,
    width: int | None = None,
) -> str:
    """Our rows beside the paper's, with what each side is, the denominators and the F1
    difference, in lines of at most ``width`` characters (the terminal's by default; but for a
    path longer than that). ``published``: the pack's published reports (``evaluator.authors.
    published_reports``); ``summary``: the sweep, for the header's count of replayed outputs."""
    from evaluator.commands.rescore import published_rows, published_scalars
    from evaluator.report import HEADLINE_LEGEND

    width = terminal.terminal_width() if width is None else width
    rows = report["rows"]
    theirs_rows = published_rows(published)
    theirs = published_scalars(published)
    certs = report.get("certificates") or {}
    boot = report.get("bootstrap") or {}

    def of(value: Any) -> str:
        return "?" if value is None else f"{value:,}"

    sent = ""
    if summary is not None:
        replayed = summary.planned - summary.failed
        sent = (
            f"{replayed:,} recorded outputs replayed through the engine ({summary.written:,} "
            f"sent now, {summary.skipped:,} already in the stream), "
        )
    lines = [
        *terminal.wrapped(
            f"reproduce {model}: {sent}{of(boot.get('n_problems'))} problems; "
            f"{of(certs.get('evaluable'))} of {of(certs.get('total'))} certificates evaluable "
            f"(the paper's: {of(theirs.get('certificates_evaluable'))} of "
            f"{of(theirs.get('certificates_total'))})",
            width,
        ),
        *terminal.wrapped(
            "ours: our parser and content alignment on the replayed outputs; paper: the pack's "
            f"evidence/{model}/final_report.json and bootstrap_ci.json",
            width,
        ),
        "",
    ]
    table = [list(HEADER)]
    for key, label in COMPARED_ROWS:
        ours = rows.get(key)
        paper = theirs_rows.get(key)
        o_f1 = ours.get("f1") if ours else None
        t_f1 = paper.get("f1") if paper else None
        table.append(
            [
                label,
                _f1(o_f1),
                _ci(ours.get("ci") if ours else None),
                _counts(ours),
                _f1(t_f1),
                _ci(paper.get("ci") if paper else None),
                _counts(paper),
                _diff(o_f1, t_f1),
            ]
        )
    # Names and intervals read left-aligned; F1s, counts and differences right-aligned.
    lines += terminal.fitted(table, GROUPS, width, left={0, 2, 5})
    n_boot = boot.get("n_boot")
    boot_s = f"B={n_boot:,}, seed {boot.get('seed')}" if n_boot else "none computed"
    lines.append("")
    meanings = [(k, m.format(boot=boot_s)) for k, m in LEGEND]
    lines += terminal.legend([*meanings, ("†", dict(HEADLINE_LEGEND)["†"])], width)
    lines += terminal.wrapped(DIFFERENCES, min(width, terminal.LEGEND_WIDTH))
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    out: Path = args.out or Path(f"reproduce-{args.model}")
    # From the first check on: a Ctrl-C while the pack is read says so, and an --out made and
    # left empty is removed.
    with command_interrupts("reproduce", out, out / "run"):
        return _reproduce(args, out)


def _reproduce(args: argparse.Namespace, out: Path) -> int:
    from evaluator.commands.evaluate import evaluate
    from evaluator.pipeline import EvaluateOptions

    pack: Path = args.pack.resolve()
    check_reproduce_out(out, pack, args.model, default=args.out is None)
    published = _published(pack, args.model)
    config = reproduce_config(pack, args.model, out)
    out.mkdir(parents=True, exist_ok=True)
    stream = config.run_dir / "results.jsonl"
    # The run directory may belong to another config, or the stream be refused by the
    # evaluation: advice written for `cotaudit run` is given in reproduce's terms.
    with advice_in_command_terms(
        out=out, run_dir=config.run_dir, anew="replay the pack anew", rerun="rerun (no key needed)"
    ):
        summary = _sweep(config, pack, progress=not args.quiet)
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
    print(comparison(args.model, model, published, summary))
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
