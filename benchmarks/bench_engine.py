"""Engine benchmarks against the local server (run in a subprocess), printed as ratios.

    python benchmarks/bench_engine.py [--only overhead,latency,rate,cache,memory] [--quick]
                                      [--no-pin]

1. overhead: zero latency; the engine (rate limiters, cache, JSONL writer all on) vs a bare
   aiohttp loop at the same concurrency, same server, alternating in one run.
2. latency: 10,000 requests, 100 ms server latency, concurrency 200 vs the ideal 2,000 req/s.
3. rate: a requests/s limit and a tokens/min limit, each enforced by the server too, held for
   >= 20 s: measured rate vs the limit, and the number of 429s.
4. cache: 10,000 requests at 20 ms latency, cold run vs a warm rerun into a fresh run dir.
5. memory: 100,000 requests planned and run by ``cotaudit run`` in a subprocess; peak RSS.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

import aiohttp
import orjson

from cotaudit.schema import read_records
from runner.config import SweepConfig, config_from_mapping
from runner.engine import RunSummary, run_sweep
from runner.transport import TransportFactory, aiohttp_only, default_transport

REPO = Path(__file__).resolve().parents[1]
PIN = True  # server on the first CPU, engine and bare loop on the others (--no-pin: shared)
# Read before main() narrows this process to the other CPUs: a server started afterwards
# would otherwise inherit (and share) the engine's CPU instead of getting its own.
ALL_CPUS = sorted(os.sched_getaffinity(0))


@contextmanager
def server(*args: str) -> Iterator[str]:
    """``cotaudit serve --port 0 ARGS`` in a subprocess on CPU 0; yields its base URL."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "cotaudit", "serve", "--port", "0", *args],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    if PIN and len(ALL_CPUS) > 1:
        os.sched_setaffinity(proc.pid, {ALL_CPUS[0]})
    print(
        f"  (server on CPUs {sorted(os.sched_getaffinity(proc.pid))}, "
        f"this process on {sorted(os.sched_getaffinity(0))})"
    )
    assert proc.stdout is not None
    base_url = proc.stdout.readline().strip()
    if not base_url.startswith("http://"):
        proc.kill()
        raise SystemExit(f"the server did not start (first line {base_url!r})")
    try:
        yield base_url
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def server_stats(base_url: str) -> dict[str, Any]:
    import urllib.request

    root = base_url.rsplit("/v1", 1)[0]
    with urllib.request.urlopen(f"{root}/stats", timeout=5) as resp:
        stats: dict[str, Any] = orjson.loads(resp.read())
    return stats


def write_prompts(path: Path, n: int, *, words: int = 8) -> None:
    filler = " ".join(["premise"] * words)
    with path.open("wb") as f:
        for i in range(n):
            f.write(orjson.dumps({"id": f"q{i:06d}", "prompt": f"Say {i}. {filler}"}) + b"\n")


def make_config(
    work: Path,
    run_dir: str,
    base_url: str,
    *,
    concurrency: int,
    rpm: float = 1e9,
    tpm: float = 1e12,
    max_tokens: int = 16,
) -> SweepConfig:
    return config_from_mapping(
        {
            "run_dir": run_dir,
            "cache_dir": "cache",
            "task": {"kind": "prompts", "path": "prompts.jsonl"},
            "endpoints": [
                {
                    "name": "local",
                    "provider": "local",
                    "model": "echo",
                    "base_url": base_url,
                    "requests_per_minute": rpm,
                    "tokens_per_minute": tpm,
                    "max_concurrency": concurrency,
                    "max_tokens": max_tokens,
                    "timeout_s": 60,
                }
            ],
        },
        config_dir=work,
    )


async def bare_loop(base_url: str, prompts: Path, concurrency: int) -> float:
    """The reference: read prompts, POST them with N workers, parse the JSON. Seconds, from
    reading the file to closing the session (the engine's time also runs from its start to
    its return)."""
    start = time.perf_counter()
    url = base_url + "/chat/completions"
    headers = {"content-type": "application/json"}
    lines = prompts.read_bytes().splitlines()
    it = iter(lines)
    connector = aiohttp.TCPConnector(limit=concurrency)
    async with aiohttp.ClientSession(connector=connector) as session:

        async def worker() -> None:
            for line in it:
                prompt = orjson.loads(line)["prompt"]
                body = orjson.dumps(
                    {
                        "model": "echo",
                        "messages": [{"role": "user", "content": prompt}],
                        "max_tokens": 16,
                        "temperature": 0.0,
                    }
                )
                async with session.post(url, data=body, headers=headers) as resp:
                    orjson.loads(await resp.read())

        await asyncio.gather(*(worker() for _ in range(concurrency)))
    return time.perf_counter() - start


async def engine_run(
    config: SweepConfig, transport_factory: TransportFactory = default_transport
) -> tuple[float, RunSummary]:
    start = time.perf_counter()
    summary = await run_sweep(config, progress=False, transport_factory=transport_factory)
    return time.perf_counter() - start, summary


def fresh(work: Path) -> None:
    for name in ("run", "run2", "cache"):
        shutil.rmtree(work / name, ignore_errors=True)


async def bench_overhead(work: Path, n: int, concurrency: int) -> None:
    """The engine as it runs (keep-alive client for http://) and with aiohttp as its client.

    The second figure isolates the engine's own work: both sides then spend the same CPU in
    aiohttp, so its gap to the bare loop is what the limiter, cache and writer cost."""
    write_prompts(work / "prompts.jsonl", n)
    with server() as base_url:
        await bare_loop(base_url, work / "prompts.jsonl", concurrency)  # warm-up
        ratios: dict[str, list[float]] = {"engine": [], "on aiohttp": []}
        for rep in range(3):
            cpu = [time.process_time()]
            bare_s = await bare_loop(base_url, work / "prompts.jsonl", concurrency)
            cpu.append(time.process_time())
            line = (
                f"  rep {rep}: bare {n / bare_s:6.0f} req/s {(cpu[1] - cpu[0]) / n * 1e6:3.0f} us"
            )
            for label, factory in (("engine", default_transport), ("on aiohttp", aiohttp_only)):
                fresh(work)
                eng_s, summary = await engine_run(
                    make_config(work, "run", base_url, concurrency=concurrency), factory
                )
                cpu.append(time.process_time())
                assert summary.written == n and summary.errors == 0
                ratios[label].append(bare_s / eng_s)
                # Process CPU (cache and fsync threads included): at zero latency each side is
                # CPU-bound on its core, so the ratio follows these figures.
                line += (
                    f"; {label} {n / eng_s:6.0f} req/s {(cpu[-1] - cpu[-2]) / n * 1e6:3.0f} us "
                    f"-> {bare_s / eng_s:.2f}x"
                )
            print(line)
    engine, on_aiohttp = ratios["engine"], ratios["on aiohttp"]
    print(
        f"1. overhead (n={n}, concurrency {concurrency}): engine/bare = {max(engine):.2f}x best, "
        f"{sorted(engine)[1]:.2f}x median (target >= 0.8x); with aiohttp as the engine's "
        f"client: {sorted(on_aiohttp)[1]:.2f}x median"
    )


async def bench_latency(work: Path, n: int, reps: int = 3) -> None:
    """The engine vs the ideal; a bare loop on the same server, alternating, for context:
    on a loaded 2-core machine even the bare loop falls short of the ideal."""
    write_prompts(work / "prompts.jsonl", n)
    engine_rates, bare_rates = [], []
    with server("--latency", "fixed:0.1") as base_url:
        for rep in range(reps):
            fresh(work)
            seconds, summary = await engine_run(make_config(work, "run", base_url, concurrency=200))
            assert summary.written == n and summary.errors == 0
            bare_s = await bare_loop(base_url, work / "prompts.jsonl", 200)
            engine_rates.append(n / seconds)
            bare_rates.append(n / bare_s)
            print(
                f"  rep {rep}: engine {n / seconds:5.0f} req/s = {n / seconds / 2000:.3f}x ideal, "
                f"bare loop {n / bare_s:5.0f} req/s = {n / bare_s / 2000:.3f}x ideal"
            )
    best, median = max(engine_rates), sorted(engine_rates)[len(engine_rates) // 2]
    print(
        f"2. latency-bound (n={n}, 100 ms, concurrency 200): median {median:.0f} req/s = "
        f"{median / 2000:.3f}x, best {best / 2000:.3f}x of the ideal 2000 req/s (target >= "
        f"0.9x); bare loop median {sorted(bare_rates)[len(bare_rates) // 2] / 2000:.3f}x"
    )


def _span_rate(config: SweepConfig, what: str) -> tuple[float, float, int]:
    """(rate per second of ``what`` over the run, seconds, 429 count) from the records."""
    recs = [r for r in read_records(config.run_dir / "results.jsonl") if r["kind"] == "response"]
    times = sorted(datetime.fromisoformat(r["finished_at"]).timestamp() for r in recs)
    span = times[-1] - times[0]
    if what == "requests":
        amount = float(len(recs) - 1)
    else:
        # Tokens as the limiters count them: prompt estimate (~4 chars/token) + max_tokens.
        amount = (
            sum(
                max(1, sum(len(m["content"]) for m in r["messages"]) // 4)
                + r["params"]["max_tokens"]
                for r in recs
            )
            * (len(recs) - 1)
            / len(recs)
        )
    r429 = sum(o == "429" for r in recs for o in r["attempt_outcomes"])
    return amount / span, span, r429


async def bench_rate(work: Path, seconds: float) -> None:
    rps = 40.0
    n = int(rps * seconds) + 1
    write_prompts(work / "prompts.jsonl", n)
    fresh(work)
    with server("--rpm", str(rps * 60)) as base_url:
        config = make_config(work, "run", base_url, concurrency=64, rpm=rps * 60)
        await engine_run(config)
        server_429 = server_stats(base_url)["by_status"].get("429", 0)
    rate, span, r429 = _span_rate(config, "requests")
    print(
        f"3a. rate limit {rps:.0f} req/s over {span:.1f} s: measured {rate:.2f} req/s = "
        f"{rate / rps - 1:+.2%} (target within +/-3%), 429s: client {r429}, server {server_429}"
    )

    tpm = 60_000.0  # 1,000 tokens/s; each request ~ 6 prompt + 100 output tokens
    per_request = 106
    n = int(tpm / 60 * seconds / per_request) + 1
    write_prompts(work / "prompts.jsonl", n)
    fresh(work)
    with server("--tpm", str(tpm)) as base_url:
        config = make_config(work, "run", base_url, concurrency=64, tpm=tpm, max_tokens=100)
        await engine_run(config)
        server_429 = server_stats(base_url)["by_status"].get("429", 0)
    rate, span, r429 = _span_rate(config, "tokens")
    print(
        f"3b. token limit {tpm:.0f} tokens/min over {span:.1f} s: measured {rate * 60:.0f} "
        f"tokens/min = {rate * 60 / tpm - 1:+.2%} (target within +/-3%), 429s: client {r429}, "
        f"server {server_429}"
    )


async def bench_cache(work: Path, n: int, concurrencies: Sequence[int], warm_reps: int = 3) -> None:
    """Cold run, then ``warm_reps`` warm reruns into fresh run dirs sharing its cache.

    The warm rerun is CPU-bound and short (~0.3 s), so one hiccup of the machine moves it
    most; the median of three is the headline, and all three are printed."""
    write_prompts(work / "prompts.jsonl", n)
    with server("--latency", "fixed:0.02") as base_url:
        for concurrency in concurrencies:
            fresh(work)
            cold_s, cold = await engine_run(
                make_config(work, "run", base_url, concurrency=concurrency)
            )
            warm_runs: list[float] = []
            probes: list[float] = []
            for _ in range(warm_reps):
                shutil.rmtree(work / "run2", ignore_errors=True)
                before = server_stats(base_url)["requests_total"]
                probes.append(speed_probe(10**6, 1))
                warm_s, warm = await engine_run(
                    make_config(work, "run2", base_url, concurrency=concurrency)
                )
                sent = server_stats(base_url)["requests_total"] - before
                assert cold.written == warm.written == warm.cache_hits == n and sent == 0
                warm_runs.append(warm_s)
            warm_s = sorted(warm_runs)[len(warm_runs) // 2]
            print(
                f"4. warm cache (n={n}, 20 ms, concurrency {concurrency}): cold {cold_s:.2f} s, "
                f"warm {warm_s:.2f} s median of {', '.join(f'{w:.2f}' for w in warm_runs)} "
                f"({warm_s / n * 1e6:.0f} us/request) -> {cold_s / warm_s:.1f}x faster "
                f"(target >= 20x); the warm runs sent 0 requests; speed probe (10**6 steps) "
                f"before each: {', '.join(f'{p * 1e3:.0f}' for p in probes)} ms"
            )


def bench_memory(work: Path, n: int) -> None:
    write_prompts(work / "prompts.jsonl", n)
    fresh(work)
    with server() as base_url:
        config = work / "sweep.toml"
        config.write_text(
            f'run_dir = "run"\ncache_dir = "cache"\n[task]\nkind = "prompts"\n'
            f'path = "prompts.jsonl"\n[[endpoints]]\nname = "local"\nprovider = "local"\n'
            f'model = "echo"\nbase_url = "{base_url}"\nrequests_per_minute = 1e9\n'
            f"tokens_per_minute = 1e12\nmax_concurrency = 128\nmax_tokens = 16\n"
        )
        start = time.perf_counter()
        proc = subprocess.run(
            [sys.executable, "-m", "cotaudit", "run", str(config), "--no-progress"],
            cwd=REPO,
            capture_output=True,
            text=True,
        )
        seconds = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(proc.stderr)
    peak_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024  # KiB -> MiB
    print(
        f"5. memory (n={n}): peak RSS of the largest child (the runner) {peak_mb:.0f} MB "
        f"(target < 300 MB), {n / seconds:.0f} req/s; {proc.stderr.strip().splitlines()[-1]}"
    )


def speed_probe(steps: int = 10**7, repeat: int = 3) -> float:
    """Seconds for a fixed pure-Python loop (``steps`` additions), best of ``repeat``: how fast
    this machine runs Python right now. CPU-bound figures (section 1's CPU per request, the
    warm rerun of section 4) scale with it; latency-bound ones (section 2, the cold run) do
    not. The VM's speed changes within seconds, so section 4 also probes (10**6 steps, ~35 ms)
    just before each warm rerun."""
    best = float("inf")
    for _ in range(repeat):
        start, total = time.perf_counter(), 0
        for i in range(steps):
            total += i
        best = min(best, time.perf_counter() - start)
    return best


async def main_async(args: argparse.Namespace, work: Path) -> None:
    only = set(args.only.split(","))
    q = args.quick
    print(f"speed probe: a 10**7-step Python loop takes {speed_probe():.2f} s on this machine now")
    if "overhead" in only:
        await bench_overhead(work, 2000 if q else 10_000, 64)
    if "latency" in only:
        await bench_latency(work, 2000 if q else 10_000)
    if "rate" in only:
        await bench_rate(work, 5.0 if q else 22.0)
    if "cache" in only:
        await bench_cache(work, 2000 if q else 10_000, (32, 16))
    if "memory" in only:
        bench_memory(work, 10_000 if q else 100_000)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="overhead,latency,rate,cache,memory")
    parser.add_argument("--quick", action="store_true", help="small sizes, for a smoke test")
    parser.add_argument(
        "--no-pin",
        action="store_true",
        help="let the server and the engine share every CPU (as in a normal deployment) "
        "instead of one CPU for the server and the rest for the engine",
    )
    args = parser.parse_args(argv)
    global PIN
    PIN = not args.no_pin
    if PIN and len(ALL_CPUS) > 1:
        os.sched_setaffinity(0, set(ALL_CPUS[1:]))  # keep the engine off the server's core
    with tempfile.TemporaryDirectory(prefix="cotaudit-bench-") as tmp:
        asyncio.run(main_async(args, Path(tmp)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
