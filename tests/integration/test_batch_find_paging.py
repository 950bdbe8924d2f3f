"""A resumed batch run looks for a batch whose create call was cut off without reading the
whole account: the providers list batches newest first, so the search stops at the first page
whose oldest batch is older than the create call (less the clock allowance). An account of a
large sweep holds thousands of ended batches; each resume would otherwise page through them."""

from __future__ import annotations

import asyncio
import io
from collections.abc import Callable
from pathlib import Path

import aiohttp
import orjson
import pytest

from runner.batch.apis import LIST_PAGE
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
)
from tests.runner.server.helpers import FakeClock

OLD = 3 * LIST_PAGE + 50  # ended batches of the account, from earlier sweeps
RECENT = LIST_PAGE + 50  # other clients' batches made after the run's: its own are on page 2
DAY_S = 86_400.0
ROUTES = {"openai": "/v1/batches", "anthropic": "/v1/messages/batches"}


async def make_foreign_batches(server: ServerThread, provider: str, n: int) -> None:
    """``n`` batches of one request each, made by another client of the same account."""
    async with aiohttp.ClientSession() as session:

        async def one(i: int) -> None:
            body = {"model": "echo", "messages": [{"role": "user", "content": f"old {i}"}]}
            if provider == "anthropic":
                payload = {"requests": [{"custom_id": "x", "params": {**body, "max_tokens": 8}}]}
                async with session.post(
                    f"{server.base_url}/messages/batches", json=payload
                ) as resp:
                    assert resp.status == 200, await resp.text()
                return
            line = {"custom_id": "x", "method": "POST", "url": "/v1/chat/completions"}
            form = aiohttp.FormData()
            form.add_field("purpose", "batch")
            form.add_field(
                "file", io.BytesIO(orjson.dumps({**line, "body": body}) + b"\n"), filename="x"
            )
            async with session.post(f"{server.base_url}/files", data=form) as resp:
                file_id = (await resp.json())["id"]
            create = {
                "input_file_id": file_id,
                "endpoint": "/v1/chat/completions",
                "completion_window": "24h",
            }
            async with session.post(f"{server.base_url}/batches", json=create) as resp:
                assert resp.status == 200, await resp.text()

        for start in range(0, n, 50):
            await asyncio.gather(*(one(i) for i in range(start, min(n, start + 50))))


def list_calls(server: ServerThread, provider: str) -> int:
    # GET and POST share the route in the counters; the resume below creates no batch.
    return server.stats()["by_route"].get(ROUTES[provider], 0)


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a_resume_stops_listing_at_batches_older_than_the_create_call(
    tmp_path: Path, make_server: Callable[[ServerConfig], ServerThread], provider: str
) -> None:
    clock = FakeClock()
    wall = FakeClock(1_800_000_000.0)  # the wall clock of the server and of the run
    server = make_server(ServerConfig(clock=clock, wall_clock=wall, batches=SPEC))
    await make_foreign_batches(server, provider, OLD)
    wall.advance(DAY_S)  # a day later, a sweep on the same account

    config = config_for(tmp_path, "run", provider, server.base_url)
    stop = asyncio.Event()

    async def interrupt(seconds: float) -> None:
        stop.set()  # Ctrl-C at the first poll: the 3 batches are at the provider
        await asyncio.sleep(0)

    summary = await run_sweep(
        config, progress=False, sleep=interrupt, stop_event=stop, wall_clock=wall
    )
    assert summary.interrupted and summary.batches == 3
    await make_foreign_batches(server, provider, RECENT)

    # As a crash inside the last batch's create call leaves it: the provider has the batch,
    # the state file does not have its id.
    store = BatchStore(config.run_dir)
    path = sorted(store.directory.glob("*.json"))[-1]
    data = orjson.loads(path.read_bytes())
    lost = data["remote_id"]
    data["state"], data["remote_id"], data["status"] = "submitting", None, None
    path.write_bytes(orjson.dumps(data, option=orjson.OPT_INDENT_2))

    server.reset_stats()
    summary = await run_sweep(config, progress=False, sleep=fake_sleep(clock), wall_clock=wall)
    assert summary.batches == 0 and summary.errors == 0 and summary.written == PROMPTS
    assert len(responses(config)) == PROMPTS
    [found] = [b for b in store.load() if b.local_id == data["local_id"]]
    assert found.remote_id == lost and found.state == "done"
    # Page 1: the recent foreign batches; page 2: the rest of them, the run's, and the first
    # old ones. No page after it can hold a batch made since the create call began.
    assert list_calls(server, provider) == 2
