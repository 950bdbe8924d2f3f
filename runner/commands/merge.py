"""``cotaudit merge OUT SHARD_DIR...``: the run directories of a sharded sweep as one run.

Each shard (``cotaudit run CONFIG --shard i/N --run-dir DIR``) holds part of every problem's
requests, so no shard can be evaluated alone as the sweep. The merge writes a run directory of
the whole plan (``runner.shard_merge``; docs/engine.md, "Sharding"), which
``evaluate``, ``verify``, ``view`` and a resuming ``run`` take as one run. It holds OUT's run
lock while it writes, as ``run`` does: an OUT that a run or another merge is writing is refused,
exit 2, naming its pid. It holds every shard's run lock while it checks and copies them: a shard
still being written (its ``run --shard`` going on) is refused, exit 2, naming the shard's
directory and the pid, and a ``run`` into a shard started meanwhile is refused.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from cotaudit.flags import output_dir
from runner.shard_merge import merge_shards

HELP = (
    "Merge the run directories of every shard of a sweep (run --shard i/N) into OUT, one run "
    "directory of the whole plan: OUT/results.jsonl and OUT/manifest.json."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "out", type=output_dir, metavar="OUT", help="the run directory to write (must hold no run)"
    )
    parser.add_argument(
        "shards",
        type=Path,
        nargs="+",
        metavar="SHARD_DIR",
        help="each shard's run directory, 0/N to N-1/N, each once, in any order",
    )


def run(args: argparse.Namespace) -> int:
    merged = merge_shards(args.out, list(args.shards))
    torn = (
        f"; left out {merged.torn_bytes:,} bytes of torn last lines (a shard cut short: "
        f"`cotaudit run CONFIG --run-dir {merged.out}` sends what they held)"
        if merged.torn_bytes
        else ""
    )
    print(
        f"cotaudit merge: {len(merged.shards)} shards ({', '.join(merged.shards)}), "
        f"{merged.records:,} records -> {merged.out}{torn}",
        file=sys.stderr,
    )
    return 0
