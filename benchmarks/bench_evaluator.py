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
    .venv/bin/python benchmarks/bench_evaluator.py --split --records 60000 [--baseline REF]

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
from dataclasses import dataclass, replace
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


def _split_cpu(stream: Path, repeats: int) -> None:
    """Run in a fresh process (with one side's code first on the path): the CPU time of the
    reading process's pass (lines, JSON, digest, routing; no auditing) and of the audits as a
    worker runs them (each group's lines parsed, validated and audited; certificates as
    lines), each the minimum of ``repeats`` passes. Prints one JSON line."""
    from evaluator.jobs import AuditJob, JobSettings, run_job
    from evaluator.pipeline import EvaluateOptions, Evaluation
    from evaluator.source import iter_raw_records
    from evaluator.stream_digest import StreamDigest

    def read() -> tuple[JobSettings, list[AuditJob]]:
        evaluation = Evaluation(EvaluateOptions(n_boot=0), stream=str(stream))
        digest = StreamDigest()
        jobs: list[AuditJob] = []
        for number, raw, record in iter_raw_records(stream):
            digest.add(raw)
            if record is not None:
                jobs.extend(evaluation.feed(record, line=number, raw=raw))
        jobs.extend(evaluation.finish())
        return evaluation.job_settings, jobs

    reading, audits, n_jobs = float("inf"), float("inf"), 0
    for _ in range(repeats):
        started = time.process_time()
        settings, jobs = read()
        reading = min(reading, time.process_time() - started)
        # As a worker receives them: the raw lines only, parsed again where audited.
        jobs = [replace(job, records=None) for job in jobs]
        n_jobs = len(jobs)
        started = time.process_time()
        for job in jobs:
            run_job(job, settings)
        audits = min(audits, time.process_time() - started)
    print(orjson.dumps({"reading": reading, "audits": audits, "jobs": n_jobs}).decode())


def bench_split(
    pack: Path, work: Path, n_records: int, repeats: int, sides: dict[str, str | None]
) -> None:
    """The CPU of the reading pass and of the audits, in process, per side (``--split``):
    no worker processes, no report; less noisy than the tree's CPU of a whole run."""
    seed = work / "split-seed"
    run(["import-evidence", str(pack), "--model", "gpt-4o", "--out", str(seed)])
    stream = work / "split-stream.jsonl"
    n = synthetic_stream(seed, stream, n_records)
    print(f"in-process split, {n:,} response records, min of {repeats} passes:")
    figures: dict[str, dict[str, float]] = {}
    for name, path in sides.items():
        env = dict(os.environ)
        if path:
            env["PYTHONPATH"] = path
        out = subprocess.run(
            [PYTHON, __file__, "--split-child", str(stream), "--split-repeats", str(repeats)],
            check=True,
            capture_output=True,
            env=env,
            cwd=tempfile.gettempdir(),
        ).stdout
        figures[name] = orjson.loads(out.splitlines()[-1])
        f = figures[name]
        print(
            f"  {name:<14} reading {f['reading']:6.2f} s  audits {f['audits']:6.2f} s CPU "
            f"({1e6 * f['audits'] / n:.0f} us per response record, {f['jobs']:,.0f} audits)  "
            f"({_load()})",
            flush=True,
        )
    if len(sides) == 2:
        base, now = list(sides)
        for what in ("reading", "audits"):
            print(f"  {what}: {figures[base][what] / figures[now][what]:.2f}x less CPU than {base}")


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
    parser.add_argument(
        "--split",
        action="store_true",
        help="only the in-process CPU of the reading pass and of the audits (--records lines)",
    )
    parser.add_argument("--split-repeats", type=int, default=3, help=argparse.SUPPRESS)
    parser.add_argument("--split-child", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.split_child:
        _split_cpu(args.split_child, args.split_repeats)
        return 0
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
        if args.split:
            bench_split(args.pack, work, args.records, args.split_repeats, sides)
            return 0
        if not args.skip_pack:
            bench_pack(args.pack, work, sides)
        if not args.skip_stream:
            bench_stream(args.pack, work, args.records, args.n_boot, sides)
    return 0


if __name__ == "__main__":
    sys.exit(main())
