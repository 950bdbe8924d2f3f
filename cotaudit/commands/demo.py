"""``cotaudit demo``: the whole pipeline on the embedded local model, one command.

The grounding study (default): generate a ProntoQA set, start the local model server in this
process on a free loopback port, sweep it against simulated reasoners (faithful, restating,
shortcut) concurrently, each endpoint under its own rate limits, evaluate the stream, write
the run directory with report and figures, and print a comparison table per model, scored
against the proof tree and against what each reasoner truly used. ``--ontology`` chooses
ProntoQA's words (fictional, true, false, number); the ``world-knowledge`` reasoner answers
real-word problems from what it believes rather than from the premises, so the table shows
the audit catching it beside the faithful reasoner.

Rerunning into the same directory resumes: every request already in the stream is skipped
and nothing is sent. The evaluation is recomputed from the stream, unless ``eval/`` already
holds this stream's evaluation, unchanged (``evaluator.current``: same stream, options,
figures and cotaudit version, every file as written): then it is kept, and said so.

``--study selection`` runs the selection study (Part B) instead.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Collection
from contextlib import AbstractContextManager
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
from cotaudit.domain.ontology import ONTOLOGIES, Ontology
from cotaudit.errors import UsageError
from cotaudit.flags import integer_flag, output_dir
from cotaudit.output_file import check_output_dir
from cotaudit.schema import MANIFEST_NAME, RESULTS_NAME
from cotaudit.values import nearest
from runner.config import SweepConfig, config_from_mapping
from runner.run_lock import LOCK_NAME

if TYPE_CHECKING:
    pass

HELP = (
    "Run the whole audit end to end on the embedded local model (no API key needed); writes "
    "the run, its cache and DIR/run/eval/report.md into --out DIR (default: cotaudit-demo)."
)

# Distinct limits per endpoint show that each is throttled on its own; all are far above
# what the demo needs, so none of them slows it down.
DEMO_MODELS: dict[str, dict[str, Any]] = {
    "faithful": {"model": "faithful", "requests_per_minute": 600_000},
    "restating": {"model": "restating", "requests_per_minute": 480_000},
    "shortcut": {"model": "shortcut:p=0.5", "requests_per_minute": 360_000},
    "world-knowledge": {"model": "world-knowledge", "requests_per_minute": 300_000},
}
# What ``demo --out DIR`` writes into DIR: the grounding study's run and cache, the selection
# study's directory. Anything else there is someone else's.
DEMO_ENTRIES = frozenset({"run", "cache", "selection"})
# The grounding study's problem set unless --problems, --ontology, --seed say otherwise. Their
# argparse default is None, so that a flag the selection study has no use for is seen as given.
DEMO_PROBLEMS = 50
DEMO_ONTOLOGY: Ontology = "fictional"
DEMO_SEED = 0


def _ontology(text: str) -> Ontology:
    """``--ontology``: one of ONTOLOGIES; a typo is answered with the closest name."""
    if text in ONTOLOGIES:
        return text
    close = nearest(text, ONTOLOGIES)
    hint = f"did you mean {close!r}? " if close else ""
    raise argparse.ArgumentTypeError(
        f"unknown ontology {text!r}; {hint}give one of {', '.join(ONTOLOGIES)}"
    )


def check_sweep_out(
    path: Path,
    *,
    flag: str,
    entries: Collection[str],
    command: str,
    default_of: str | None = None,
) -> None:
    """Refuse an output directory that already holds someone else's files, before anything
    is written. ``path`` may be missing, empty, or an earlier output of ``command``: it holds
    only ``entries`` (the names the command writes there), and its ``run`` (where the engine
    writes) is empty or a run directory. The engine then resumes that run or refuses another
    config's; a rerun never writes among unrelated files, where a ``run/eval/report.md`` or a
    ``cache/`` of the user's would be written over or into. ``default_of``: the user typed no
    ``flag`` and ``path`` is the default for what they gave (the message says so).
    """
    if not path.is_dir():
        return

    def refused(what: str) -> UsageError:
        fix = (
            f"Give {flag} a new or empty directory, or the directory of an earlier {command} "
            "to resume it; remove the files first if they are not needed."
        )
        if default_of is None:
            return UsageError(f"{what}; they are left as they are", where=flag, fix=fix)
        return UsageError(
            f"{what}; they are left as they are (the default output for {default_of}; {flag} "
            "chooses another)",
            fix=fix,
        )

    others = sorted(e.name for e in path.iterdir() if e.name not in entries)
    if others:
        shown = ", ".join(others[:3]) + (f" and {len(others) - 3} more" if len(others) > 3 else "")
        raise refused(f"{path} holds files that {command} did not write ({shown})")
    run = path / "run"
    # A run killed before its manifest leaves only its lock file: that is still its own.
    if (
        run.is_dir()
        and any(e.name != LOCK_NAME for e in run.iterdir())
        and not any((run / name).exists() for name in (RESULTS_NAME, MANIFEST_NAME))
    ):
        raise refused(
            f"{run} holds files but is not a run directory (no {RESULTS_NAME}, no {MANIFEST_NAME})"
        )


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--out",
        type=output_dir,
        default=Path("cotaudit-demo"),
        metavar="DIR",
        help="output directory (default: %(default)s)",
    )
    parser.add_argument(
        "--study",
        choices=("grounding", "selection"),
        default="grounding",
        help="grounding audit (Part A) or selection study (Part B) (default: %(default)s)",
    )
    parser.add_argument(
        "--problems",
        type=integer_flag(
            low=1, fix="give how many ProntoQA problems to generate, e.g. --problems 50"
        ),
        metavar="N",
        help=f"ProntoQA problems to generate (default: {DEMO_PROBLEMS})",
    )
    parser.add_argument(
        "--ontology",
        type=_ontology,
        metavar="{" + ",".join(ONTOLOGIES) + "}",
        help="ProntoQA's words: fictional (the paper's), true (real categories), false (real "
        "categories in wrong places) or number (numerals and number categories) (default: "
        f"{DEMO_ONTOLOGY})",
    )
    parser.add_argument(
        "--seed",
        type=integer_flag(low=0, fix="give e.g. --seed 0"),
        help=f"generator and bootstrap seed (default: {DEMO_SEED})",
    )
    parser.add_argument(
        "--quiet",
        action="store_true",
        help="no progress on standard error (the table and its legend still print)",
    )
    parser.add_argument(
        "--no-figures", action="store_true", help="skip the figures (PNG, SVG and PDF)"
    )


def demo_config(
    out_dir: Path, *, problems: int, seed: int, ontology: Ontology = "fictional"
) -> SweepConfig:
    """The grounding demo's sweep: run and cache directories under ``out_dir``."""
    out_dir = out_dir.resolve()  # the config resolves relative paths against out_dir itself
    endpoints = [
        {
            "name": name,
            "provider": "local",
            "model": spec["model"],
            "requests_per_minute": spec["requests_per_minute"],
            "tokens_per_minute": 1e10,
            "max_concurrency": 32,
            "max_tokens": 512,
        }
        for name, spec in DEMO_MODELS.items()
    ]
    return config_from_mapping(
        {
            "run_dir": str(out_dir / "run"),
            "cache_dir": str(out_dir / "cache"),
            "task": {
                "kind": "prontoqa",
                "source": "generate",
                "n": problems,
                "hops_min": 3,
                "hops_max": 5,
                "distractors": [1, 3],
                "seed": seed,
                "ontology": ontology,
            },
            "endpoints": endpoints,
        },
        config_dir=out_dir,
        where="<demo>",
    )


def demo_advice(out_dir: Path, run_dir: Path) -> AbstractContextManager[None]:
    """Advice written for ``cotaudit run`` (a run directory of another config: the demo's
    options changed) given in the demo's terms, its ``--out``."""
    return advice_in_command_terms(
        out=out_dir,
        run_dir=run_dir,
        anew="run the demo with these options",
        rerun="rerun (the local model needs no key)",
    )


def run_grounding_demo(
    out_dir: Path,
    *,
    problems: int,
    seed: int,
    quiet: bool,
    ontology: Ontology = "fictional",
    figures: bool = True,
) -> int:
    from evaluator.commands.evaluate import evaluate
    from evaluator.current import current_report
    from evaluator.pipeline import EvaluateOptions
    from evaluator.progress import EvaluationProgress
    from evaluator.report import render_headline_table

    started = time.perf_counter()
    out_dir.mkdir(parents=True, exist_ok=True)
    config = demo_config(out_dir, problems=problems, seed=seed, ontology=ontology)
    with demo_advice(out_dir, config.run_dir):
        summary, served = sweep_in_process(config, progress=not quiet)
        interrupted = sweep_interrupted("demo", summary)
        if interrupted is not None:
            return interrupted
        written, skipped = summary.written, summary.skipped
        swept = time.perf_counter()
        stream, eval_dir = config.run_dir / "results.jsonl", config.run_dir / "eval"
        options = EvaluateOptions(seed=seed)
        with evaluation_interrupts("demo"):
            # A rerun that wrote nothing keeps an evaluation that is already of this stream.
            report = None if written else current_report(stream, eval_dir, options, figures=figures)
            kept = report is not None
            if report is None:
                progress = EvaluationProgress(enabled=not quiet)
                try:
                    report = evaluate(stream, eval_dir, options, figures=figures, progress=progress)
                finally:
                    progress.close()
    done = time.perf_counter()
    width = terminal.terminal_width()
    print(render_headline_table(report, width=width))
    sweep = (
        f"sweep: {written:,} responses written, {skipped:,} already in the stream, "
        f"{served:,} HTTP requests ({swept - started:.1f} s)"
    )
    # A kept evaluation is said on a line of its own, its directory in the parenthesis: a
    # terminal narrower than the path then breaks the line before the path, not inside
    # "evaluation kept".
    said = (
        [
            sweep,
            f"evaluation kept ({eval_dir} is of this stream, unchanged; "
            f"`cotaudit evaluate {config.run_dir}` redoes it)",
        ]
        if kept
        else [f"{sweep}; evaluation {done - swept:.1f} s"]
    )
    print()
    for paragraph in said:
        for line in terminal.wrapped(paragraph, width):
            print(line)
    print(f"report: {eval_dir / 'report.md'}")
    return 0


def run(args: argparse.Namespace) -> int:
    out = Path(args.out)
    run_dir = out / "selection" / "run" if args.study == "selection" else out / "run"
    # From the first check on: a Ctrl-C before the sweep says so, and an --out made and left
    # empty is removed (the selection study's too: it writes into --out DIR/selection).
    with command_interrupts("demo", out, run_dir):
        return _demo(args)


def _demo(args: argparse.Namespace) -> int:
    check_output_dir(
        Path(args.out),
        flag="--out",
        holds="the demo's run, cache and report",
        example="cotaudit-demo",
    )
    check_sweep_out(Path(args.out), flag="--out", entries=DEMO_ENTRIES, command="cotaudit demo")
    if args.study == "selection":
        from cotaudit.commands.demo_selection import run_selection_demo

        # The selection study's problems are its own; taking these flags and ignoring them
        # would leave the user believing the study ran on the set they asked for.
        given = [
            flag
            for flag, value in (
                ("--problems", args.problems),
                ("--ontology", args.ontology),
                ("--seed", args.seed),
            )
            if value is not None
        ]
        if given:
            raise UsageError(
                f"{', '.join(given)} {'applies' if len(given) == 1 else 'apply'} to the "
                "grounding study's ProntoQA problems; the selection study's procedural "
                "problems are fixed, and it would ignore them",
                where="--study selection",
                fix="Drop them, or leave out --study selection for the grounding study.",
            )

        return run_selection_demo(
            args.out / "selection", quiet=args.quiet, figures=not args.no_figures
        )
    return run_grounding_demo(
        args.out,
        problems=DEMO_PROBLEMS if args.problems is None else args.problems,
        seed=DEMO_SEED if args.seed is None else args.seed,
        quiet=args.quiet,
        ontology=DEMO_ONTOLOGY if args.ontology is None else args.ontology,
        figures=not args.no_figures,
    )
