"""``mode = "batch"`` end to end: sweeps through OpenAI Batch and Anthropic Message Batches on
the local server over loopback, on a fake clock (the runner's poll sleeps move it)."""

from __future__ import annotations

import asyncio
import dataclasses
import socket
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import pytest

from cotaudit.schema import read_records
from runner.batch.custom_ids import ANTHROPIC_CUSTOM_ID
from runner.batch.store import BatchStore
from runner.config import config_from_mapping
from runner.engine import run_sweep
from runner.server.batch_jobs import BatchSpec
from runner.server.lifecycle import ServerThread
from runner.server.settings import ServerConfig
from tests.runner.server.helpers import FakeClock

PROMPTS = 30
SPEC = BatchSpec(validating_s=1.0, processing_s=10.0, finalizing_s=1.0)
PROVIDERS = ["openai", "anthropic"]


def write_prompts(tmp_path: Path) -> None:
    (tmp_path / "prompts.jsonl").write_bytes(
        b"".join(
            orjson.dumps({"id": f"q{i:03d}", "prompt": f"Say {i}."}) + b"\n" for i in range(PROMPTS)
        )
    )


def config_for(tmp_path: Path, run: str, provider: str, base_url: str, **extra: Any) -> Any:
    write_prompts(tmp_path)
    return config_from_mapping(
        {
            "run_dir": run,
            "cache_dir": extra.pop("cache_dir", "cache"),
            "task": {"kind": "prompts", "path": "prompts.jsonl"},
            "endpoints": [
                {
                    "name": "ep",
                    "provider": provider,
                    "model": "echo",
                    "base_url": base_url,
                    "max_tokens": 64,
                    "mode": "batch",
                    "batch_poll_s": 5,
                    "batch_max_requests": 12,
                    "requests_per_minute": 60000,
                    **extra,
                }
            ],
        },
        config_dir=tmp_path,
    )


def fake_sleep(clock: FakeClock, calls: list[float] | None = None) -> Any:
    async def sleep(seconds: float) -> None:
        if calls is not None:
            calls.append(seconds)
        clock.advance(seconds)
        await asyncio.sleep(0)

    return sleep


def responses(config: Any) -> list[dict[str, Any]]:
    return [r for r in read_records(config.run_dir / "results.jsonl") if r["kind"] == "response"]


async def server_batches(server: ServerThread, provider: str) -> list[dict[str, Any]]:
    path = "/batches?limit=100" if provider == "openai" else "/messages/batches?limit=100"
    headers = {"anthropic-version": "2023-06-01"} if provider == "anthropic" else {}
    async with (
        aiohttp.ClientSession() as session,
        session.get(server.base_url + path, headers=headers) as resp,
    ):
        assert resp.status == 200
        return list((await resp.json())["data"])


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a_sweep_through_the_batch_api_writes_the_online_records(
    tmp_path: Path, make_server: Callable[[ServerConfig], ServerThread], provider: str
) -> None:
    clock = FakeClock()
    server = make_server(ServerConfig(clock=clock, batches=SPEC))
    config = config_for(tmp_path, "run", provider, server.base_url)
    polls: list[float] = []
    summary = await run_sweep(config, progress=False, sleep=fake_sleep(clock, polls))
    assert summary.errors == 0 and summary.written == PROMPTS
    assert summary.batches == 3  # 30 requests, at most 12 a batch
    assert summary.http_requests == 0  # no online completion was sent
    assert polls and set(polls) == {5.0}
    stats = server.stats()
    assert (
        "/v1/chat/completions" not in stats["by_route"] and "/v1/messages" not in stats["by_route"]
    )
    records = responses(config)
    assert Counter(r["request_id"] for r in records) == Counter(
        f"ep/q{i:03d}/prompt/-/0" for i in range(PROMPTS)
    )
    assert {r["via"] for r in records} == {"batch"}
    assert all(r["served_model"] == "echo" and r["attempt_outcomes"] == ["ok"] for r in records)
    batches = BatchStore(config.run_dir).load()
    assert [b.state for b in batches] == ["done"] * 3
    assert {b.remote_id for b in batches} == {
        b["id"] for b in await server_batches(server, provider)
    }
    for batch in batches:
        for custom_id, request_id in batch.items:
            if provider == "openai":
                assert custom_id == request_id
            else:
                assert ANTHROPIC_CUSTOM_ID.match(custom_id) and custom_id != request_id

    # The same answers as online: the batch item is answered by the online path.
    online = config_for(
        tmp_path, "online", provider, server.base_url, mode="online", cache_dir="cache2"
    )
    await run_sweep(online, progress=False)
    by_id = {r["request_id"]: r["text"] for r in responses(online)}
    assert {r["request_id"]: r["text"] for r in records} == by_id

    # The cache is consulted first: a second run dir sends nothing.
    again = config_for(tmp_path, "again", provider, server.base_url)
    summary = await run_sweep(again, progress=False, sleep=fake_sleep(clock))
    assert summary.cache_hits == PROMPTS and summary.batches == 0
    # And resuming the finished run does nothing.
    summary = await run_sweep(config, progress=False, sleep=fake_sleep(clock))
    assert summary.skipped == PROMPTS and summary.batches == 0 and summary.written == 0


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_failed_items_are_resubmitted_then_recorded_and_retry_errors_sends_only_them(
    tmp_path: Path, make_server: Callable[[ServerConfig], ServerThread], provider: str
) -> None:
    clock = FakeClock()
    spec = BatchSpec(validating_s=1.0, processing_s=10.0, finalizing_s=1.0, error_rate=1.0)
    server = make_server(ServerConfig(clock=clock, batches=spec))
    config = config_for(tmp_path, "run", provider, server.base_url, batch_max_requests=100)
    summary = await run_sweep(config, progress=False, sleep=fake_sleep(clock))
    # Every item fails with a server error: sent in 3 rounds, then written as errors.
    assert summary.batches == 3 and summary.errors == PROMPTS
    records = responses(config)
    assert len(records) == PROMPTS
    assert {r["error"]["type"] for r in records} == {"ServerError"}
    rounds = [b.round for b in BatchStore(config.run_dir).load()]
    assert rounds == [1, 2, 3]

    server.configure(batches=SPEC)  # the errors stop
    summary = await run_sweep(config, progress=False, sleep=fake_sleep(clock))
    assert summary.batches == 0 and summary.written == 0  # errors are done, without the flag
    summary = await run_sweep(config, progress=False, retry_errors=True, sleep=fake_sleep(clock))
    assert summary.batches == 1 and summary.errors == 0 and summary.written == PROMPTS
    last = BatchStore(config.run_dir).load()[-1]
    assert sorted(r for _, r in last.items) == sorted(r["request_id"] for r in records)


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_an_expiring_batch_keeps_what_it_answered_and_resubmits_the_rest(
    tmp_path: Path, make_server: Callable[[ServerConfig], ServerThread], provider: str
) -> None:
    clock = FakeClock()
    spec = BatchSpec(validating_s=0.0, processing_s=10.0, finalizing_s=0.0, expire_s=5.0)
    server = make_server(ServerConfig(clock=clock, batches=spec))
    config = config_for(tmp_path, "run", provider, server.base_url, batch_max_requests=100)
    summary = await run_sweep(config, progress=False, sleep=fake_sleep(clock))
    records = responses(config)
    assert Counter(r["request_id"] for r in records).most_common(1)[0][1] == 1
    assert len(records) == PROMPTS
    done = [r for r in records if r["error"] is None]
    failed = [r for r in records if r["error"] is not None]
    assert len(done) >= PROMPTS // 2  # the first round answered half before it expired
    assert failed and {r["error"]["type"] for r in failed} == {"BatchExpired"}
    assert summary.batches == 3  # the unrun items went out twice more
    statuses = {b.status for b in BatchStore(config.run_dir).load()}
    assert statuses == ({"expired"} if provider == "openai" else {"ended"})


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a_cancelled_batch_writes_errors_that_retry_errors_sends_again(
    tmp_path: Path, make_server: Callable[[ServerConfig], ServerThread], provider: str
) -> None:
    clock = FakeClock()
    server = make_server(ServerConfig(clock=clock, batches=SPEC))
    config = config_for(tmp_path, "run", provider, server.base_url, batch_max_requests=100)
    base = fake_sleep(clock)
    headers = {"anthropic-version": "2023-06-01"} if provider == "anthropic" else {}
    path = "/batches" if provider == "openai" else "/messages/batches"

    async def cancel_at_first_poll(seconds: float) -> None:
        [batch] = BatchStore(config.run_dir).load()
        if batch.status in (None, "validating", "in_progress"):
            async with aiohttp.ClientSession() as session:
                url = f"{server.base_url}{path}/{batch.remote_id}/cancel"
                async with session.post(url, headers=headers) as resp:
                    assert resp.status == 200
        await base(seconds)

    summary = await run_sweep(config, progress=False, sleep=cancel_at_first_poll)
    records = responses(config)
    assert len(records) == PROMPTS and summary.batches == 1
    assert {r["error"]["type"] for r in records if r["error"]} == {"BatchCancelled"}
    summary = await run_sweep(config, progress=False, retry_errors=True, sleep=base)
    assert summary.errors == 0 and summary.batches == 1


def test_batch_limits_and_discount_are_checked_in_the_config(tmp_path: Path) -> None:
    from cotaudit.errors import UsageError

    with pytest.raises(UsageError, match="mode"):
        config_for(tmp_path, "run", "openai", "http://127.0.0.1:1/v1", mode="later")
    with pytest.raises(UsageError, match="batch_max_requests"):
        config_for(tmp_path, "run", "openai", "http://127.0.0.1:1/v1", batch_max_requests=0)
    with pytest.raises(UsageError, match="batch_discount"):
        config_for(tmp_path, "run", "openai", "http://127.0.0.1:1/v1", batch_discount=1.5)


async def test_switching_to_online_with_batches_open_is_refused(
    tmp_path: Path, make_server: Callable[[ServerConfig], ServerThread]
) -> None:
    from cotaudit.errors import UsageError

    clock = FakeClock()
    server = make_server(ServerConfig(clock=clock, batches=SPEC))
    config = config_for(tmp_path, "run", "openai", server.base_url, batch_max_requests=100)
    await run_sweep(config, progress=False, sleep=fake_sleep(clock))
    store = BatchStore(config.run_dir)
    [batch] = store.load()
    batch.state = "submitted"  # as a run stopped while polling leaves it
    store.save(batch)
    online = config_for(tmp_path, "run", "openai", server.base_url, mode="online")
    before = (config.run_dir / "results.jsonl").read_bytes()
    with pytest.raises(UsageError, match="not collected yet") as refused:
        await run_sweep(online, progress=False)
    assert (config.run_dir / "results.jsonl").read_bytes() == before
    # The way out keeps what the batches answered: cancel them (their answers are written),
    # then send the cancelled rest online. Deleting their files would pay for it all again.
    assert "--cancel-batches" in refused.value.fix and "delete" not in refused.value.fix
    # The advice as given: the cancel run collects the batch (it had ended: nothing to
    # cancel, nothing written twice), and the endpoint then runs online, sending nothing.
    await run_sweep(config, progress=False, sleep=fake_sleep(clock), cancel_batches=True)
    assert (config.run_dir / "results.jsonl").read_bytes() == before
    retried = await run_sweep(online, progress=False, retry_errors=True)
    assert retried.http_requests == 0 and retried.skipped == PROMPTS


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_ctrl_c_while_polling_leaves_the_batches_to_the_next_run(
    tmp_path: Path, make_server: Callable[[ServerConfig], ServerThread], provider: str
) -> None:
    clock = FakeClock()
    server = make_server(ServerConfig(clock=clock, batches=SPEC))
    config = config_for(tmp_path, "run", provider, server.base_url)
    stop = asyncio.Event()

    async def interrupt(seconds: float) -> None:
        stop.set()  # what SIGINT does, at the first wait between polls
        await asyncio.sleep(0)

    summary = await run_sweep(config, progress=False, sleep=interrupt, stop_event=stop)
    assert summary.interrupted and summary.batches == 3 and summary.written == 0
    assert [b.state for b in BatchStore(config.run_dir).load()] == ["submitted"] * 3
    assert summary.batches_open == 3  # what `cotaudit run` says runs on at the provider
    summary = await run_sweep(config, progress=False, sleep=fake_sleep(clock))
    assert summary.batches == 0 and summary.written == PROMPTS and summary.errors == 0
    assert len(await server_batches(server, provider)) == 3


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_permanent_item_errors_are_written_at_once(
    tmp_path: Path, make_server: Callable[[ServerConfig], ServerThread], provider: str
) -> None:
    clock = FakeClock()
    server = make_server(ServerConfig(clock=clock, batches=SPEC))
    config = config_for(
        tmp_path, "run", provider, server.base_url, model="no-such-model", batch_max_requests=100
    )
    summary = await run_sweep(config, progress=False, sleep=fake_sleep(clock))
    assert summary.batches == 1 and summary.errors == PROMPTS  # not resubmitted
    records = responses(config)
    assert {(r["error"]["type"], r["error"]["status"]) for r in records} == {("NotFound", 404)}
    assert all(r["via"] == "batch" and r["attempt_outcomes"] == ["404"] for r in records)


async def test_preflight_names_a_server_without_a_batch_api(tmp_path: Path) -> None:
    # An Ollama-like server: a model list and chat completions, no batch routes.
    from aiohttp import web

    from cotaudit.errors import UsageError

    async def models(request: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [{"id": "echo", "object": "model"}]})

    async def chat(request: web.Request) -> web.Response:
        return web.json_response(
            {
                "model": "echo",
                "choices": [
                    {"message": {"role": "assistant", "content": "hi"}, "finish_reason": "stop"}
                ],
                "usage": {"prompt_tokens": 1, "completion_tokens": 1},
            }
        )

    app = web.Application()
    app.router.add_get("/v1/models", models)
    app.router.add_post("/v1/chat/completions", chat)
    runner = web.AppRunner(app)
    await runner.setup()
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    site = web.SockSite(runner, sock)
    await site.start()
    try:
        config = config_for(tmp_path, "run", "openai", f"http://127.0.0.1:{port}/v1")
        with pytest.raises(UsageError, match=r'has no batch API .*use mode = "online"'):
            await run_sweep(config, progress=False, preflight=True)
        assert not config.run_dir.exists()
    finally:
        await runner.cleanup()


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_cancel_batches_stops_the_open_ones_and_sends_nothing_new(
    tmp_path: Path, make_server: Callable[[ServerConfig], ServerThread], provider: str
) -> None:
    """``--cancel-batches``: the batches a stopped run left open are cancelled at the
    provider and collected (their unrun requests written as BatchCancelled, never resent); a
    batch whose create call never got through is not sent; no new batch, no online request."""
    clock = FakeClock()
    server = make_server(ServerConfig(clock=clock, batches=SPEC))
    config = config_for(tmp_path, "run", provider, server.base_url)
    stop = asyncio.Event()

    async def interrupt(seconds: float) -> None:
        stop.set()  # Ctrl-C at the first wait between polls: three batches left running
        await asyncio.sleep(0)

    await run_sweep(config, progress=False, sleep=interrupt, stop_event=stop)
    store = BatchStore(config.run_dir)
    first, second, third = store.load()
    third.state, third.remote_id = "prepared", None  # as a crash before its create leaves it
    store.save(third)
    summary = await run_sweep(config, progress=False, sleep=fake_sleep(clock), cancel_batches=True)
    assert summary.batches == 0 and summary.batches_cancelled == 2
    assert summary.http_requests == 0 and summary.written == PROMPTS
    assert "2 batches cancelled" in summary.line()
    records = responses(config)
    assert Counter(r["request_id"] for r in records) == Counter(
        f"ep/q{i:03d}/prompt/-/0" for i in range(PROMPTS)
    )
    assert {r["error"]["type"] for r in records} == {"BatchCancelled"}
    unsent = {request_id for _, request_id in third.items}
    assert all(
        "before it was sent" in r["error"]["message"] or r["request_id"] not in unsent
        for r in records
    )
    assert [b.state for b in store.load()] == ["done"] * 3
    remote = {b["id"]: b for b in await server_batches(server, provider)}
    cancelled = "cancelled" if provider == "openai" else "ended"
    assert {
        remote[b.remote_id]["status" if provider == "openai" else "processing_status"]
        for b in (first, second)
    } == {cancelled}
    assert len(remote) == 3  # the third was created before the "crash"; nothing new since
    # A plain rerun leaves the cancelled requests alone; --retry-errors sends them again.
    summary = await run_sweep(config, progress=False, sleep=fake_sleep(clock))
    assert summary.batches == 0 and summary.written == 0
    summary = await run_sweep(config, progress=False, sleep=fake_sleep(clock), retry_errors=True)
    assert summary.errors == 0 and summary.written == PROMPTS and summary.batches == 3


async def test_a_batch_failed_by_the_enqueued_token_limit_is_sent_again_later(
    tmp_path: Path, make_server: Callable[[ServerConfig], ServerThread]
) -> None:
    """OpenAI fails a batch as a whole (``token_limit_exceeded``, no line) while the model's
    earlier batches hold the organisation's enqueued tokens: its items are not errors; the
    same file is sent again once an earlier batch has ended. Alone at the provider and still
    too big, its items are written as ``BatchRefused`` errors that --retry-errors sends."""
    clock = FakeClock()
    # 37 characters a prompt: 9 tokens; batches of 12 and 6 requests: 108 and 54 tokens. At
    # most 150 queued: one batch at a time.
    spec = BatchSpec(
        validating_s=1.0, processing_s=10.0, finalizing_s=1.0, openai_enqueued_tokens=150
    )
    server = make_server(ServerConfig(clock=clock, batches=spec))
    (tmp_path / "long.jsonl").write_bytes(
        b"".join(
            orjson.dumps(
                {"id": f"q{i:03d}", "prompt": f"Please say the number {i:03d} back to me."}
            )
            + b"\n"
            for i in range(PROMPTS)
        )
    )

    def long_prompts(run: str) -> Any:
        table = {
            "name": "ep",
            "provider": "openai",
            "model": "echo",
            "base_url": server.base_url,
            "max_tokens": 64,
            "mode": "batch",
            "batch_poll_s": 5,
            "batch_max_requests": 12,
        }
        return config_from_mapping(
            {
                "run_dir": run,
                "cache_dir": f"cache-{run}",
                "task": {"kind": "prompts", "path": "long.jsonl"},
                "endpoints": [table],
            },
            config_dir=tmp_path,
        )

    config = long_prompts("run")
    summary = await run_sweep(config, progress=False, sleep=fake_sleep(clock))
    assert summary.errors == 0 and summary.written == PROMPTS
    assert all(r["error"] is None and "back to me" in r["text"] for r in responses(config))
    remote = await server_batches(server, "openai")
    failed = [b for b in remote if b["status"] == "failed"]
    assert failed and len(remote) == 3 + len(failed)
    assert {e["code"] for b in failed for e in b["errors"]["data"]} == {"token_limit_exceeded"}
    assert {e["line"] for b in failed for e in b["errors"]["data"]} == {None}
    states = BatchStore(config.run_dir).load()
    assert [b.state for b in states] == ["done"] * 3  # the same three batches, sent again
    files = {b["id"]: b["input_file_id"] for b in remote}
    again = [b for b in states if b.rejected]
    assert again and all(files[b.rejected[0]] == files[str(b.remote_id)] for b in again)

    # A limit below one batch: alone at the provider it fails again, and its items are
    # errors, not sent forever; --retry-errors sends them once the limit allows.
    server.configure(batches=dataclasses.replace(spec, openai_enqueued_tokens=50))
    other = long_prompts("other")
    summary = await run_sweep(other, progress=False, sleep=fake_sleep(clock))
    records = responses(other)
    assert summary.errors == len(records) == PROMPTS
    assert {r["error"]["type"] for r in records} == {"BatchRefused"}
    assert all("token_limit_exceeded" in r["error"]["message"] for r in records)
    server.configure(batches=SPEC)
    summary = await run_sweep(other, progress=False, retry_errors=True, sleep=fake_sleep(clock))
    assert summary.errors == 0 and summary.written == PROMPTS
