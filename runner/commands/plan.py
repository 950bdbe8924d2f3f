"""``cotaudit plan CONFIG --out FILE``: every planned request as JSONL; sends nothing."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import orjson

from cotaudit.errors import UsageError
from runner.commands.run import add_config_or_model, add_overrides, config_from_args
from runner.config import SweepConfig
from runner.engine import iter_plan
from runner.manifest import Shard

HELP = "Write every planned request of a sweep (problem records first) as JSONL; send nothing."


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_config_or_model(parser, "plan the default audit of one model, as cotaudit run --model does")
    parser.add_argument("--out", required=True, help="output JSONL file ('-' for stdout)")
    parser.add_argument("--shard", metavar="i/N", help="only this shard's requests")
    add_overrides(parser)


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
        try:
            os.replace(tmp, out)
        finally:
            tmp.unlink(missing_ok=True)
    else:
        sink.flush()
    return count


def check_out(out: Path) -> None:
    """Refuse an ``--out`` that cannot become a file, before anything is written."""
    if out.is_dir():
        raise UsageError(
            f"{out} is a directory; the plan is one JSONL file",
            where="--out",
            fix=f"Give a file path, e.g. --out {out / 'plan.jsonl'}.",
        )
    if not out.parent.is_dir():
        what = "is not a directory" if out.parent.exists() else "does not exist"
        raise UsageError(
            f"the directory {out.parent} {what}",
            where="--out",
            fix="Create the directory first or choose another path.",
        )


def run(args: argparse.Namespace) -> int:
    args.no_cache = getattr(args, "no_cache", False)
    config = config_from_args(args)
    shard = Shard.parse(args.shard) if args.shard else None
    out = None if args.out == "-" else Path(args.out)
    if out is not None:
        check_out(out)
    n = write_plan(config, out, shard)
    print(f"cotaudit plan: {n} requests -> {args.out}", file=sys.stderr)
    return 0
