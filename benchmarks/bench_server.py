"""Raw throughput of the local model server: requests/s on one core, zero latency.

The server runs as ``cotaudit serve --port 0`` in a subprocess pinned to one CPU; a bare
aiohttp client in this process (pinned to another CPU when there is one) keeps
``--concurrency`` requests in flight for ``--requests`` requests per protocol, after a warm-up.
The numbers are measured in this run; nothing is hard-coded.

    /work/venv/bin/python benchmarks/bench_server.py [--requests 20000] [--concurrency 64]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence

import aiohttp
import orjson


def _cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process (Linux /proc), 0.0 where unavailable."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _start_server(cpu: int | None) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "cotaudit", "serve", "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    if cpu is not None:
        os.sched_setaffinity(proc.pid, {cpu})
    assert proc.stdout is not None
    base_url = proc.stdout.readline().strip()
    if not base_url.startswith("http://"):
        proc.kill()
        raise SystemExit(f"the server did not start (first line {base_url!r})")
    return proc, base_url


async def _drive(url: str, body: bytes, total: int, concurrency: int) -> tuple[float, int]:
    """Send ``total`` requests with ``concurrency`` workers; (seconds, non-200 answers)."""
    headers = {"Content-Type": "application/json", "x-api-key": "unused"}
    connector = aiohttp.TCPConnector(limit=concurrency)
    remaining = total
    failures = 0

    async with aiohttp.ClientSession(connector=connector) as session:

        async def worker() -> None:
            nonlocal remaining, failures
            while remaining > 0:
                remaining -= 1
                async with session.post(url, data=body, headers=headers) as resp:
                    await resp.read()
                    failures += resp.status != 200

        start = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        return time.perf_counter() - start, failures


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=20_000, help="requests per protocol")
    parser.add_argument("--concurrency", type=int, default=64)
    args = parser.parse_args(argv)

    cpus = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
    server_cpu = cpus[0] if cpus else None
    if len(cpus) > 1:
        os.sched_setaffinity(0, set(cpus[1:]))  # keep the client off the server's core
    proc, base_url = _start_server(server_cpu)
    messages = [{"role": "user", "content": "Alex is a bempus. Is Alex a bimpus? " * 8}]
    cases = {
        "openai /v1/chat/completions": (
            f"{base_url}/chat/completions",
            orjson.dumps({"model": "echo", "messages": messages, "max_tokens": 256}),
        ),
        "anthropic /v1/messages": (
            f"{base_url}/messages",
            orjson.dumps({"model": "echo", "messages": messages, "max_tokens": 256}),
        ),
    }
    try:
        print(f"server {base_url} on cpu {server_cpu}; client on cpus {cpus[1:] or 'shared'}")
        print(f"{args.requests} requests per protocol, concurrency {args.concurrency}")
        for name, (url, body) in cases.items():
            asyncio.run(_drive(url, body, min(2000, args.requests), args.concurrency))  # warm-up
            cpu_before = _cpu_seconds(proc.pid)
            seconds, failures = asyncio.run(_drive(url, body, args.requests, args.concurrency))
            busy = (_cpu_seconds(proc.pid) - cpu_before) / seconds
            rate = args.requests / seconds
            print(
                f"{name:28s} {rate:6.0f} req/s  ({seconds:.2f} s, {failures} non-200; "
                f"server core {busy:.0%} busy -> {rate / max(busy, 1e-9):6.0f} req/s per busy core)"
            )
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=10)
    return 0


if __name__ == "__main__":
    sys.exit(main())
