"""A batch the provider no longer has (deleted, past its retention, or sent with another key
or to another server): a resumed run says which and what to do, exit 2, instead of failing the
same way on every rerun; the batches it still has are collected first."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from cotaudit.errors import UsageError
from runner.batch.apis import batch_api
from runner.batch.store import BatchStore
from runner.config import SweepConfig
from runner.engine import run_sweep
from runner.providers import make_provider
from runner.providers.api_client import ApiClient
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


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a_batch_the_provider_no_longer_has_is_named_and_the_rest_collected(
    tmp_path: Path, make_server: Callable[[ServerConfig], ServerThread], provider: str
) -> None:
    clock = FakeClock()
    first = make_server(ServerConfig(clock=clock, batches=SPEC))
    config = config_for(tmp_path, "run", provider, first.base_url)
    stop = asyncio.Event()

    async def interrupt(seconds: float) -> None:
        stop.set()  # Ctrl-C at the first wait between polls: three batches stay open
        await asyncio.sleep(0)

    summary = await run_sweep(config, progress=False, sleep=interrupt, stop_event=stop)
    assert summary.interrupted and summary.batches == 3
    store = BatchStore(config.run_dir)
    lost = store.load()[0]

    # The same URL now answers for a server that has two of the three batches: the lost
    # one is one it never saw (as after a deletion at the provider).
    port = urlsplit(first.base_url).port
    assert port is not None
    first.stop()
    server = make_server(dataclasses.replace(ServerConfig(clock=clock, batches=SPEC), port=port))
    await _resend_as_on_the_old_server(server, config, lost.local_id)

    with pytest.raises(UsageError) as raised:
        await run_sweep(config, progress=False, sleep=fake_sleep(clock))
    message = str(raised.value)
    assert str(lost.remote_id) in message and f"{lost.local_id}.json" in message
    assert "delete" in message and "another API key" in message
    # The two batches the server has are collected; the lost one stays open, not resent.
    states = {b.local_id: b.state for b in store.load()}
    assert states.pop(lost.local_id) == "submitted"
    assert set(states.values()) == {"done"}
    assert len(responses(config)) == PROMPTS - len(lost.items)

    # --cancel-batches, the way to stop open batches, stops at it the same way.
    with pytest.raises(UsageError, match=str(lost.remote_id)):
        await run_sweep(config, progress=False, sleep=fake_sleep(clock), cancel_batches=True)

    # What the message says to do works: its requests go into a new batch.
    (store.directory / f"{lost.local_id}.json").unlink()
    summary = await run_sweep(config, progress=False, sleep=fake_sleep(clock))
    assert summary.batches == 1 and summary.errors == 0
    assert len(responses(config)) == PROMPTS


async def _resend_as_on_the_old_server(
    server: ServerThread, config: SweepConfig, lost: str
) -> None:
    """Create on ``server`` every batch of the run directory but ``lost`` from its stored
    requests, and point the state files at the new ids (the new server's id token differs)."""
    provider_ = make_provider(config.endpoints[0], base_url=server.base_url)
    store = BatchStore(config.run_dir)
    async with ApiClient(provider_) as client:
        api = batch_api(provider_, client)
        for batch in store.load():
            if batch.local_id == lost:
                continue
            specs = store.load_requests(batch.local_id)
            lines = [api.line(c, provider_.build_body(specs[r])) for c, r in batch.items]
            batch.input_file_id = None
            batch.remote_id = await api.submit(batch, lines, lambda _: None)
            store.save(batch)


async def test_every_endpoints_lost_batches_are_named_at_once_and_the_rest_of_the_run_goes_on(
    tmp_path: Path, make_server: Callable[[ServerConfig], ServerThread]
) -> None:
    # Two batch endpoints lose their batches (the server restarted), and an online endpoint
    # runs beside them. The first lost batch used to stop the run: the other endpoint's lost
    # batches went unnamed (the next rerun stopped at them) and the online one was cut off.
    clock = FakeClock()
    first = make_server(ServerConfig(clock=clock, batches=SPEC))
    config = config_for(tmp_path, "run", "openai", first.base_url)
    second = dataclasses.replace(config.endpoints[0], name="an", provider="anthropic")
    config = dataclasses.replace(config, endpoints=(config.endpoints[0], second))
    stop = asyncio.Event()

    async def interrupt(seconds: float) -> None:
        stop.set()
        await asyncio.sleep(0)

    summary = await run_sweep(config, progress=False, sleep=interrupt, stop_event=stop)
    assert summary.interrupted and summary.batches == 6
    port = urlsplit(first.base_url).port
    first.stop()
    make_server(dataclasses.replace(ServerConfig(clock=clock, batches=SPEC), port=port))
    online = dataclasses.replace(config.endpoints[0], name="on", mode="online")
    config = dataclasses.replace(config, endpoints=(*config.endpoints, online))

    with pytest.raises(UsageError) as raised:
        await run_sweep(config, progress=False, sleep=fake_sleep(clock))
    message = str(raised.value)
    for batch in BatchStore(config.run_dir).load():
        assert f"{batch.local_id}.json" in message and str(batch.remote_id) in message
    assert "endpoint 'ep'" in message and "endpoint 'an'" in message
    assert f"their {2 * PROMPTS} requests" in message
    assert len([r for r in responses(config) if r["endpoint"] == "on"]) == PROMPTS
