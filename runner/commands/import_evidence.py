"""``cotaudit import-evidence PACK_DIR --model gpt-4o --out RUN_DIR``."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from cotaudit.flags import output_dir
from cotaudit.output_file import check_output_dir
from runner.evidence_pack import import_evidence

ABSENT_SHOWN = 5  # absent probe outputs named in the import's line; the rest counted

HELP = (
    "Convert the paper's evidence pack into a run directory, --out RUN_DIR: results.jsonl "
    "and manifest.json (no API calls)."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("pack", type=Path, metavar="PACK_DIR", help="root of the evidence pack")
    parser.add_argument(
        "--model", default="gpt-4o", help="model directory under evidence/ (default: gpt-4o)"
    )
    parser.add_argument(
        "--out",
        type=output_dir,
        required=True,
        metavar="RUN_DIR",
        help="run directory to write: RUN_DIR/results.jsonl and RUN_DIR/manifest.json",
    )


def run(args: argparse.Namespace) -> int:
    check_output_dir(args.out, flag="--out", holds="the run directory")
    result = import_evidence(args.pack, args.model, args.out)
    print(
        f"imported {result.problems} problems, {result.responses} responses, "
        f"{result.summaries} self-consistency summaries -> {result.stream}"
    )
    if result.absent:
        # Said here, not only in the report: a pack with a file lost in a copy still imports,
        # and its table would otherwise differ from the published one without a word.
        n = len(result.absent)
        it = "them" if n != 1 else "it"
        shown = ", ".join(result.absent[:ABSENT_SHOWN])
        more = f" and {n - ABSENT_SHOWN} more" if n > ABSENT_SHOWN else ""
        print(
            f"cotaudit import-evidence: {n} probe output{'s' if n != 1 else ''} absent from "
            f"the pack ({shown}{more}); the evaluation counts {it} "
            f"absent (report.json: alignment.probe_outputs_absent) and judges the pairs "
            f"without {it}. Restore the pack's files and import into a new directory to have "
            "every probe.",
            file=sys.stderr,
        )
    return 0
