"""``cotaudit evaluate RUN_DIR`` (or ``-`` for stdin with ``--out DIR``).

Writes ``eval/``: ``certificates.jsonl``, ``report.json``, ``report.md``, CSV tables and PNG
figures, and prints a short summary. The stream may still be growing: a torn last line is
ignored, so evaluating a run in progress is safe: it audits what the stream holds, counts the
audits whose records are incomplete in ``report.json`` (``stream.incomplete_groups``) and says
so on stderr and in report.md, as it says a stream short of (or beyond) its manifest's plan.
"""

from __future__ import annotations

import argparse
import hashlib
import shutil
import sys
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import orjson

from cotaudit.constants import PROGRESS_INTERVAL_S
from cotaudit.domain.pack_layout import EVIDENCE_DIRNAME, pack_models
from cotaudit.errors import UsageError
from cotaudit.flags import add_alias, output_dir
from cotaudit.output_file import check_output_dir
from cotaudit.schema import JSONDict
from evaluator.cascade import CASCADE_MODES
from evaluator.commands.bootstrap_flags import n_boot_flag, seed_flag
from evaluator.parallel import add_workers_argument, stop_on_sigterm
from evaluator.pipeline import TRACE_CHOICES, EvaluateOptions, evaluate_stream, require_problems
from evaluator.progress import EvaluationProgress
from evaluator.source import STDIN, ordered_by_run, resolve_stream, run_endpoint_order
from evaluator.stream_check import StreamCheck

DEFAULTS = EvaluateOptions()
CERTIFICATES_NAME = "certificates.jsonl"
HELP = (
    "Audit a results.jsonl: certificates, report.json/.md, CSV tables and figures, written "
    "into --out DIR (default: RUN_DIR/eval)."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "run", metavar="RUN_DIR", help="run directory, a results.jsonl, or '-' for stdin"
    )
    parser.add_argument(
        "--out", type=output_dir, metavar="DIR", help="output directory (default: RUN_DIR/eval)"
    )
    parser.add_argument(
        "--seed",
        type=seed_flag,
        default=DEFAULTS.seed,
        help="bootstrap seed (default: %(default)s)",
    )
    parser.add_argument(
        "--n-boot",
        type=n_boot_flag,
        default=DEFAULTS.n_boot,
        metavar="B",
        help="bootstrap resamples per row; 0 disables intervals (default: %(default)s)",
    )
    parser.add_argument(
        "--cascade-mode",
        choices=CASCADE_MODES,
        default=DEFAULTS.cascade_mode,
        help="what 'parent step' means for the cascade filter (default: %(default)s, the "
        "protocol's; previous_cot_step is the paper's rule, which rescore uses)",
    )
    parser.add_argument(
        "--published",
        type=Path,
        metavar="PACK_DIR",
        help="evidence pack whose published table is shown beside ours "
        "(default: the pack recorded by import-evidence, if any)",
    )
    parser.add_argument(
        "--no-figures", action="store_true", help="skip the figures (PNG, SVG and PDF)"
    )
    parser.add_argument(
        "--first-repeat",
        action="store_true",
        help="with repeated probes (probe_repeats > 1), use only the first repeat instead of "
        "the majority conclusion (to measure the vote's effect on false positives)",
    )
    parser.add_argument(
        "--vanished",
        choices=("change", "missing"),
        default=DEFAULTS.vanished,
        help="a step the local probe's output no longer reaches (output read whole, surface "
        "control still reaching it): a change, or missing, the reading before 2026-12 (for "
        "comparison) (default: %(default)s)",
    )
    parser.add_argument(
        "--trace",
        choices=TRACE_CHOICES,
        default=DEFAULTS.trace,
        help="which text of each response to audit: the answer, a reasoning model's "
        "reasoning trace, or both side by side with their paired comparison "
        "(default: %(default)s)",
    )
    add_workers_argument(parser)
    parser.add_argument(
        "--quiet",
        action="store_true",
        help="no progress on stderr (default: a bar on a terminal, else a line every "
        f"{PROGRESS_INTERVAL_S:.0f} s)",
    )
    add_alias(parser, "--no-progress", "--quiet", dest="quiet", flag=True)


def _out_dir(args: argparse.Namespace, stream: Path | str) -> Path:
    if args.out is not None:
        return Path(args.out)
    if stream == STDIN:
        raise UsageError(
            "reading stdin needs --out DIR", where="--out", fix="Add e.g. --out eval/."
        )
    return Path(stream).parent / "eval"


def _published_source(args: argparse.Namespace, stream: Path | str) -> Path | None:
    if args.published is not None:
        pack = Path(args.published)
        if not pack.is_dir():
            raise UsageError("no such evidence pack", where=f"--published {args.published}")
        _check_published(pack, run_endpoint_order(stream), where=f"--published {pack}")
        return pack
    if stream == STDIN:
        return None
    manifest = Path(stream).parent / "manifest.json"
    if not manifest.is_file():
        return None
    try:
        data = orjson.loads(manifest.read_bytes())
    except orjson.JSONDecodeError:
        return None
    if isinstance(data, dict) and data.get("source") == "import-evidence" and data.get("pack"):
        pack = Path(str(data["pack"]))
        return pack if pack.is_dir() else None
    return None


def _check_published(pack: Path, endpoints: Sequence[str], *, where: str) -> None:
    """Refuse a ``--published`` pack that would put no published table in the report: one
    that is not a pack, or (where the run's manifest names its models) has none of them.

    Taken and left unused, it gave a report.md with no published column and no word why,
    and a report.json recording the pack as if it had been compared with.
    """
    evidence = pack / EVIDENCE_DIRNAME
    published = [m for m in pack_models(pack) if (evidence / m / "final_report.json").is_file()]
    if not published:
        raise UsageError(
            f"not an evidence pack: no {EVIDENCE_DIRNAME}/MODEL/final_report.json",
            where=where,
            fix="Give the pack's root directory, the one holding evidence/MODEL/.",
        )
    if endpoints and not set(endpoints) & set(published):
        raise UsageError(
            f"the pack publishes a table for {', '.join(published)}, no model of this run "
            f"({', '.join(endpoints)}): the report would show none",
            where=where,
            fix="Give the pack of one of the run's models (a model's published table is shown "
            "beside the model of the same name), or leave out --published.",
        )


def evaluate(
    source: Path | str,
    out: Path,
    options: EvaluateOptions,
    *,
    published_pack: Path | None = None,
    figures: bool = True,
    extra_records: Iterable[JSONDict] = (),
    workers: int | None = None,
    progress: EvaluationProgress | None = None,
) -> JSONDict:
    """Evaluate ``source`` into ``out``; return the report dict.

    The evaluation is built beside ``out`` and put in its place in one step when complete,
    with its manifest (``evaluation.json``) written last (``evaluator.evaldir``): on any error
    nothing of it is left and a previous evaluation in ``out`` is unchanged. ``workers``:
    processes auditing problems (None: by the stream's size; 0: this one).

    ``extra_records`` (e.g. the pack's ``sample_summary`` records for a run that replayed the
    pack: see ``runner.evidence_pack.iter_sample_summaries``) are fed right after the
    problem record they refer to, so they are in before the problem's group completes; those
    of problems the stream lacks are fed at its end. They are kept in the evaluation
    (``extra_records.jsonl``) so that ``verify`` recomputes with them. A stream with nothing
    to audit, or one that joins runs, is refused (``evaluator.stream_check``); ``progress``
    counts the audits as they come back from the workers."""
    from evaluator.evaldir import EvalBuild
    from evaluator.evaluation_manifest import (
        DIGESTS_NAME,
        EXTRA_RECORDS_NAME,
        evaluation_manifest,
        write_extra_records,
    )
    from evaluator.report import load_published, render_markdown, write_csv_tables
    from evaluator.traces import render_trace_comparison

    progress = progress or EvaluationProgress(enabled=False)
    check = StreamCheck(where="<stdin>" if source == STDIN else str(source))
    extras = list(extra_records)
    with EvalBuild(out) as build:
        certificates = build.path(CERTIFICATES_NAME)
        digest = hashlib.sha256()
        with certificates.open("wb") as handle:

            def sink(lines: bytes) -> None:
                handle.write(lines)
                digest.update(lines)

            result = evaluate_stream(
                source,
                options,
                workers=workers,
                extra_records=extras,
                on_certificates=sink,
                check=check,
                progress=progress,
                endpoints=len(run_endpoint_order(source)),
                spool_dir=build.dir,
            )
            size = handle.tell()
        build.known(CERTIFICATES_NAME, digest.hexdigest(), size)
        evaluation = result.evaluation
        if not evaluation.tallies:
            require_problems(evaluation, str(source))
            raise UsageError(
                "the stream holds no evaluable responses",
                where=str(source),
                fix="It needs problem records followed by their response records.",
            )
        if options.trace == "reasoning" and not any(
            t.statistics for t in evaluation.tallies.values()
        ):
            # Written, the report read "answered correctly 0 of 0" for every model and said
            # nothing of why: no response had a reasoning trace (the models return none, or
            # their servers withheld it). --trace both names such models in its report.
            raise UsageError(
                "--trace reasoning: no response of the stream has a reasoning trace to audit "
                "(its models return none, or their server withheld it)",
                where=str(source),
                fix="Audit the answers with --trace answer (the default), or run a model that "
                "returns its reasoning (docs/schema.md, the reasoning field).",
            )
        progress.stage(
            f"statistics ({options.n_boot:,} bootstrap resamples)"
            if options.n_boot
            else "statistics (no bootstrap)"
        )
        report = evaluation.report()
        report["models"] = ordered_by_run(report["models"], run_endpoint_order(source))
        report["source"] = str(source)
        report["options"] = options.as_json()
        published = {}
        if published_pack is not None:
            for name in report["models"]:
                rows = load_published(published_pack, name)
                if rows:
                    published[name] = rows
            report["published_pack"] = str(published_pack)
        figure_list: dict[str, list[Any]] = {}
        comparison = None
        if figures:
            from evaluator.figures import write_report_figures

            progress.stage("figures (PNG, SVG, PDF)")
            figure_list, comparison = write_report_figures(report["models"], build.dir)
        build.path("report.json").write_bytes(
            orjson.dumps(report, option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS)
        )
        markdown = render_markdown(
            report,
            published=published,
            figures=figure_list,
            comparison_figure=comparison,
        ) + render_trace_comparison(report)
        build.path("report.md").write_text(markdown, encoding="utf-8")
        write_csv_tables(report, build.dir)
        build.path(DIGESTS_NAME).write_bytes(result.digest.line_digests)
        if extras:
            write_extra_records(build.path(EXTRA_RECORDS_NAME), extras)
        build.commit(
            evaluation_manifest(
                source,
                result.digest,
                options,
                figures=figure_list,
                comparison_figure=comparison,
                published_pack=published_pack,
                extra_records=bool(extras),
            )
        )
    return report


def run(args: argparse.Namespace) -> int:
    from cotaudit.terminal import terminal_width
    from evaluator.report import over_plan_note, render_summary, short_of_plan_note

    stream = resolve_stream(args.run)
    out = _out_dir(args, stream)
    check_output_dir(
        out,
        flag="--out",
        holds="the evaluation",
        default_of=f"RUN_DIR {args.run}" if args.out is None else None,
    )
    created = not out.exists()
    options = EvaluateOptions(
        n_boot=args.n_boot,
        seed=args.seed,
        cascade_mode=args.cascade_mode,
        majority=not args.first_repeat,
        vanished=args.vanished,
        trace=args.trace,
    )
    started = time.perf_counter()
    progress = EvaluationProgress(enabled=not args.quiet)
    try:
        with stop_on_sigterm():
            report = evaluate(
                stream,
                out,
                options,
                published_pack=_published_source(args, stream),
                figures=not args.no_figures,
                workers=args.workers,
                progress=progress,
            )
    except UsageError:
        if created and out.exists():
            shutil.rmtree(out)
        raise
    finally:
        progress.close()
    print(render_summary(report, width=terminal_width()))
    print(f"wrote {out} in {time.perf_counter() - started:.2f} s")
    for note in (short_of_plan_note(report), over_plan_note(report)):
        if note:
            print(f"cotaudit evaluate: note: {note}", file=sys.stderr)
    return 0
