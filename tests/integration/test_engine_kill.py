"""A runner process killed with SIGKILL at random points, then resumed: exactly one record per
request and a parseable stream. Also Ctrl-C (SIGINT): exit 130, then a clean resume."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import orjson
import pytest

from cotaudit.schema import read_records
from runner.resume import torn_tail_bytes
from runner.server.latency import LatencySpec
from runner.server.lifecycle import ServerThread
from runner.server.settings import ServerConfig

REPO = Path(__file__).resolve().parents[2]
PROMPTS = 2500


def write_config(tmp_path: Path, base_url: str) -> Path:
    with (tmp_path / "prompts.jsonl").open("wb") as f:
        for i in range(PROMPTS):
            f.write(orjson.dumps({"id": f"q{i:05d}", "prompt": f"Say {i}."}) + b"\n")
    path = tmp_path / "sweep.toml"
    path.write_text(
        f"""\
run_dir = "run"
cache_dir = "cache"
[task]
kind = "prompts"
path = "prompts.jsonl"
[[endpoints]]
name = "local"
provider = "local"
model = "echo"
base_url = "{base_url}"
requests_per_minute = 60000
tokens_per_minute = 100000000
max_concurrency = 16
timeout_s = 10
max_tokens = 16
"""
    )
    return path


def start_runner(config: Path) -> subprocess.Popen[bytes]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.Popen(
        [sys.executable, "-m", "cotaudit", "run", str(config), "--no-progress", "--no-preflight"],
        cwd=REPO,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )


def wait_for(predicate: Callable[[], bool], timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.01)  # polling a real subprocess: there is no clock to inject
    return False


def response_ids(results: Path) -> list[str]:
    return [r["request_id"] for r in read_records(results) if r["kind"] == "response"]


@pytest.mark.slow
def test_sigkill_at_random_points_then_resume_gives_exactly_one_record_each(
    tmp_path: Path, make_server: Callable[[ServerConfig], ServerThread]
) -> None:
    server = make_server(ServerConfig(latency=LatencySpec("fixed", 0.004)))
    config = write_config(tmp_path, server.base_url)
    results = tmp_path / "run" / "results.jsonl"
    rng = random.Random(20261130)
    kills = 0
    for _ in range(8):
        before = len(response_ids(results)) if results.exists() else 0
        if before >= PROMPTS:
            break
        proc = start_runner(config)
        # Kill at a random point measured in progress, not time, so a fast machine cannot
        # finish the run before the kills land: after 1..150 new records.
        target = before + rng.randint(1, 150)
        grew = wait_for(
            lambda t=target: results.exists() and len(response_ids(results)) >= t,
            timeout_s=30,
        )
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
            kills += 1
        proc.wait(timeout=30)
        assert proc.stderr is not None
        proc.stderr.close()
        assert grew or proc.returncode == 0
        ids = response_ids(results)  # parseable despite the kill (torn tail ignored)
        assert len(ids) == len(set(ids)), "a kill produced a duplicate record"
    assert kills >= 5, f"only {kills} kills landed mid-run; make the run longer"
    final = start_runner(config)
    _, err = final.communicate(timeout=120)
    assert final.returncode == 0, err.decode()
    assert torn_tail_bytes(results) == 0
    ids = response_ids(results)
    assert len(ids) == len(set(ids)) == PROMPTS
    problems = [r["problem_id"] for r in read_records(results) if r["kind"] == "problem"]
    assert len(problems) == len(set(problems)) == PROMPTS


@pytest.mark.slow
def test_sigint_exits_130_and_the_run_resumes(
    tmp_path: Path, make_server: Callable[[ServerConfig], ServerThread]
) -> None:
    server = make_server(ServerConfig(latency=LatencySpec("fixed", 0.02)))
    config = write_config(tmp_path, server.base_url)
    results = tmp_path / "run" / "results.jsonl"
    proc = start_runner(config)
    assert wait_for(lambda: results.exists() and len(response_ids(results)) > 20, timeout_s=30)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 130, err.decode()
    assert b"resume" in err
    assert torn_tail_bytes(results) == 0  # a graceful stop leaves whole lines only
    partial = response_ids(results)
    assert 20 < len(partial) < PROMPTS
    final = start_runner(config)
    _, err = final.communicate(timeout=120)
    assert final.returncode == 0, err.decode()
    ids = response_ids(results)
    assert len(ids) == len(set(ids)) == PROMPTS


TRUTH_PROBLEMS = 12
TRUTH_CONFIG = """\
run_dir = "run"
cache_dir = "cache"
[task]
kind = "prontoqa"
source = "generate"
n = {n}
seed = 0
samples = 1
[[endpoints]]
name = "faithful"
provider = "local"
model = "faithful"
base_url = "{url}"
requests_per_minute = 600000
tokens_per_minute = 1e10
max_concurrency = 2
[[endpoints]]
name = "shortcut"
provider = "local"
model = "shortcut:p=0.5"
base_url = "{url}"
requests_per_minute = 600000
tokens_per_minute = 1e10
max_concurrency = 2
"""


def test_truth_records_stay_one_per_problem_and_endpoint_across_kills(
    tmp_path: Path, make_server: Callable[[ServerConfig], ServerThread]
) -> None:
    # Slow answers, so each run is killed part-way through its problems.
    server = make_server(ServerConfig(latency=LatencySpec("fixed", 0.01)))
    config = tmp_path / "audit.toml"
    config.write_text(TRUTH_CONFIG.format(n=TRUTH_PROBLEMS, url=server.base_url))
    stream = tmp_path / "run" / "results.jsonl"
    sizes = []
    for kill in range(4):
        proc = start_runner(config)
        deadline = time.monotonic() + 60
        start = stream.stat().st_size if stream.exists() else 0
        while time.monotonic() < deadline and proc.poll() is None:
            if stream.exists() and stream.stat().st_size > start + 4000 * (kill + 1):
                break
            time.sleep(0.02)
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=30)
        sizes.append(stream.stat().st_size)
    final = start_runner(config)
    _, err = final.communicate(timeout=120)
    assert final.returncode == 0, err.decode()
    assert sizes == sorted(sizes) and sizes[0] > 0
    records = list(read_records(stream))
    truth = [(r["endpoint"], r["problem_id"]) for r in records if r["kind"] == "truth"]
    problems = {r["problem_id"] for r in records if r["kind"] == "problem"}
    assert len(problems) == TRUTH_PROBLEMS
    assert len(truth) == len(set(truth)) == TRUTH_PROBLEMS * 2  # problems x local endpoints
    ids = [r["request_id"] for r in records if r["kind"] == "response"]
    assert len(ids) == len(set(ids))
