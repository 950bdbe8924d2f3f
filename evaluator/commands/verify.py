"""``cotaudit verify RUN_DIR``: check an evaluation against the run it was computed from.

Recomputes the whole evaluation from the stream with the options its manifest records and
checks every file of it, the stream's digest, every certificate and the report
(``evaluator.verification``). Exit 0 when everything holds, 1 naming each failure; prints the
evaluation's root hash either way, and with ``--root HASH`` fails unless it is that one.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from evaluator.parallel import add_workers_argument, stop_on_sigterm
from evaluator.verification import Verification, verify_run

HELP = "Recompute the evaluation from the stream and check every file, certificate and number."
MAX_LISTED = 200  # failures printed; the count is always printed

__all__ = ["HELP", "add_arguments", "run", "verify_run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run", type=Path, metavar="RUN_DIR", help="an evaluated run directory")
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
        result = verify_run(args.run, args.eval_dir, workers=args.workers, expected_root=args.root)
    return report_verification(result, args.run)
