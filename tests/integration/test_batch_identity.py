"""A batch looked for at the provider after its create call failed is this run's own, never
another run's: batch local ids repeat across run directories (every run's first batch is
``ep-00001``), so each batch carries a nonce (OpenAI: in its metadata, with the input file it
was made from; Anthropic: in its custom ids, checked against the found batch's results).
Also: state files written before nonces still resume."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest

from runner.batch.store import BatchStore
from runner.config import config_from_mapping
from runner.engine import run_sweep
from runner.server.batch_jobs import BatchSpec
from runner.server.faults import FaultKind
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
)
from tests.runner.server.helpers import FakeClock


def sweep_saying(tmp_path: Path, run: str, provider: str, base_url: str, word: str) -> Any:
    """A run whose prompts differ from another run's by ``word`` only: the same endpoint
    name and prompt ids, so the same request ids (``ep/q000/prompt/-/0``)."""
    prompts = tmp_path / f"prompts-{run}.jsonl"
    prompts.write_bytes(
        b"".join(
            orjson.dumps({"id": f"q{i:03d}", "prompt": f"{word} {i}."}) + b"\n"
            for i in range(PROMPTS)
        )
    )
    return config_from_mapping(
        {
            "run_dir": run,
            "cache_dir": "cache",
            "task": {"kind": "prompts", "path": prompts.name},
            "endpoints": [
                {
                    "name": "ep",
                    "provider": provider,
                    "model": "echo",
                    "base_url": base_url,
                    "max_tokens": 64,
                    "mode": "batch",
                    "batch_poll_s": 5,
                    "batch_max_requests": 100,
                }
            ],
        },
        config_dir=tmp_path,
    )


async def interrupted_at_first_poll(config: Any) -> None:
    """Run until the batches are submitted, then stop as Ctrl-C does (they stay open)."""
    stop = asyncio.Event()

    async def interrupt(seconds: float) -> None:
        stop.set()
        await asyncio.sleep(0)

    summary = await run_sweep(config, progress=False, sleep=interrupt, stop_event=stop)
    assert summary.interrupted and summary.written == 0


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a_failed_create_never_takes_another_runs_batch(
    tmp_path: Path, make_server: Callable[[ServerConfig], ServerThread], provider: str
) -> None:
    clock = FakeClock()
    # The first create call (run A's) goes through; the second (run B's) is a 503.
    spec = BatchSpec(
        validating_s=1.0,
        processing_s=10.0,
        finalizing_s=1.0,
        create_faults=(None, FaultKind.UNAVAILABLE),
    )
    server = make_server(ServerConfig(clock=clock, batches=spec))
    run_a = sweep_saying(tmp_path, "a", provider, server.base_url, "Say")
    await interrupted_at_first_poll(run_a)  # A's batch ep-00001 runs at the provider
    [a_batch] = BatchStore(run_a.run_dir).load()

    # B's batch is ep-00001 too, of as many requests, created a moment later; its create call
    # fails, and its retry looks for it at the provider before sending it again.
    run_b = sweep_saying(tmp_path, "b", provider, server.base_url, "Tell")
    summary = await run_sweep(run_b, progress=False, sleep=fake_sleep(clock))
    assert summary.errors == 0 and summary.written == PROMPTS
    texts = {r["request_id"]: r["text"] for r in responses(run_b)}
    assert len(texts) == PROMPTS
    assert all("Tell" in text and "Say" not in text for text in texts.values()), texts
    [b_batch] = BatchStore(run_b.run_dir).load()
    assert b_batch.local_id == a_batch.local_id == "ep-00001"
    assert b_batch.remote_id != a_batch.remote_id and b_batch.state == "done"
    if provider == "anthropic":
        # Found by size and time, then told apart by its results' custom ids.
        assert b_batch.rejected == [a_batch.remote_id]
    else:
        assert b_batch.rejected == []  # made from another input file: never taken
    assert len(await server_batches(server, provider)) == 2

    # A's batch is untouched, and A collects its own answers.
    summary = await run_sweep(run_a, progress=False, sleep=fake_sleep(clock))
    assert summary.batches == 0 and summary.written == PROMPTS and summary.errors == 0
    assert all("Say" in r["text"] for r in responses(run_a))


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a_create_whose_answer_was_lost_is_found_and_not_sent_twice(
    tmp_path: Path, make_server: Callable[[ServerConfig], ServerThread], provider: str
) -> None:
    clock = FakeClock()
    # The batch is created, then the connection is reset: the client never hears of it.
    spec = BatchSpec(
        validating_s=1.0, processing_s=10.0, finalizing_s=1.0, create_faults=(FaultKind.RESET,)
    )
    server = make_server(ServerConfig(clock=clock, batches=spec))
    config = sweep_saying(tmp_path, "run", provider, server.base_url, "Say")
    summary = await run_sweep(config, progress=False, sleep=fake_sleep(clock))
    assert summary.errors == 0 and summary.written == PROMPTS
    assert len(await server_batches(server, provider)) == 1  # the one created, found
    [batch] = BatchStore(config.run_dir).load()
    assert batch.rejected == [] and not batch.unverified
    assert any("found at the provider" in note for note in batch.notes)
    assert all("Say" in r["text"] for r in responses(config))


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_state_files_written_before_nonces_still_resume(
    tmp_path: Path, make_server: Callable[[ServerConfig], ServerThread], provider: str
) -> None:
    clock = FakeClock()
    server = make_server(ServerConfig(clock=clock, batches=SPEC))
    config = config_for(tmp_path, "run", provider, server.base_url)
    await interrupted_at_first_poll(config)
    store = BatchStore(config.run_dir)
    paths = sorted(store.directory.glob("*.json"))
    assert len(paths) == 3
    for i, path in enumerate(paths):
        # As the version before nonces wrote them: no nonce, rejected or unverified keys.
        data = orjson.loads(path.read_bytes())
        for key in ("nonce", "rejected", "unverified"):
            del data[key]
        if i == 2:  # and the last one cut off inside its create call
            data["state"], data["remote_id"], data["status"] = "submitting", None, None
        path.write_bytes(orjson.dumps(data, option=orjson.OPT_INDENT_2))

    summary = await run_sweep(config, progress=False, sleep=fake_sleep(clock))
    assert summary.batches == 0 and summary.written == PROMPTS and summary.errors == 0
    assert sorted(r["request_id"] for r in responses(config)) == sorted(
        f"ep/q{i:03d}/prompt/-/0" for i in range(PROMPTS)
    )
    assert [b.state for b in store.load()] == ["done"] * 3
    assert len(await server_batches(server, provider)) == 3  # none sent again
