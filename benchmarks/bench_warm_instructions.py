"""Instructions per request of a warm rerun, counted by valgrind: a figure the VM's speed does
not move.

    python benchmarks/bench_warm_instructions.py [--requests 10000] [--stages]

Section 4 of ``bench_engine.py`` times a warm rerun, and on a VM whose speed changes within
seconds that time moves by up to 1.9x. This script counts the user-space instructions of one
instead (``valgrind --tool=cachegrind``), which repeat within ~0.5%: a cache is filled once by
a cold run against the local server, then a fresh process reruns the prompts into a fresh run
dir once, and another twice; the difference is one warm rerun, start-up and imports excluded.

``--stages`` also counts each stage of the warm path run alone over the same requests, with
the collector off (one run of the stage minus none): validating the prompts file, planning,
lookups (and their SQL alone), building response and problem records, and the writer.

Kernel time (page faults, ``write``) is not counted, and valgrind hides SHA-NI, so OpenSSL's
SHA-256 takes its portable path (~9k instructions per request, against ~2k natively). Compare
commits with it, not machines. Skips, saying why, where valgrind is absent.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

import bench_engine as be  # beside this script: Python puts its directory on sys.path

from runner.cache import ResponseCache
from runner.config import SweepConfig
from runner.engine import _iso, _Sweep, iter_plan
from runner.writer import RecordWriter

REPO = Path(__file__).resolve().parents[1]
STAGES = ("validate", "plan", "lookup", "sql", "records", "problems", "write")
NOWHERE = "http://127.0.0.1:9/v1"  # a warm rerun sends nothing: never contacted


async def fill_cache(work: Path, n: int) -> None:
    be.write_prompts(work / "prompts.jsonl", n)
    with be.server() as base_url:
        _, summary = await be.engine_run(be.make_config(work, "run", base_url, concurrency=32))
    assert summary.written == n and summary.cache_hits == 0, summary


async def warm_reruns(work: Path, n: int, reruns: int) -> None:
    for _ in range(reruns):
        shutil.rmtree(work / "run2", ignore_errors=True)
        _, summary = await be.engine_run(be.make_config(work, "run2", NOWHERE, concurrency=32))
        assert summary.cache_hits == n, summary


async def run_stage(work: Path, stage: str, reps: int) -> None:
    """Set everything up, then run ``stage`` ``reps`` times (0: the setup's cost alone)."""
    gc.disable()  # a stage keeps its results alive; the engine tunes the collector itself
    config: SweepConfig = be.make_config(work, "run2", NOWHERE, concurrency=32)
    task, identity = config.build_task(), config.endpoints[0].identity()
    plan = list(iter_plan(task, identity, None))
    keys = [spec.cache_key for _, spec in plan]
    cache = await ResponseCache.open(config.cache_dir)
    chunks = [keys[i : i + 512] for i in range(0, len(keys), 512)]
    hits = [hit for chunk in chunks for hit in await cache.get_many(chunk)]
    now = _iso(time.time())

    def records() -> list[dict[str, Any]]:
        return [
            _Sweep._record(None, spec, hit, None, [], 0.0, now, now, cached=True)  # type: ignore[arg-type]
            for (_, spec), hit in zip(plan, hits, strict=True)
        ]

    responses, problems = records(), [problem.to_record() for problem, _ in plan]

    async def write() -> None:
        shutil.rmtree(work / "stage", ignore_errors=True)
        (work / "stage").mkdir()
        writer = RecordWriter(work / "stage" / "results.jsonl")
        writer.start()
        for problem, response in zip(problems, responses, strict=True):
            writer.put(problem)
            writer.put(response)
            if len(writer._buffer) >= 1024:  # what the engine's chunks hand it per turn
                writer._drain()
        await writer.close()

    async def lookups() -> None:
        for chunk in chunks:
            await cache.get_many(chunk)

    steps: dict[str, Callable[[], object]] = {
        "validate": config.build_task,
        "plan": lambda: list(iter_plan(task, identity, None)),
        "sql": lambda: [cache._get_many_sync(chunk) for chunk in chunks],
        "records": records,
        "problems": lambda: [problem.to_record() for problem, _ in plan],
    }
    coroutines: dict[str, Callable[[], Coroutine[Any, Any, None]]] = {
        "lookup": lookups,
        "write": write,
    }
    for _ in range(reps):
        if stage in coroutines:
            await coroutines[stage]()
        else:
            steps[stage]()
    await cache.close()


def instructions(work: Path, n: int, mode: list[str]) -> int:
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
            "--child-dir",
            str(work),
            *mode,
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
    parser.add_argument("--stages", action="store_true", help="also count each stage alone")
    parser.add_argument("--child-dir", type=Path, help=argparse.SUPPRESS)  # the child's mode
    parser.add_argument("--reruns", type=int, default=1, help=argparse.SUPPRESS)
    parser.add_argument("--stage", choices=STAGES, help=argparse.SUPPRESS)
    args = parser.parse_args()
    n = args.requests
    if args.child_dir is not None:
        if args.stage is not None:
            asyncio.run(run_stage(args.child_dir, args.stage, args.reruns))
        else:
            asyncio.run(warm_reruns(args.child_dir, n, args.reruns))
        return 0
    if shutil.which("valgrind") is None:
        print("skipped: valgrind is not installed (apt install valgrind)")
        return 0
    with tempfile.TemporaryDirectory(prefix="cotaudit-bench-") as tmp:
        work = Path(tmp)
        asyncio.run(fill_cache(work, n))
        one = instructions(work, n, ["--reruns", "1"])
        two = instructions(work, n, ["--reruns", "2"])
        print(
            f"warm rerun of {n} cached requests: {(two - one) / n:,.0f} instructions per request "
            f"(valgrind cachegrind, user space; {one:,} with one rerun, {two:,} with two)"
        )
        if args.stages:
            for stage in STAGES:
                alone = instructions(work, n, ["--stage", stage, "--reruns", "1"])
                setup = instructions(work, n, ["--stage", stage, "--reruns", "0"])
                print(f"  stage {stage:9s} {(alone - setup) / n:9,.0f} instructions per request")
    return 0


if __name__ == "__main__":
    sys.exit(main())
