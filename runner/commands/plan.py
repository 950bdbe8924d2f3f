"""``cotaudit plan CONFIG --out FILE``: every planned request as JSONL; sends nothing."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import orjson

from cotaudit.errors import UsageError
from runner.config import SweepConfig, load_config
from runner.engine import iter_plan
from runner.manifest import Shard

HELP = "Write every planned request of a sweep (problem records first) as JSONL; send nothing."


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("config", help="the sweep config (TOML)")
    parser.add_argument("--out", required=True, help="output JSONL file ('-' for stdout)")
    parser.add_argument("--shard", metavar="i/N", help="only this shard's requests")


def write_plan(config: SweepConfig, out: Path | None, shard: Shard | None = None) -> int:
    """Write the plan (problem and endpoint records before the requests referring to them).

    Returns the number of request records. ``out=None`` writes to stdout. The file is
    written to a temporary name and renamed, so a failure leaves no partial plan.
    """
    task = config.build_task()
    count = 0
    problems: set[str] = set()
    extras: set[tuple[str, str, str]] = set()
    tmp = out.with_name(out.name + ".tmp") if out is not None else None
    sink = tmp.open("wb") if tmp is not None else sys.stdout.buffer
    try:
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
    except BaseException:
        if tmp is not None:
            sink.close()
            tmp.unlink(missing_ok=True)
        raise
    if tmp is not None and out is not None:
        sink.close()
        os.replace(tmp, out)
    else:
        sink.flush()
    return count


def run(args: argparse.Namespace) -> int:
    config = load_config(args.config)
    shard = Shard.parse(args.shard) if args.shard else None
    out = None if args.out == "-" else Path(args.out)
    if out is not None and not out.parent.is_dir():
        raise UsageError(
            f"directory {str(out.parent)!r} does not exist",
            where="--out",
            fix="Create it first or choose another path.",
        )
    n = write_plan(config, out, shard)
    print(f"cotaudit plan: {n} requests -> {args.out}", file=sys.stderr)
    return 0
