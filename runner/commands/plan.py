"""``cotaudit plan CONFIG --out FILE``: every planned request as JSONL; sends nothing."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import BinaryIO

import orjson

from cotaudit.errors import UsageError
from cotaudit.output_file import PLAN, check_output_file, replacing
from runner.commands.run import (
    add_config_or_model,
    add_overrides,
    check_local_models,
    config_from_args,
    operational_overrides_given,
    warn_unsent_settings,
)
from runner.config import SweepConfig
from runner.engine import iter_plan
from runner.manifest import Shard

HELP = "Write every planned request of a sweep (problem records first) as JSONL; send nothing."


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_config_or_model(parser, "plan the default audit of one model, as cotaudit run --model does")
    parser.add_argument(
        "--out", required=True, metavar="FILE", help="output JSONL file ('-' for stdout)"
    )
    parser.add_argument("--shard", metavar="i/N", help="only this shard's requests")
    add_overrides(parser, operational=False)


def write_plan(config: SweepConfig, out: Path | None, shard: Shard | None = None) -> int:
    """Write the plan (problem and endpoint records before the requests referring to them).

    Returns the number of request records. ``out=None`` writes to stdout. The file is
    written to a temporary file beside ``out`` and renamed over it
    (``cotaudit.output_file.replacing``), so a failure leaves no partial plan and any
    previous file whole.
    """
    if out is None:
        count = _write_records(config, sys.stdout.buffer, shard)
        sys.stdout.buffer.flush()
        return count
    with replacing(out) as sink:
        return _write_records(config, sink, shard)


def _write_records(config: SweepConfig, sink: BinaryIO, shard: Shard | None) -> int:
    task = config.build_task()
    count = 0
    problems: set[str] = set()
    extras: set[tuple[str, str, str]] = set()
    for ep in config.endpoints:
        ident = ep.identity()
        last = None
        for problem, spec in iter_plan(task, ident, shard):
            pid = problem.problem_id
            if pid != last:
                last = pid
                if pid not in problems:
                    problems.add(pid)
                    sink.write(orjson.dumps(problem.to_record()) + b"\n")
                for extra in task.endpoint_records(problem, ident):
                    key = (str(extra.get("kind")), ident.name, pid)
                    if key not in extras:
                        extras.add(key)
                        sink.write(orjson.dumps(extra) + b"\n")
            sink.write(orjson.dumps(spec.to_record()) + b"\n")
            count += 1
    return count


def refuse_operational_overrides(args: argparse.Namespace) -> None:
    """Refuse ``--run-dir``, ``--max-concurrency`` and ``--no-cache``: they tell a run where
    and how to carry out its plan, and a plan is the same whatever they say. Ignoring them
    would let a user believe the plan was made for that run directory, concurrency or cache."""
    given = operational_overrides_given(args)
    if not given:
        return
    them = given[0] if len(given) == 1 else f"{', '.join(given[:-1])} and {given[-1]}"
    does = "does" if len(given) == 1 else "do"
    raise UsageError(
        f"{them} {does} nothing here: cotaudit plan writes the requests a run would send to "
        "--out; it sends nothing and opens neither a run directory nor the response cache",
        fix=f"Drop {them}: the plan is the same for every run directory, concurrency and "
        "cache (they are options of cotaudit run).",
    )


def run(args: argparse.Namespace) -> int:
    refuse_operational_overrides(args)
    config = config_from_args(args)
    check_local_models(config)
    shard = Shard.parse(args.shard) if args.shard else None
    out = None if args.out == "-" else Path(args.out)
    if out is not None:
        check_output_file(out, PLAN, flag="--out")
    warn_unsent_settings(config)
    n = write_plan(config, out, shard)
    print(f"cotaudit plan: {n} requests -> {args.out}", file=sys.stderr)
    return 0
