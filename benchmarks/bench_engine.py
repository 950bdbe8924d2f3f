"""The engine judged by what a user waits for, against the local server in provider mode.

    python benchmarks/bench_engine.py [--only known,headers,noheaders,latency,ceiling,warm,memory]
                                      [--quick] [--sizes 10000,100000,1000000] [--no-pin]

Each section runs the engine (``runner.engine.run_sweep``, or ``cotaudit run`` in a
subprocess) against ``cotaudit serve`` in a subprocess and prints what it measured, its target
and the ratio; comparisons are made side by side in the same run. Nothing is hard-coded.

1. known: 5,000 requests at a configured 3,000 requests/min and a token limit that binds half
   the time (the first two thirds of the plan are short prompts, bound by the request limit;
   the last third long ones, bound by the token limit, each phase 66.7 s), the server enforcing
   the same budgets, latency lognormal with a 1 s median: wall time against the bound the
   limits set (133.3 s), and 429s.
2. headers: a server limit of 3,000 requests/min the client is not told (it is configured far
   above it) but the server's rate-limit headers are on every answer; concurrency ``auto``:
   how soon the rate reaches 95% of the limit, the rate after 30 s, and the share of 429s.
3. noheaders: the same, but the server sends no rate-limit headers, only ``retry-after`` on
   its 429s.
4. latency: 50 ms latency, concurrency 100, 10,000 requests: the engine against a bare
   aiohttp loop on the same server, alternating, five rounds; each side's CPU per request;
   and the engine without its response cache (``use_cache=False``) in the same rounds.
5. ceiling: zero latency, 10,000 requests, concurrency 64: requests/s (a sanity floor).
6. warm: a rerun of 100,000 cached requests (``cotaudit run`` into a fresh run dir sharing
   the cache) against ``cotaudit plan`` of the same config, alternating, three rounds each.
7. memory: ``cotaudit run`` of 10,000, 100,000 and 1,000,000 requests (zero latency), then
   the same command again (a resume with every request done): peak RSS of each, and the
   resume state's bytes per planned request.

``--server-repo PATH`` runs the server from another checkout (to measure an older engine
against this server: run this script from that checkout's benchmarks/ directory).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
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

from cotaudit.errors import UsageError
from cotaudit.schema import read_records
from runner.config import SweepConfig, config_from_mapping
from runner.engine import RunSummary, run_sweep

REPO = Path(__file__).resolve().parents[1]
SERVER_REPO = REPO  # --server-repo
PIN = True  # server on the first CPU, the engine on the others (--no-pin: shared)
ALL_CPUS = sorted(os.sched_getaffinity(0))  # read before main() narrows this process
UNLIMITED_RPM, UNLIMITED_TPM = 1e9, 1e12  # "the client is not told": far above any limit
WARMUP_S = 30.0  # sections 2 and 3: "within 30 s", the rate is measured from then on


@contextmanager
def server(*args: str) -> Iterator[str]:
    """``cotaudit serve --port 0 ARGS`` in a subprocess on the first CPU; yields its base URL."""
    env = {**os.environ, "PYTHONPATH": str(SERVER_REPO)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "cotaudit", "serve", "--port", "0", *args],
        cwd=SERVER_REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    if PIN and len(ALL_CPUS) > 1:
        os.sched_setaffinity(proc.pid, {ALL_CPUS[0]})
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


def write_prompts(path: Path, n: int, *, long_from: int | None = None, long_chars: int = 0) -> None:
    """``n`` short prompts (``Say i.``); from index ``long_from`` on, ``long_chars`` long."""
    filler = "x" * long_chars
    with path.open("wb") as f:
        for i in range(n):
            text = f"Say {i}." + (f" {filler}" if long_from is not None and i >= long_from else "")
            f.write(orjson.dumps({"id": f"q{i:07d}", "prompt": text}) + b"\n")


def auto_concurrency() -> int | str:
    """``"auto"`` where the engine has it; an engine without it gets its old default (32)."""
    try:
        config_from_mapping(
            {
                "run_dir": "r",
                "task": {"kind": "prompts", "path": "p"},
                "endpoints": [
                    {"name": "a", "provider": "local", "model": "m", "max_concurrency": "auto"}
                ],
            },
            config_dir=Path("/"),
        )
    except UsageError:
        return 32
    return "auto"


def endpoint(
    base_url: str,
    *,
    concurrency: int | str,
    rpm: float = UNLIMITED_RPM,
    tpm: float = UNLIMITED_TPM,
    max_tokens: int = 16,
) -> dict[str, Any]:
    return {
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


def make_config(work: Path, run_dir: str, ep: dict[str, Any]) -> SweepConfig:
    return config_from_mapping(
        {
            "run_dir": run_dir,
            "cache_dir": "cache",
            "task": {"kind": "prompts", "path": "prompts.jsonl"},
            "endpoints": [ep],
        },
        config_dir=work,
    )


def write_toml(work: Path, ep: dict[str, Any], run_dir: str = "run") -> Path:
    lines = [
        f'run_dir = "{run_dir}"',
        'cache_dir = "cache"',
        "[task]",
        'kind = "prompts"',
        'path = "prompts.jsonl"',
        "[[endpoints]]",
    ]
    for key, value in ep.items():
        lines.append(f"{key} = {value!r}".replace("'", '"'))
    path = work / "sweep.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


async def engine_run(config: SweepConfig, *, use_cache: bool = True) -> tuple[float, RunSummary]:
    start = time.perf_counter()
    summary = await run_sweep(config, progress=False, use_cache=use_cache)
    return time.perf_counter() - start, summary


def fresh(work: Path) -> None:
    for name in ("run", "run2", "cache"):
        shutil.rmtree(work / name, ignore_errors=True)


def responses(config: SweepConfig) -> list[dict[str, Any]]:
    path = config.run_dir / "results.jsonl"
    return [r for r in read_records(path) if r["kind"] == "response"]


def _ts(text: str) -> float:
    return datetime.fromisoformat(text).timestamp()


def count_429(recs: Sequence[dict[str, Any]]) -> int:
    return sum(o == "429" for r in recs for o in r["attempt_outcomes"])


# 1. Known limits -------------------------------------------------------------------------


async def bench_known(work: Path, quick: bool) -> None:
    rpm = 3000.0
    n = 1000 if quick else 5000
    n_short = round(n * 2 / 3)
    n_long = n - n_short
    max_tokens = 64
    long_chars = 2000  # ~500 prompt tokens
    # Tokens bind in the long phase: each long request needs two request intervals' tokens.
    cost_long = (len(f"Say {n - 1}. ") + long_chars) // 4 + max_tokens
    tps = cost_long * (rpm / 60) / 2
    tpm = tps * 60
    bound = n_short / (rpm / 60) + n_long * cost_long / tps
    write_prompts(work / "prompts.jsonl", n, long_from=n_short, long_chars=long_chars)
    fresh(work)
    concurrency = auto_concurrency()
    latency = ("--latency", "lognormal:1.0,0.5", "--per-token", "0.002", "--seed", "1")
    limits = ("--rpm", str(rpm), "--tpm", str(tpm))
    with server(*latency, *limits) as base_url:
        ep = endpoint(base_url, concurrency=concurrency, rpm=rpm, tpm=tpm, max_tokens=max_tokens)
        config = make_config(work, "run", ep)
        seconds, summary = await engine_run(config)
        server_429 = server_stats(base_url)["by_status"].get("429", 0)
    recs = responses(config)
    assert len(recs) == n and summary.errors == 0, summary.line()
    print(
        f"1. known limits: {n} requests at {rpm:.0f} req/min and {tpm:.0f} tokens/min "
        f"(tokens bind for the last {n_long}), latency lognormal median 1 s, concurrency "
        f"{concurrency}: {seconds:.1f} s against the limits' bound {bound:.1f} s = "
        f"{seconds / bound:.3f}x (target <= 1.03x); 429s: client {count_429(recs)}, server "
        f"{server_429} (target 0)"
    )


# 2 and 3. Unknown limits -----------------------------------------------------------------


def _rate_profile(recs: Sequence[dict[str, Any]], limit_rps: float) -> tuple[float, float, float]:
    """(seconds until a 5 s window of answers first held 95% of the limit, the rate of answers
    from 30 s until the last request was sent as a share of the limit, that window's length).

    Time 0 is the run's first send. The window ends with the last send so that the answers
    still arriving after it (the plan's end, not the pacing) do not count against the rate.
    """
    sent = [_ts(r["started_at"]) for r in recs]
    t0 = min(sent)
    last_send = max(sent) - t0
    # Answers as they arrived: what the server admitted, shifted by its latency.
    done = sorted(_ts(r["finished_at"]) - t0 for r in recs)
    window, first95 = 5.0, float("nan")
    j = 0
    for i, t in enumerate(done):
        while done[j] < t - window:
            j += 1
        if t >= window and (i - j + 1) / window >= 0.95 * limit_rps:
            first95 = t
            break
    span = last_send - WARMUP_S
    if span <= 0:
        raise SystemExit(f"the run sent its last request at {last_send:.1f} s: make it longer")
    steady = sum(WARMUP_S <= t < last_send for t in done)
    return first95, steady / span / limit_rps, span


async def bench_unknown(work: Path, quick: bool, *, headers: bool) -> None:
    rpm = 3000.0
    n = 6000 if quick else 9000  # the burst (a minute's budget) and 60 s at the limit
    write_prompts(work / "prompts.jsonl", n)
    fresh(work)
    concurrency = auto_concurrency()
    args = ["--latency", "lognormal:1.0,0.5", "--seed", "2", "--rpm", str(rpm)]
    if not headers:
        args.append("--no-limit-headers")
    with server(*args) as base_url:
        config = make_config(work, "run", endpoint(base_url, concurrency=concurrency))
        seconds, summary = await engine_run(config)
        stats = server_stats(base_url)
    recs = responses(config)
    assert len(recs) == n and summary.errors == 0, summary.line()
    first95, steady, span = _rate_profile(recs, rpm / 60)
    refused = stats["by_status"].get("429", 0)
    share = refused / max(1, stats["requests_total"])
    label, target = ("2. unknown limit, headers", (0.95, 0.01))
    if not headers:
        label, target = ("3. unknown limit, no headers (429 + retry-after only)", (0.85, 0.03))
    print(
        f"{label}: {n} requests against a hidden {rpm:.0f} req/min (a minute's burst), "
        f"concurrency {concurrency}: {seconds:.1f} s; answers from {WARMUP_S:.0f} s to the "
        f"last send ({span:.0f} s) at {steady:.3f}x the limit (target >= {target[0]}x); 429s "
        f"{refused} of {stats['requests_total']} requests = {share:.2%} (target < "
        f"{target[1]:.0%}; the client counted {count_429(recs)}); a 5 s window of answers "
        f"first held 95% of the limit at {first95:.1f} s (the burst)"
    )


# 4. Latency-bound ------------------------------------------------------------------------


async def bare_loop(
    base_url: str, prompts: Path, concurrency: int, latencies: list[float] | None = None
) -> float:
    """The reference: read prompts, POST them with N workers, parse the JSON. Seconds, from
    reading the file to closing the session (the engine's time also runs from its start to
    its return). ``latencies`` gets each request's seconds from its POST to its parsed answer
    (the span a record's ``latency_s`` covers)."""
    start = time.perf_counter()
    url = base_url + "/chat/completions"
    headers = {"content-type": "application/json"}
    it = iter(prompts.read_bytes().splitlines())
    connector = aiohttp.TCPConnector(limit=concurrency)
    async with aiohttp.ClientSession(connector=connector) as session:

        async def worker() -> None:
            for line in it:
                body = orjson.dumps(
                    {
                        "model": "echo",
                        "messages": [{"role": "user", "content": orjson.loads(line)["prompt"]}],
                        "max_tokens": 16,
                        "temperature": 0.0,
                    }
                )
                sent = time.perf_counter()
                async with session.post(url, data=body, headers=headers) as resp:
                    orjson.loads(await resp.read())
                if latencies is not None:
                    latencies.append(time.perf_counter() - sent)

        await asyncio.gather(*(worker() for _ in range(concurrency)))
    return time.perf_counter() - start


async def bench_latency(work: Path, quick: bool) -> None:
    n = 2000 if quick else 10_000
    rounds = 5
    write_prompts(work / "prompts.jsonl", n)
    # Per round: the bare loop, the engine, and the engine without its response cache
    # (``use_cache=False``), which shows how much of the gap the cache's lookups and stores
    # take on the engine's one core.
    ratios, ratios_uncached, cpu, waits = [], [], [], []
    with server("--latency", "fixed:0.05") as base_url:
        for rep in range(rounds):
            fresh(work)
            cpu0 = time.process_time()
            bare_latencies: list[float] = []
            bare_s = await bare_loop(base_url, work / "prompts.jsonl", 100, bare_latencies)
            cpu1 = time.process_time()
            config = make_config(work, "run", endpoint(base_url, concurrency=100))
            eng_s, summary = await engine_run(config)
            cpu2 = time.process_time()
            assert summary.written == n and summary.errors == 0
            # Send to answer, mean: at a fixed server latency the difference is the time an
            # answer waits for the client's event loop, which grows with its CPU per request.
            engine_latency = statistics.fmean(r["latency_s"] for r in responses(config))
            fresh(work)
            cpu3 = time.process_time()
            uncached_s, uncached = await engine_run(config, use_cache=False)
            cpu4 = time.process_time()
            assert uncached.written == n and uncached.errors == 0
            ratios.append(bare_s / eng_s)
            ratios_uncached.append(bare_s / uncached_s)
            cpu.append(((cpu1 - cpu0) / n * 1e6, (cpu2 - cpu1) / n * 1e6, (cpu4 - cpu3) / n * 1e6))
            waits.append((statistics.fmean(bare_latencies) * 1e3, engine_latency * 1e3))
            print(
                f"  round {rep}: bare loop {n / bare_s:.0f} req/s ({cpu[-1][0]:.0f} us CPU per "
                f"request, send to answer {waits[-1][0]:.1f} ms), engine {n / eng_s:.0f} req/s "
                f"({cpu[-1][1]:.0f} us, {waits[-1][1]:.1f} ms) -> {bare_s / eng_s:.3f}x; "
                f"engine without its cache {n / uncached_s:.0f} req/s ({cpu[-1][2]:.0f} us) -> "
                f"{bare_s / uncached_s:.3f}x"
            )
    mid = rounds // 2
    print(
        f"4. latency-bound ({n} requests, 50 ms, concurrency 100; at most {100 / 0.05:.0f} "
        f"req/s): engine / bare aiohttp loop = {sorted(ratios)[mid]:.3f}x median of {rounds} "
        f"(rounds {', '.join(f'{r:.3f}' for r in ratios)}; target >= 0.95x); CPU per request "
        f"median: bare {sorted(c[0] for c in cpu)[mid]:.0f} us, engine "
        f"{sorted(c[1] for c in cpu)[mid]:.0f} us; send to answer median of the rounds' "
        f"means: bare {sorted(w[0] for w in waits)[mid]:.1f} ms, engine "
        f"{sorted(w[1] for w in waits)[mid]:.1f} ms (the server's latency 50 ms); the engine "
        f"without its cache: {sorted(ratios_uncached)[mid]:.3f}x (rounds "
        f"{', '.join(f'{r:.3f}' for r in ratios_uncached)}), CPU "
        f"{sorted(c[2] for c in cpu)[mid]:.0f} us per request"
    )


# 5. Ceiling ------------------------------------------------------------------------------


async def bench_ceiling(work: Path, quick: bool) -> None:
    n = 2000 if quick else 10_000
    write_prompts(work / "prompts.jsonl", n)
    rates, cpu = [], []
    with server() as base_url:
        for _ in range(3):
            fresh(work)
            cpu0 = time.process_time()
            seconds, summary = await engine_run(
                make_config(work, "run", endpoint(base_url, concurrency=64))
            )
            cpu.append((time.process_time() - cpu0) / n * 1e6)
            assert summary.written == n and summary.errors == 0
            rates.append(n / seconds)
    print(
        f"5. ceiling ({n} requests, zero latency, concurrency 64, server and engine on a core "
        f"each): {sorted(rates)[1]:.0f} req/s median (rounds "
        f"{', '.join(f'{r:.0f}' for r in rates)}; floor 1,500 req/s); engine CPU "
        f"{sorted(cpu)[1]:.0f} us per request"
    )


# 6. Warm cache ---------------------------------------------------------------------------


def cotaudit(*args: str, cwd: Path) -> tuple[float, int, str, float]:
    """Run ``cotaudit ARGS`` as a user would; (seconds, peak RSS in KiB, stderr, CPU seconds
    of the process and its threads)."""
    start = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-m", "cotaudit", *args],
        cwd=cwd,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stderr is not None
    err = proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    seconds = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"cotaudit {' '.join(args)} failed ({proc.returncode}): {err}")
    return seconds, usage.ru_maxrss, err, usage.ru_utime + usage.ru_stime


async def bench_warm(work: Path, quick: bool) -> None:
    n = 10_000 if quick else 100_000
    write_prompts(work / "prompts.jsonl", n)
    fresh(work)
    with server() as base_url:
        ep = endpoint(base_url, concurrency=64)
        cold_s, cold = await engine_run(make_config(work, "run", ep))
        assert cold.written == n
        toml = write_toml(work, ep, run_dir="run2")
        warm, plan, warm_cpu, plan_cpu = [], [], [], []
        for _ in range(3):
            shutil.rmtree(work / "run2", ignore_errors=True)
            before = server_stats(base_url)["requests_total"]
            seconds, _, err, cpu = cotaudit(
                "run", str(toml), "--no-progress", "--no-preflight", cwd=work
            )
            assert server_stats(base_url)["requests_total"] == before, "a warm rerun sent"
            assert f"{n:,} from cache" in err, err
            warm.append(seconds)
            warm_cpu.append(cpu)
            seconds, _, _, cpu = cotaudit(
                "plan", str(toml), "--out", str(work / "plan.jsonl"), cwd=work
            )
            plan.append(seconds)
            plan_cpu.append(cpu)
    w, p = sorted(warm)[1], sorted(plan)[1]
    wc, pc = sorted(warm_cpu)[1], sorted(plan_cpu)[1]
    print(
        f"6. warm cache ({n} requests): cotaudit run, all from the cache, {w:.2f} s median "
        f"({', '.join(f'{s:.2f}' for s in warm)}); cotaudit plan {p:.2f} s "
        f"({', '.join(f'{s:.2f}' for s in plan)}) -> {w / p:.2f}x (target <= 3x); CPU "
        f"{wc:.2f} s / {pc:.2f} s = {wc / pc:.2f}x; 0 HTTP requests; the cold run took "
        f"{cold_s:.1f} s"
    )


# 7. Memory -------------------------------------------------------------------------------

# The resume state's own bytes: what scanning the stream leaves allocated, less what remains
# once the state is dropped (caches the scan warmed, which a run holds anyway).
_STATE_PROBE = """
import gc, sys, tracemalloc
from pathlib import Path
from runner.resume import scan_stream
tracemalloc.start()
state = scan_stream(Path(sys.argv[1]))
gc.collect()
held = tracemalloc.get_traced_memory()[0]
del state
gc.collect()
print(held - tracemalloc.get_traced_memory()[0])
"""


def bench_memory(work: Path, sizes: Sequence[int]) -> None:
    rows = []
    with server() as base_url:
        for n in sizes:
            write_prompts(work / "prompts.jsonl", n)
            fresh(work)
            toml = write_toml(work, endpoint(base_url, concurrency=64))
            run_s, run_kib, _, _ = cotaudit("run", str(toml), "--no-progress", cwd=work)
            resume_s, resume_kib, err, _ = cotaudit("run", str(toml), "--no-progress", cwd=work)
            assert f"{n:,} already done" in err, err
            probe = subprocess.run(
                [sys.executable, "-c", _STATE_PROBE, str(work / "run" / "results.jsonl")],
                cwd=REPO,
                capture_output=True,
                text=True,
                check=True,
            )
            state_bytes = int(probe.stdout.strip())
            rows.append((n, run_kib, run_s, resume_kib, resume_s, state_bytes))
            print(
                f"  {n:>9,} requests: run peak RSS {run_kib / 1024:.0f} MiB ({run_s:.0f} s); "
                f"resume (all done) {resume_kib / 1024:.0f} MiB ({resume_s:.1f} s); resume state "
                f"{state_bytes / n:.1f} bytes per request"
            )
    largest = rows[-1]
    print(
        f"7. memory: peak RSS {', '.join(f'{r[1] / 1024:.0f}' for r in rows)} MiB running "
        f"{', '.join(f'{r[0]:,}' for r in rows)} requests (target < 300 MiB at 1,000,000); "
        f"resume state {largest[5] / largest[0]:.1f} bytes per planned request at "
        f"{largest[0]:,} (target <= 32)"
    )


async def main_async(args: argparse.Namespace, work: Path) -> None:
    only = set(args.only.split(","))
    q = args.quick
    if "known" in only:
        await bench_known(work, q)
    if "headers" in only:
        await bench_unknown(work, q, headers=True)
    if "noheaders" in only:
        await bench_unknown(work, q, headers=False)
    if "latency" in only:
        await bench_latency(work, q)
    if "ceiling" in only:
        await bench_ceiling(work, q)
    if "warm" in only:
        await bench_warm(work, q)
    if "memory" in only:
        sizes = [int(s) for s in args.sizes.split(",")]
        bench_memory(work, [s // 10 for s in sizes] if q else sizes)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="known,headers,noheaders,latency,ceiling,warm,memory")
    parser.add_argument("--quick", action="store_true", help="small sizes, for a smoke test")
    parser.add_argument("--sizes", default="10000,100000,1000000", help="memory section sizes")
    parser.add_argument("--server-repo", type=Path, default=REPO, help="checkout of the server")
    parser.add_argument(
        "--keep",
        type=Path,
        default=None,
        help="work in this directory and keep it (prompts, run dirs, cache) for a look afterwards",
    )
    parser.add_argument(
        "--no-pin",
        action="store_true",
        help="let the server and the engine share every CPU instead of one CPU each",
    )
    args = parser.parse_args(argv)
    global PIN, SERVER_REPO
    PIN = not args.no_pin
    SERVER_REPO = args.server_repo.resolve()
    if PIN and len(ALL_CPUS) > 1:
        os.sched_setaffinity(0, set(ALL_CPUS[1:]))  # keep the engine off the server's core
    print(
        f"bench_engine: {datetime.now().isoformat(timespec='seconds')}, server from "
        f"{SERVER_REPO}, engine from {REPO}, {'pinned' if PIN else 'unpinned'}"
    )
    if args.keep is not None:
        args.keep.mkdir(parents=True, exist_ok=True)
        asyncio.run(main_async(args, args.keep.resolve()))
        return 0
    with tempfile.TemporaryDirectory(prefix="cotaudit-bench-") as tmp:
        asyncio.run(main_async(args, Path(tmp)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
