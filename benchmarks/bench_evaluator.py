"""Evaluator speed and memory.

1. The GPT-4o evidence pack: ``import-evidence`` + ``evaluate`` (B = 10,000 bootstrap resamples
   for every row, certificates, report, figures) in one fresh process, as a user runs it;
   target < 10 s.
2. Streaming: a synthetic stream of N response records (default 1,000,000) made by replicating
   the pack's 50 problems under new problem ids (every record a distinct JSON line, so the
   reader allocates every text), evaluated with B = 10,000 resamples (the default; ``--n-boot``
   to change) in a fresh process whose peak RSS is measured; target < 1.5 GB.

Run from the repository root::

    /work/venv/bin/python benchmarks/bench_evaluator.py [--records 1000000] [--n-boot 10000]
        [--pack PATH] [--skip-stream]

It needs ``../shared/data/grounding-audit-gpt4o`` (or ``--pack``). Prints each figure and the
ratio to its target.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import orjson

ROOT = Path(__file__).resolve().parents[1]
PACK = ROOT / ".." / "shared" / "data" / "grounding-audit-gpt4o"
PYTHON = sys.executable


CPU_SECONDS: list[float] = []  # CPU time (user + sys) of each _run, in order


def _run(args: list[str]) -> tuple[float, int]:
    """Run ``python -m cotaudit.cli ARGS`` in a fresh process: (wall seconds, peak RSS bytes).

    ``os.wait4`` gives that child's own resource usage (``RUSAGE_CHILDREN`` would report the
    largest child so far). Its CPU time is appended to ``CPU_SECONDS``: on a shared machine
    it is the figure that does not depend on what else is running.
    """
    started = time.perf_counter()
    child = subprocess.Popen([PYTHON, "-m", "cotaudit.cli", *args], stdout=subprocess.DEVNULL)
    _, status, usage = os.wait4(child.pid, 0)
    child.returncode = os.waitstatus_to_exitcode(status)
    wall = time.perf_counter() - started
    if child.returncode != 0:
        raise SystemExit(f"cotaudit {' '.join(args)} exited {child.returncode}")
    CPU_SECONDS.append(usage.ru_utime + usage.ru_stime)
    return wall, usage.ru_maxrss * 1024  # ru_maxrss is in KiB on Linux


def bench_pack(pack: Path, work: Path) -> None:
    run = work / "pack-run"
    t_import, _ = _run(["import-evidence", str(pack), "--model", "gpt-4o", "--out", str(run)])
    t_eval, rss = _run(["evaluate", str(run), "--n-boot", "10000"])
    total = t_import + t_eval
    print(
        f"pack: import {t_import:.2f} s + evaluate {t_eval:.2f} s = {total:.2f} s wall "
        f"(target < 10 s: {total / 10:.2f} of budget), {sum(CPU_SECONDS[-2:]):.2f} s CPU; "
        f"evaluate peak RSS {rss / 2**20:.0f} MiB"
    )
    report = orjson.loads((run / "eval" / "report.json").read_bytes())["models"]["gpt-4o"]
    row = report["rows"]["A_consistent_full"]
    print(
        f"      A consistent full F1 {row['f1']:.3f} CI {row['ci']}, "
        f"{report['certificates']['total']} certificates"
    )


def synthetic_stream(pack_run: Path, out: Path, n_records: int) -> int:
    """Replicate the imported pack's records under new ids until ``n_records`` responses."""
    problems: list[bytes] = []
    groups: list[list[dict[str, object]]] = []
    by_problem: dict[str, list[dict[str, object]]] = {}
    for line in (pack_run / "results.jsonl").read_bytes().splitlines():
        record = orjson.loads(line)
        if record["kind"] == "problem":
            problems.append(line)
            by_problem[record["problem_id"]] = []
            groups.append(by_problem[record["problem_id"]])
        else:
            by_problem[record["problem_id"]].append(record)
    written = 0
    copy = 0
    with out.open("wb") as handle:
        while written < n_records:
            for line, group in zip(problems, groups, strict=True):
                problem = orjson.loads(line)
                pid = f"{problem['problem_id']}-r{copy}"
                problem["problem_id"] = pid
                handle.write(orjson.dumps(problem) + b"\n")
                for record in group:
                    clone = dict(record, problem_id=pid)
                    if "request_id" in clone:
                        clone["request_id"] = str(clone["request_id"]).replace(
                            f"/{record['problem_id']}/", f"/{pid}/"
                        )
                        written += 1
                    handle.write(orjson.dumps(clone) + b"\n")
                if written >= n_records:
                    break
            copy += 1
    return written


def bench_stream(pack: Path, work: Path, n_records: int, n_boot: int) -> None:
    run = work / "stream-run"
    seed = work / "seed-run"
    _run(["import-evidence", str(pack), "--model", "gpt-4o", "--out", str(seed)])
    run.mkdir()
    started = time.perf_counter()
    n = synthetic_stream(seed, run / "results.jsonl", n_records)
    size = (run / "results.jsonl").stat().st_size
    print(
        f"stream: {n:,} response records, {size / 2**20:.0f} MiB, "
        f"written in {time.perf_counter() - started:.1f} s"
    )
    wall, rss = _run(["evaluate", str(run), "--n-boot", str(n_boot), "--no-figures"])
    print(
        f"stream: evaluated (B = {n_boot:,}) in {wall:.1f} s wall, {CPU_SECONDS[-1]:.1f} s CPU "
        f"({n / CPU_SECONDS[-1]:,.0f} records per CPU second); peak RSS "
        f"{rss / 2**30:.2f} GiB (target < 1.5 GB: {rss / 1.5e9:.2f} of budget)"
    )
    wall, rss = _run(["verify", str(run)])
    print(
        f"stream: verified in {wall:.1f} s wall, {CPU_SECONDS[-1]:.1f} s CPU; "
        f"peak RSS {rss / 2**30:.2f} GiB"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument(
        "--n-boot", type=int, default=10_000, help="bootstrap resamples of the stream run"
    )
    parser.add_argument("--pack", type=Path, default=PACK)
    parser.add_argument("--skip-stream", action="store_true")
    args = parser.parse_args()
    if not args.pack.is_dir():
        print(f"evidence pack not found at {args.pack}; pass --pack", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as tmp:
        bench_pack(args.pack, Path(tmp))
        if not args.skip_stream:
            bench_stream(args.pack, Path(tmp), args.records, args.n_boot)
    return 0


if __name__ == "__main__":
    sys.exit(main())
