"""Instructions per request of a warm rerun, counted by valgrind: a figure the VM's speed does
not move.

    python benchmarks/bench_warm_instructions.py [--requests 10000]

Section 4 of ``bench_engine.py`` times a warm rerun, and on a VM whose speed changes within
seconds that time moves by up to 1.9x. This script counts the user-space instructions of one
instead (``valgrind --tool=cachegrind``), which repeat within ~0.5%: a cache is filled once by
a cold run against the local server, then a fresh process reruns the prompts into a fresh run
dir once, and another twice; the difference is one warm rerun, start-up and imports excluded.
Kernel time (page faults, ``write``) is not counted, and valgrind hides SHA-NI, so OpenSSL's
SHA-256 takes its portable path (~9k instructions per request, against ~2k natively). Compare
commits with it, not machines. Skips, saying why, where valgrind is absent.
"""

from __future__ import annotations

import argparse
import asyncio
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import bench_engine as be  # beside this script: Python puts its directory on sys.path

REPO = Path(__file__).resolve().parents[1]


async def fill_cache(work: Path, n: int) -> None:
    be.write_prompts(work / "prompts.jsonl", n)
    with be.server() as base_url:
        _, summary = await be.engine_run(be.make_config(work, "run", base_url, concurrency=32))
    assert summary.written == n and summary.cache_hits == 0, summary


async def warm_reruns(work: Path, n: int, reruns: int) -> None:
    for _ in range(reruns):
        shutil.rmtree(work / "run2", ignore_errors=True)
        # A warm rerun sends nothing: the base URL is never contacted.
        config = be.make_config(work, "run2", "http://127.0.0.1:9/v1", concurrency=32)
        _, summary = await be.engine_run(config)
        assert summary.cache_hits == n, summary


def instructions(work: Path, n: int, reruns: int) -> int:
    proc = subprocess.run(
        [
            "valgrind",
            "--tool=cachegrind",
            "--cache-sim=no",
            "--cachegrind-out-file=/dev/null",
            sys.executable,
            __file__,
            "--requests",
            str(n),
            "--rerun-into",
            str(work),
            "--reruns",
            str(reruns),
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    found = re.search(r"I\s+refs:\s+([\d,]+)", proc.stderr)
    if proc.returncode != 0 or found is None:
        raise SystemExit(f"valgrind failed (exit {proc.returncode}):\n{proc.stderr[-2000:]}")
    return int(found.group(1).replace(",", ""))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=10_000)
    parser.add_argument("--rerun-into", type=Path, help=argparse.SUPPRESS)  # the child's mode
    parser.add_argument("--reruns", type=int, default=1, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.rerun_into is not None:
        asyncio.run(warm_reruns(args.rerun_into, args.requests, args.reruns))
        return 0
    if shutil.which("valgrind") is None:
        print("skipped: valgrind is not installed (apt install valgrind)")
        return 0
    n = args.requests
    with tempfile.TemporaryDirectory(prefix="cotaudit-bench-") as tmp:
        work = Path(tmp)
        asyncio.run(fill_cache(work, n))
        one, two = instructions(work, n, 1), instructions(work, n, 2)
    print(
        f"warm rerun of {n} cached requests: {(two - one) / n:,.0f} instructions per request "
        f"(valgrind cachegrind, user space; {one:,} with one rerun, {two:,} with two)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
