"""The full 500-problem Logic-LM sweep against one simulated reasoner, timed.

    python benchmarks/bench_sweep.py [--model faithful] [--concurrency 64] [--limit N]
                                     [--server subprocess|thread]

Plans ``../shared/data/prontoqa-500/dev.json`` (source ``logiclm``: 1 original + 3 probes per
premise + 5 self-consistency samples per problem, about 29,000 requests) and runs it through
the real engine (rate limiters, cache, JSONL writer all on, fresh run dir and cache) against
the local server at zero latency. By default the server runs as ``cotaudit serve`` in a
subprocess pinned to one CPU and the engine on the other, as on a 2-core machine the two
would otherwise fight over one interpreter's GIL. Prints requests/s and total time (target:
< 60 s). Skips, with the reason, when the data is absent.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from bench_engine import server as subprocess_server

from runner.config import config_from_mapping
from runner.engine import run_sweep
from runner.server.lifecycle import start_server_thread

REPO = Path(__file__).resolve().parents[1]
DATA = REPO / ".." / "shared" / "data" / "prontoqa-500" / "dev.json"
TARGET_S = 60.0


@contextmanager
def thread_server() -> Iterator[str]:
    """The local server on a thread of this process (shares its GIL; for comparison)."""
    handle = start_server_thread()
    try:
        yield handle.base_url
    finally:
        handle.stop()


async def sweep(work: Path, base_url: str, model: str, concurrency: int, limit: int | None) -> None:
    task: dict[str, object] = {"kind": "prontoqa", "source": "logiclm", "path": str(DATA)}
    if limit is not None:
        task["limit"] = limit
    config = config_from_mapping(
        {
            "run_dir": "run",
            "cache_dir": "cache",
            "task": task,
            "endpoints": [
                {
                    "name": "local",
                    "provider": "local",
                    "model": model,
                    "base_url": base_url,
                    "requests_per_minute": 1e9,
                    "tokens_per_minute": 1e12,
                    "max_concurrency": concurrency,
                }
            ],
        },
        config_dir=work,
    )
    cpu0 = time.process_time()
    start = time.perf_counter()
    summary = await run_sweep(config, progress=False)
    seconds = time.perf_counter() - start
    cpu = time.process_time() - cpu0
    if summary.errors or summary.written != summary.planned:
        raise SystemExit(f"the sweep did not complete cleanly: {summary.line()}")
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    verdict = "met" if seconds < TARGET_S else "NOT met"
    print(
        f"sweep ({model}, concurrency {concurrency}): {summary.written} requests in "
        f"{seconds:.1f} s = {summary.written / seconds:.0f} req/s; engine CPU {cpu:.1f} s "
        f"({cpu / summary.written * 1e6:.0f} us/request); peak RSS {peak_mb:.0f} MB; "
        f"target < {TARGET_S:.0f} s: {verdict}"
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="faithful", help="simulated reasoner (default faithful)")
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--limit", type=int, default=None, help="first N problems only")
    parser.add_argument("--server", choices=("subprocess", "thread"), default="subprocess")
    args = parser.parse_args(argv)
    if not DATA.is_file():
        print(f"bench_sweep: skipped: {DATA} is absent (the shared data sits beside the repo)")
        return 0
    if args.server == "subprocess":
        cpus = sorted(os.sched_getaffinity(0))
        if len(cpus) > 1:
            os.sched_setaffinity(0, set(cpus[1:]))  # the server gets cpus[0]
        serve = subprocess_server()
    else:
        serve = thread_server()
    with tempfile.TemporaryDirectory(prefix="cotaudit-sweep-") as tmp, serve as base_url:
        asyncio.run(sweep(Path(tmp), base_url, args.model, args.concurrency, args.limit))
    return 0


if __name__ == "__main__":
    sys.exit(main())
