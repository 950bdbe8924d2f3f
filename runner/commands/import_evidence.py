"""``cotaudit import-evidence PACK_DIR --model gpt-4o --out RUN_DIR``."""

from __future__ import annotations

import argparse
from pathlib import Path

from cotaudit.flags import output_dir
from cotaudit.output_file import check_output_dir
from runner.evidence_pack import import_evidence

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
    return 0
