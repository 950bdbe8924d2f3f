"""``cotaudit verify RUN_DIR``: check an evaluation against the run it was computed from.

Recomputes the whole evaluation from the stream with the options its manifest records and
checks every file of it, the stream's digest, every certificate and the report
(``evaluator.verification``), and, in the same pass over the stream, that every record of it
belongs to the plan the run's ``manifest.json`` records (``runner.stream_plan``): a stream
joined from two runs, or copied under another run's manifest, is not that run. This is why
the command composes both halves. Exit 0 when everything holds, 1 naming each failure; prints
the evaluation's root hash either way, and with ``--root HASH`` fails unless it is that one.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from evaluator.parallel import add_workers_argument, stop_on_sigterm
from evaluator.source import STDIN, resolve_stream
from evaluator.verification import Verification, verify_run
from runner.stream_plan import plan_of_run

HELP = (
    "Recompute the evaluation from the stream and check every file, certificate and number, "
    "and every record against the run's plan; writes nothing, exit status 1 on any failure."
)
MAX_LISTED = 200  # failures printed; the count is always printed

__all__ = ["HELP", "add_arguments", "run", "verify_run_dir"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "run",
        type=Path,
        metavar="RUN_DIR",
        help="an evaluated run directory (or '-': the stream on standard input, with --eval-dir)",
    )
    parser.add_argument(
        "--eval-dir", type=Path, metavar="DIR", help="evaluation directory (default: RUN_DIR/eval)"
    )
    parser.add_argument(
        "--root",
        metavar="HASH",
        help="the root hash quoted for this evaluation (by its publisher): fail unless the "
        "evaluation's is that one",
    )
    add_workers_argument(parser)


def verify_run_dir(
    run: Path,
    eval_dir: Path | None = None,
    *,
    workers: int | None = None,
    expected_root: str | None = None,
) -> Verification:
    """:func:`evaluator.verification.verify_run`, and the stream's records checked against
    the plan of the run's manifest (when the stream has one beside it that records a plan)."""
    stream = resolve_stream(run)
    plan = None if stream == STDIN else plan_of_run(Path(stream).parent)
    check = plan.check if plan is not None else None
    result = verify_run(
        run,
        eval_dir,
        workers=workers,
        expected_root=expected_root,
        watch=check.watch if check is not None else None,
    )
    if plan is None:
        return result
    if plan.note is not None:
        result.notes.append(plan.note)
    if plan.failure is not None:
        result.failures.append(plan.failure)
    foreign = check.finish() if check is not None else None
    if foreign is not None:
        assert check is not None
        problems = len(check.problems)
        others = (
            f"; {check.foreign_problems:,} of its {problems:,} problems are not the plan's"
            if check.foreign_problems
            else ""
        )
        result.failures.append(
            f"{foreign.describe(stream)}: the stream is not (only) the run its manifest "
            f"{Path(stream).parent / 'manifest.json'} plans, but holds records of another "
            f"run (streams joined, or copied in){others}"
        )
    return result


def report_verification(result: Verification, run: Path) -> int:
    """Print a verification's outcome; return the exit status."""
    for note in result.notes:
        print(f"note: {note}", file=sys.stderr)
    if result.ok:
        print(
            f"verify: every file, certificate ({result.certificates:,}) and number of {run} holds"
        )
        print(f"root {result.root}")
        return 0
    for line in result.failures[:MAX_LISTED]:
        print(f"FAIL {line}", file=sys.stderr)
    if len(result.failures) > MAX_LISTED:
        print(f"... and {len(result.failures) - MAX_LISTED} more", file=sys.stderr)
    failures = len(result.failures)
    print(f"verify: {failures:,} failure{'' if failures == 1 else 's'}", file=sys.stderr)
    print(f"root {result.root}")
    return 1


def run(args: argparse.Namespace) -> int:
    with stop_on_sigterm():
        result = verify_run_dir(
            args.run, args.eval_dir, workers=args.workers, expected_root=args.root
        )
    return report_verification(result, args.run)
