"""Evaluator speed and memory, today's code beside a baseline's, in one run.

1. The GPT-4o evidence pack: ``import-evidence`` + ``evaluate`` (B = 10,000 bootstrap resamples
   for every row, certificates, report, figures) in one fresh process, as a user runs it;
   target < 10 s.
2. Streaming: a synthetic stream of N response records (default 1,000,000) made by replicating
   the pack's 50 problems under new problem ids (every record a distinct JSON line, so the
   reader allocates every text), then ``evaluate`` (B = 10,000, the default; ``--n-boot`` to
   change) and ``verify``, each in a fresh process; targets (issue 13): each at most 60 s and
   under 1 GiB.

Every step runs once with this checkout and once with the baseline (``--baseline REF``,
default ``main``: ``git archive REF`` unpacked into a temporary directory and put first on
``PYTHONPATH``), alternating, on the same stream: the figures and their ratio come from the
same machine in the same minutes. Each process tree (the command, its worker processes) is
sampled every 50 ms: peak RSS of the command and peak summed PSS of the tree (memory shared
between processes counted once); CPU is the tree's user + system time (``os.wait4``: it
includes the workers, which the command waits for); the reading process's own share is read
from ``/proc`` at the last sample. On a machine shared with other jobs wall
time moves with their load; CPU time much less.

Run from the repository root::

    .venv/bin/python benchmarks/bench_evaluator.py [--records 1000000] [--n-boot 10000]
        [--pack PATH] [--skip-stream | --skip-pack] [--baseline REF | --no-baseline]
        [--keep DIR]

It needs ``../shared/data/grounding-audit-gpt4o`` (or ``--pack``). Parsing is mostly cache
hits in this stream (its texts repeat every 50 problems); a stream of distinct texts costs
more per record (docs/benchmarks: README, "Evaluator").
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import orjson

ROOT = Path(__file__).resolve().parents[1]
PACK = ROOT / ".." / "shared" / "data" / "grounding-audit-gpt4o"
PYTHON = sys.executable
SAMPLE_S = 0.05
GIB = 2**30
# The figures this benchmark had before issue 13's work (benchmarks/README.md row V2 on main,
# 2026-11-30), printed beside today's for reference; --baseline measures them again.
RECORDED_BEFORE = "evaluate 255 s wall, 0.84 GiB; verify 267 s wall, 1.09 GiB"


@dataclass(frozen=True, slots=True)
class Measured:
    wall: float
    cpu: float  # user + system of the process and the children it waited for
    rss: int  # peak RSS of the command itself (bytes)
    pss: int  # peak summed PSS of the command and its descendants (bytes)
    reader_cpu: float  # user + system of the command alone (the reading process), last sample


def _children(pid: int) -> list[int]:
    try:
        text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    except OSError:
        return []
    return [int(c) for c in text.split()]


def _tree(pid: int) -> list[int]:
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(_children(p))
    return out


def _pss(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


TICKS = os.sysconf("SC_CLK_TCK")


def _own_cpu(pid: int) -> float | None:
    """User + system seconds of ``pid`` alone (not its children), from /proc."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rpartition(")")[2].split()  # after the command name, which may hold spaces
    return (int(fields[11]) + int(fields[12])) / TICKS


def run(args: list[str], pythonpath: str | None = None) -> Measured:
    """Run ``python -m cotaudit.cli ARGS`` in a fresh process and measure it (from a neutral
    directory: ``-m`` puts the working directory first on the import path)."""
    env = dict(os.environ)
    if pythonpath:
        env["PYTHONPATH"] = pythonpath
    started = time.perf_counter()
    child = subprocess.Popen(
        [PYTHON, "-m", "cotaudit.cli", *args],
        stdout=subprocess.DEVNULL,
        env=env,
        cwd=tempfile.gettempdir(),
    )
    peak = [0]
    reader = [0.0]
    done = threading.Event()

    def sample() -> None:
        while not done.wait(SAMPLE_S):
            peak[0] = max(peak[0], sum(_pss(p) for p in _tree(child.pid)))
            own = _own_cpu(child.pid)
            if own is not None:
                reader[0] = own

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    _, status, usage = os.wait4(child.pid, 0)
    done.set()
    sampler.join()
    wall = time.perf_counter() - started
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        raise SystemExit(f"cotaudit {' '.join(args)} exited {code}")
    cpu = usage.ru_utime + usage.ru_stime
    return Measured(wall, cpu, usage.ru_maxrss * 1024, peak[0], reader[0])


def baseline_tree(ref: str, into: Path) -> Path:
    """``git archive REF`` unpacked into ``into`` (the baseline's code)."""
    into.mkdir(parents=True)
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", ref], check=True, capture_output=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into


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


def _load() -> str:
    one, five, _ = os.getloadavg()
    return f"load {one:.1f}/{five:.1f}"


def _line(label: str, m: Measured, target: str = "") -> str:
    return (
        f"  {label:<34} {m.wall:7.1f} s wall {m.cpu:7.1f} s CPU "
        f"(reading process {m.reader_cpu:5.1f} s)  "
        f"RSS {m.rss / GIB:5.2f} GiB  tree PSS {m.pss / GIB:5.2f} GiB  {target}  ({_load()})"
    )


def bench_pack(pack: Path, work: Path, sides: dict[str, str | None]) -> None:
    print("GPT-4o pack: import-evidence + evaluate (B = 10,000, figures)")
    for name, path in sides.items():
        run_dir = work / f"pack-{name}"
        imported = run(
            ["import-evidence", str(pack), "--model", "gpt-4o", "--out", str(run_dir)], path
        )
        evaluated = run(["evaluate", str(run_dir), "--n-boot", "10000"], path)
        total = imported.wall + evaluated.wall
        print(
            f"  {name:<10} import {imported.wall:.2f} s + evaluate {evaluated.wall:.2f} s = "
            f"{total:.2f} s wall (target < 10 s), evaluate RSS {evaluated.rss / 2**20:.0f} MiB"
        )
        report = orjson.loads((run_dir / "eval" / "report.json").read_bytes())
        row = report["models"]["gpt-4o"]["rows"]["A_consistent_full"]
        print(f"             A consistent full F1 {row['f1']:.3f} CI {row['ci']}")


def bench_stream(
    pack: Path, work: Path, n_records: int, n_boot: int, sides: dict[str, str | None]
) -> None:
    seed = work / "seed-run"
    run(["import-evidence", str(pack), "--model", "gpt-4o", "--out", str(seed)])
    stream_dir = work / "stream-run"
    stream_dir.mkdir()
    started = time.perf_counter()
    n = synthetic_stream(seed, stream_dir / "results.jsonl", n_records)
    size = (stream_dir / "results.jsonl").stat().st_size
    print(
        f"stream: {n:,} response records, {size / 2**20:,.0f} MiB, written in "
        f"{time.perf_counter() - started:.1f} s"
    )
    evaluated: dict[str, Measured] = {}
    verified: dict[str, Measured] = {}
    for name, path in sides.items():  # evaluate: baseline, then this checkout
        out = work / f"eval-{name}"
        evaluated[name] = run(
            [
                "evaluate",
                str(stream_dir),
                "--out",
                str(out),
                "--n-boot",
                str(n_boot),
                "--no-figures",
            ],
            path,
        )
        print(_line(f"evaluate ({name})", evaluated[name], "target 60 s, 1 GiB"), flush=True)
    for name, path in reversed(list(sides.items())):  # verify: the other way round
        out = work / f"eval-{name}"
        verified[name] = run(["verify", str(stream_dir), "--eval-dir", str(out)], path)
        print(_line(f"verify ({name})", verified[name], "target 60 s, 1 GiB"), flush=True)
    print(f"  recorded before (README V2, 2026-11-30): {RECORDED_BEFORE}")
    if len(sides) == 2:
        base, now = list(sides)
        for what, figures in (("evaluate", evaluated), ("verify", verified)):
            print(
                f"  {what}: {figures[base].wall / figures[now].wall:.2f}x faster wall, "
                f"{figures[base].cpu / figures[now].cpu:.2f}x less CPU than {base}"
            )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument(
        "--n-boot", type=int, default=10_000, help="bootstrap resamples of the stream run"
    )
    parser.add_argument("--pack", type=Path, default=PACK)
    parser.add_argument("--skip-stream", action="store_true")
    parser.add_argument("--skip-pack", action="store_true", help="the stream only")
    parser.add_argument("--baseline", default="main", help="git ref measured beside (main)")
    parser.add_argument("--no-baseline", action="store_true", help="this checkout only")
    parser.add_argument("--keep", type=Path, help="work in this directory and keep it")
    args = parser.parse_args()
    if not args.pack.is_dir():
        print(f"evidence pack not found at {args.pack}; pass --pack", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="bench-evaluator-") as tmp:
        work = args.keep or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        sides: dict[str, str | None] = {}
        if not args.no_baseline:
            sides[args.baseline] = str(baseline_tree(args.baseline, work / "baseline-src"))
        sides["this checkout"] = None
        if not args.skip_pack:
            bench_pack(args.pack, work, sides)
        if not args.skip_stream:
            bench_stream(args.pack, work, args.records, args.n_boot, sides)
    return 0


if __name__ == "__main__":
    sys.exit(main())
