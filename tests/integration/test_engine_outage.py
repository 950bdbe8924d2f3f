"""An endpoint that goes down mid-run, over loopback: its requests wait instead of becoming
error records, one probe at a time checks on it, and past its outage budget it stops with a
message, leaving a run that resumes. Clock and sleep are injected: nothing sleeps."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from cotaudit.schema import read_records
from runner.config import SweepConfig, config_from_mapping
from runner.engine import run_sweep
from runner.retry import RetryPolicy
from runner.server.faults import FaultKind, FaultSpec
from runner.server.lifecycle import running_server
from runner.server.settings import ServerConfig
from tests.fake_time import FakeTime

NO_WAIT = RetryPolicy(max_attempts=30, base_delay_s=0.0, max_delay_s=0.0, time_budget_s=60.0)


def make_config(tmp_path: Path, base_url: str, *, prompts: int, budget_s: float) -> SweepConfig:
    with (tmp_path / "prompts.jsonl").open("wb") as f:
        for i in range(prompts):
            f.write(orjson.dumps({"id": f"q{i}", "prompt": f"Say {i}."}) + b"\n")
    return config_from_mapping(
        {
            "run_dir": "run",
            "cache_dir": "cache",
            "task": {"kind": "prompts", "path": "prompts.jsonl"},
            "endpoints": [
                {
                    "name": "flaky",
                    "provider": "local",
                    "model": "echo",
                    "base_url": base_url,
                    "requests_per_minute": 1e9,
                    "tokens_per_minute": 1e12,
                    "max_concurrency": 1,
                    "outage_budget_s": budget_s,
                }
            ],
        },
        config_dir=tmp_path,
    )


def responses(config: SweepConfig) -> list[dict[str, Any]]:
    return [r for r in read_records(config.run_dir / "results.jsonl") if r["kind"] == "response"]


async def test_a_down_endpoint_is_paused_probed_and_resumed_without_losing_a_request(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # 12 answers of 503: ten make the endpoint down, the first two probes get the rest.
    spec = FaultSpec(script=(FaultKind.UNAVAILABLE,) * 12)
    t = FakeTime(1000.0)
    async with running_server(ServerConfig(faults=spec)) as server:
        config = make_config(tmp_path, server.base_url, prompts=3, budget_s=1800)
        summary = await run_sweep(
            config, progress=False, retry_policy=NO_WAIT, clock=t.clock, sleep=t.sleep
        )
    recs = responses(config)
    assert len(recs) == 3 and all(r["error"] is None for r in recs)
    first = next(r for r in recs if r["problem_id"] == "q0")
    assert first["attempt_outcomes"] == ["503"] * 10 + ["ok"]  # waited, not spent
    assert summary.probes == 3 and summary.errors == 0 and not summary.stopped_endpoints
    assert [s for s in t.sleeps if s] == [1.0, 2.0, 4.0]  # the probes' doubling intervals
    err = capsys.readouterr().err
    assert "endpoint 'flaky' is down (10 failures in a row" in err
    assert "endpoint 'flaky' is back after 7 s" in err


async def test_past_the_outage_budget_the_endpoint_stops_and_a_rerun_completes_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    down = FaultSpec(script=(FaultKind.RESET,) * 1000)  # every connection reset
    t = FakeTime(1000.0)
    async with running_server(ServerConfig(faults=down)) as server:
        config = make_config(tmp_path, server.base_url, prompts=4, budget_s=20)
        summary = await run_sweep(
            config, progress=False, retry_policy=NO_WAIT, clock=t.clock, sleep=t.sleep
        )
        assert summary.stopped_endpoints == ("flaky",)
        assert summary.written == 0 and summary.pending == 4 and summary.errors == 0
        assert [s for s in t.sleeps if s] == [1.0, 2.0, 4.0, 8.0, 5.0]  # 20 s in all
        err = capsys.readouterr().err
        assert "endpoint 'flaky' was down for 20 s in all" in err
        assert "rerun the same command to resume" in err
        server.configure(faults=FaultSpec())  # the server is back
        again = await run_sweep(config, progress=False, retry_policy=NO_WAIT)
    assert again.written == 4 and again.skipped == 0 and not again.stopped_endpoints
    ids = [r["request_id"] for r in responses(config)]
    assert len(ids) == len(set(ids)) == 4


def test_the_cli_exits_1_when_an_endpoint_was_stopped(tmp_path: Path) -> None:
    import socket
    import subprocess
    import sys

    with socket.socket() as sock:  # nobody listens here: every connection is refused
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    (tmp_path / "prompts.jsonl").write_text('{"id": "q0", "prompt": "Say 0."}\n')
    (tmp_path / "sweep.toml").write_text(
        f"""run_dir = "run"
cache_dir = "cache"
[task]
kind = "prompts"
path = "prompts.jsonl"
[retry]
base_delay_s = 0
max_delay_s = 0
max_attempts = 30
[[endpoints]]
name = "gone"
provider = "local"
model = "echo"
base_url = "http://127.0.0.1:{port}/v1"
max_concurrency = 1
outage_budget_s = 0.05
"""
    )
    result = subprocess.run(
        [sys.executable, "-m", "cotaudit", "run", "sweep.toml", "--no-progress", "--no-preflight"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 1, result.stderr
    assert "endpoint 'gone' is down" in result.stderr
    assert "1 pending, " in result.stderr and "rerun the same command to resume" in result.stderr
