"""``cotaudit verify RUN_DIR``: recompute every certificate from the raw outputs and check it.

Exit 0 when every certificate's seal holds, every source hash matches the stream, and the
recomputation reproduces every certificate exactly; exit 1 naming each one that does not.
The evaluation options (cascade rule) are read from ``eval/report.json`` so that the
recomputation decides exactly as the evaluation did.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator
from pathlib import Path

import orjson

from cotaudit.errors import UsageError
from cotaudit.schema import JSONDict
from evaluator.audit import VANISHED_READINGS
from evaluator.certificates import (
    read_certificates,
    require_current_format,
    text_hash,
    verify_certificates,
)
from evaluator.pipeline import EvaluateOptions, Evaluation
from evaluator.source import iter_records, resolve_stream

HELP = "Recompute every certificate from the stream's raw outputs and check every hash."
MAX_LISTED = 200  # failures printed; the count is always printed


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run", type=Path, metavar="RUN_DIR", help="an evaluated run directory")
    parser.add_argument(
        "--eval-dir", type=Path, metavar="DIR", help="evaluation directory (default: RUN_DIR/eval)"
    )


def _options(eval_dir: Path) -> EvaluateOptions:
    report = eval_dir / "report.json"
    if not report.is_file():
        return EvaluateOptions(n_boot=0)
    try:
        data = orjson.loads(report.read_bytes())
    except orjson.JSONDecodeError as exc:
        raise UsageError(
            "report.json is not valid JSON", where=str(report), fix="Re-run cotaudit evaluate."
        ) from exc
    options = data.get("options") if isinstance(data, dict) else None
    mode = (options or {}).get("cascade_mode", EvaluateOptions().cascade_mode)
    majority = bool((options or {}).get("majority", True))
    vanished = (options or {}).get("vanished", EvaluateOptions().vanished)
    if vanished not in VANISHED_READINGS:
        raise UsageError(
            f"report.json: options.vanished is '{vanished}', not a reading this version knows",
            where=str(report),
            fix=f"Use one of {', '.join(VANISHED_READINGS)}, or re-run cotaudit evaluate.",
        )
    return EvaluateOptions(n_boot=0, cascade_mode=mode, majority=majority, vanished=vanished)


def verify_run(run: Path, eval_dir: Path | None = None) -> list[str]:
    """Return the failures of verifying ``run`` (empty when everything holds)."""
    stream = resolve_stream(run)
    eval_dir = eval_dir or Path(stream).parent / "eval"
    certificates = eval_dir / "certificates.jsonl"
    if not certificates.is_file():
        raise UsageError(
            "no certificates.jsonl", where=str(certificates), fix="Run `cotaudit evaluate` first."
        )
    require_current_format(certificates)
    # Pass 1: the hash of every raw output (last record per request id wins, as in evaluation).
    hashes: dict[str, str | None] = {}
    for record in iter_records(stream):
        if record.get("kind") == "response":
            hashes[str(record.get("request_id"))] = text_hash(record.get("text"))
    # Pass 2: recompute lazily, problem by problem, and compare with the stored certificates.
    evaluation = Evaluation(_options(eval_dir), keep_statistics=False)

    def recomputed() -> Iterator[JSONDict]:
        for record in iter_records(stream):
            for audit in evaluation.feed(record):
                yield from audit.certificates
        for audit in evaluation.finish():
            yield from audit.certificates

    report = verify_certificates(
        read_certificates(certificates),
        recomputed(),
        hashes,
        where=str(certificates),
        reread=lambda: read_certificates(certificates),
    )
    if report.checked == 0:
        return [f"{certificates}: holds no certificates"]
    return report.failures


def run(args: argparse.Namespace) -> int:
    failures = verify_run(args.run, args.eval_dir)
    if not failures:
        print(f"verify: every certificate of {args.run} holds")
        return 0
    for line in failures[:MAX_LISTED]:
        print(f"FAIL {line}", file=sys.stderr)
    if len(failures) > MAX_LISTED:
        print(f"... and {len(failures) - MAX_LISTED} more", file=sys.stderr)
    print(f"verify: {len(failures)} failures", file=sys.stderr)
    return 1
