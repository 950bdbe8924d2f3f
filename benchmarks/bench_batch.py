"""Batch mode's cost in the runner: a sweep through each batch API of ``cotaudit serve``.

The server runs in a subprocess on the real clock (1 s of batch processing) and each sweep in
a fresh child process, so its peak RSS is the runner's alone. Prints, per API: wall time,
batches submitted, records written, peak RSS. What a user waits for in batch mode is the
provider's turnaround (up to 24 h), not this; the figure to watch is memory, which must not
grow with the plan (one batch is built or read at a time; ``docs/engine.md``, "Batch mode"),
nor with the size of a batch's results, which are read as a stream: ``--output-bytes N``
pads every answer's text to N bytes (``BatchSpec.output_bytes``), results as long as a
reasoning model's; ``--no-cache`` runs without the response cache, whose stores of those
answers are the rest of what the runner holds.

    python benchmarks/bench_batch.py [--requests 200000] [--batch 20000] [--output-bytes 0]
        [--no-cache]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import orjson


def serve(output_bytes: int) -> None:
    """The local server, batches taking 1 s to process, until stdin closes."""
    from runner.server.batch_jobs import BatchSpec
    from runner.server.lifecycle import start_server_thread
    from runner.server.settings import ServerConfig

    config = ServerConfig(batches=BatchSpec(processing_s=1.0, output_bytes=output_bytes))
    with start_server_thread(config) as server:
        print(server.base_url, flush=True)
        sys.stdin.read()


def sweep(base_url: str, provider: str, requests: int, batch: int, cache: bool) -> None:
    from runner.config import config_from_mapping
    from runner.engine import run_sweep

    work = Path(tempfile.mkdtemp(prefix="bench-batch-"))
    with (work / "prompts.jsonl").open("wb") as f:
        for i in range(requests):
            f.write(orjson.dumps({"id": f"q{i}", "prompt": f"Say {i}. " * 20}) + b"\n")
    config = config_from_mapping(
        {
            "run_dir": "run",
            "cache_dir": "cache",
            "task": {"kind": "prompts", "path": "prompts.jsonl"},
            "endpoints": [
                {
                    "name": "ep",
                    "provider": provider,
                    "model": "echo",
                    "base_url": base_url,
                    "mode": "batch",
                    "max_tokens": 32,
                    "batch_poll_s": 1,
                    "batch_max_requests": batch,
                }
            ],
        },
        config_dir=work,
    )
    started = time.perf_counter()
    summary = asyncio.run(run_sweep(config, progress=False, use_cache=cache))
    elapsed = time.perf_counter() - started
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(
        f"{provider}: {requests:,} requests, {summary.batches} batches, {summary.written:,} "
        f"written, {summary.errors} errors, {elapsed:.1f} s wall, runner peak RSS {rss:.0f} MiB"
        + ("" if cache else " (no cache)")
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=200_000)
    parser.add_argument("--batch", type=int, default=20_000)
    parser.add_argument(
        "--output-bytes", type=int, default=0, help="bytes of every answer's text (default: short)"
    )
    parser.add_argument(
        "--child", nargs=2, metavar=("BASE_URL", "PROVIDER"), help=argparse.SUPPRESS
    )
    parser.add_argument("--no-cache", action="store_true", help="run without the response cache")
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(args.output_bytes)
        return 0
    if args.child:
        sweep(args.child[0], args.child[1], args.requests, args.batch, not args.no_cache)
        return 0
    server = subprocess.Popen(
        [sys.executable, __file__, "--serve", "--output-bytes", str(args.output_bytes)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert server.stdout is not None and server.stdin is not None
        base_url = server.stdout.readline().strip()
        print(f"load average {os.getloadavg()[0]:.1f} at the start")
        for provider in ("openai", "anthropic"):
            subprocess.run(
                [sys.executable, __file__, "--requests", str(args.requests), "--batch",
                 str(args.batch), "--child", base_url, provider,
                 *(["--no-cache"] if args.no_cache else [])],
                check=True,
            )  # fmt: skip
        print(f"load average {os.getloadavg()[0]:.1f} at the end")
    finally:
        assert server.stdin is not None
        server.stdin.close()  # the server child stops at the end of its stdin
        server.wait()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
