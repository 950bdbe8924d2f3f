"""A batch-mode run killed between submitting its batches and downloading them, then resumed:
the same batches are polled, nothing is submitted twice, every result is written once. Also
the two narrower windows: stopped while writing a batch's results, and inside the create call
(the provider has the batch, the run directory does not have its id)."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import orjson
import pytest

from runner.batch.store import BatchStore
from runner.engine import run_sweep
from runner.server.lifecycle import ServerThread
from runner.server.settings import ServerConfig
from tests.integration.test_batch_mode import (
    PROMPTS,
    PROVIDERS,
    SPEC,
    config_for,
    fake_sleep,
    responses,
    server_batches,
    write_prompts,
)
from tests.runner.server.helpers import FakeClock

REPO = Path(__file__).resolve().parents[2]


def drop_responses(results: Path) -> None:
    lines = results.read_bytes().splitlines(keepends=True)
    results.write_bytes(b"".join(line for line in lines if b'"response"' not in line))


def write_config(tmp_path: Path, provider: str, base_url: str) -> Path:
    write_prompts(tmp_path)
    path = tmp_path / "sweep.toml"
    path.write_text(
        f"""\
run_dir = "run"
cache_dir = "cache"
[task]
kind = "prompts"
path = "prompts.jsonl"
[[endpoints]]
name = "ep"
provider = "{provider}"
model = "echo"
base_url = "{base_url}"
max_tokens = 64
mode = "batch"
batch_poll_s = 0.05
batch_max_requests = 12
"""
    )
    return path


def runner(config: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "cotaudit", "run", str(config), "--no-progress", "--no-preflight"],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )


def wait_for(predicate: Callable[[], bool], timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.02)  # polling a real subprocess: there is no clock to inject
    return False


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_sigkill_between_submit_and_download_then_resume(
    tmp_path: Path, make_server: Callable[[ServerConfig], ServerThread], provider: str
) -> None:
    clock = FakeClock()  # frozen: the batches cannot end until the test moves it
    server = make_server(ServerConfig(clock=clock, batches=SPEC))
    config = write_config(tmp_path, provider, server.base_url)
    store = BatchStore(tmp_path / "run")

    def all_submitted() -> bool:
        batches = store.load()
        return len(batches) == 3 and all(b.state == "submitted" for b in batches)

    first = runner(config)
    try:
        assert await asyncio.to_thread(wait_for, all_submitted, 60.0), "batches not submitted"
        first.send_signal(signal.SIGKILL)
        first.wait(timeout=30)
    finally:
        if first.poll() is None:
            first.kill()
            first.wait(timeout=30)
        assert first.stderr is not None
        first.stderr.close()
    assert first.returncode == -signal.SIGKILL
    submitted = {b.remote_id for b in store.load()}
    assert len(await server_batches(server, provider)) == 3
    results = tmp_path / "run" / "results.jsonl"
    assert not results.exists() or b'"response"' not in results.read_bytes()

    clock.advance(60.0)  # the provider finishes them meanwhile
    second = runner(config)
    _, err = await asyncio.to_thread(second.communicate, timeout=120)
    assert second.returncode == 0, err.decode()
    assert b" submitted" not in err  # the summary would count any batch sent again
    batches = await server_batches(server, provider)
    assert {b["id"] for b in batches} == submitted
    ids = Counter(
        r["request_id"]
        for r in map(orjson.loads, results.read_bytes().splitlines())
        if r["kind"] == "response"
    )
    assert len(ids) == PROMPTS and set(ids.values()) == {1}
    assert [b.state for b in store.load()] == ["done"] * 3


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a_stop_while_writing_results_writes_the_rest_once(
    tmp_path: Path, make_server: Callable[[ServerConfig], ServerThread], provider: str
) -> None:
    clock = FakeClock()
    server = make_server(ServerConfig(clock=clock, batches=SPEC))
    config = config_for(tmp_path, "run", provider, server.base_url, batch_max_requests=100)
    await run_sweep(config, progress=False, sleep=fake_sleep(clock))
    # As a crash would leave it: 10 of the batch's records written, the batch not "done".
    results = config.run_dir / "results.jsonl"
    lines = results.read_bytes().splitlines(keepends=True)
    kept = [line for line in lines if b'"response"' not in line]
    written = [line for line in lines if b'"response"' in line][:10]
    results.write_bytes(b"".join(kept + written))
    store = BatchStore(config.run_dir)
    [batch] = store.load()
    batch.state = "ended"
    store.save(batch)
    (tmp_path / "cache").rename(tmp_path / "old-cache")  # the cache must not hide a re-send

    summary = await run_sweep(config, progress=False, sleep=fake_sleep(clock))
    assert summary.batches == 0 and summary.written == PROMPTS - 10
    ids = Counter(r["request_id"] for r in responses(config))
    assert len(ids) == PROMPTS and set(ids.values()) == {1}


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a_batch_cut_off_in_its_create_call_is_found_not_sent_again(
    tmp_path: Path, make_server: Callable[[ServerConfig], ServerThread], provider: str
) -> None:
    clock = FakeClock()
    server = make_server(ServerConfig(clock=clock, batches=SPEC))
    config = config_for(tmp_path, "run", provider, server.base_url, batch_max_requests=100)
    await run_sweep(config, progress=False, sleep=fake_sleep(clock))
    # As a crash inside the create call leaves it: the provider has the batch, the file has
    # state "submitting" and no id; no response is written.
    results = config.run_dir / "results.jsonl"
    results.write_bytes(
        b"".join(
            line for line in results.read_bytes().splitlines(True) if b'"response"' not in line
        )
    )
    store = BatchStore(config.run_dir)
    [batch] = store.load()
    remote = batch.remote_id
    batch.state, batch.remote_id, batch.status, batch.notes = "submitting", None, None, []
    store.save(batch)
    (tmp_path / "cache").rename(tmp_path / "old-cache")

    summary = await run_sweep(config, progress=False, sleep=fake_sleep(clock))
    assert summary.batches == 0 and summary.written == PROMPTS
    [found] = store.load()
    assert found.remote_id == remote and found.state == "done"
    assert len(await server_batches(server, provider)) == 1

    # A create call that never reached the provider (a fresh server has no batch): sent now.
    other = make_server(ServerConfig(clock=clock, batches=SPEC))
    results.write_bytes(
        b"".join(
            line for line in results.read_bytes().splitlines(True) if b'"response"' not in line
        )
    )
    found.state, found.remote_id, found.status, found.notes = "submitting", None, None, []
    store.save(found)
    (tmp_path / "cache").rename(tmp_path / "older-cache")
    summary = await run_sweep(
        config, progress=False, sleep=fake_sleep(clock), base_urls={"ep": other.base_url}
    )
    assert summary.batches == 1 and summary.written == PROMPTS
    assert len(await server_batches(other, provider)) == 1


async def test_two_anthropic_batches_that_could_be_the_cut_off_one_stop_the_run(
    tmp_path: Path, make_server: Callable[[ServerConfig], ServerThread]
) -> None:
    import aiohttp

    from cotaudit.errors import UsageError

    clock = FakeClock()
    server = make_server(ServerConfig(clock=clock, batches=SPEC))
    config = config_for(tmp_path, "run", "anthropic", server.base_url, batch_max_requests=100)
    await run_sweep(config, progress=False, sleep=fake_sleep(clock))
    # Another batch of as many requests, created meanwhile by someone else with the same key.
    requests = [
        {"custom_id": f"other{i}", "params": {"model": "echo", "max_tokens": 8,
         "messages": [{"role": "user", "content": "hi"}]}}
        for i in range(PROMPTS)
    ]  # fmt: skip
    async with (
        aiohttp.ClientSession() as session,
        session.post(
            f"{server.base_url}/messages/batches",
            json={"requests": requests},
            headers={"anthropic-version": "2023-06-01"},
        ) as resp,
    ):
        assert resp.status == 200
    drop_responses(config.run_dir / "results.jsonl")
    store = BatchStore(config.run_dir)
    [batch] = store.load()
    batch.state, batch.remote_id, batch.status, batch.notes = "submitting", None, None, []
    store.save(batch)
    with pytest.raises(UsageError, match="2 batches at the provider could be it"):
        await run_sweep(config, progress=False, sleep=fake_sleep(clock))
    assert len(await server_batches(server, "anthropic")) == 2  # nothing sent
