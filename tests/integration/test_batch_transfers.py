"""Getting a batch's files there and back: an Anthropic ``results_url`` on another host than
the configured base URL (a gateway's) is read through the configured host's relative route,
the key never leaving it; uploads and downloads slower than the per-completion ``timeout_s``
complete while bytes keep moving."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from runner.batch.store import BatchStore
from runner.engine import run_sweep
from runner.server.batch_jobs import BatchSpec
from runner.server.lifecycle import ServerThread
from runner.server.settings import ServerConfig
from tests.integration.test_batch_mode import (
    PROMPTS,
    PROVIDERS,
    config_for,
    fake_sleep,
    responses,
)
from tests.runner.server.helpers import FakeClock

RESULTS_ROUTE = "/v1/messages/batches/{batch_id}/results"


async def test_a_results_url_on_another_host_is_read_from_the_configured_one(
    tmp_path: Path, make_server: Callable[[ServerConfig], ServerThread]
) -> None:
    clock = FakeClock()
    # A provider behind a gateway: its results_url names the provider's own host.
    spec = BatchSpec(
        validating_s=1.0,
        processing_s=10.0,
        finalizing_s=1.0,
        results_origin="https://api.anthropic.com",
    )
    server = make_server(ServerConfig(clock=clock, batches=spec))
    config = config_for(tmp_path, "run", "anthropic", server.base_url)
    summary = await run_sweep(config, progress=False, sleep=fake_sleep(clock))
    assert summary.stopped_endpoints == () and summary.errors == 0
    assert summary.written == PROMPTS and summary.batches == 3
    assert [b.state for b in BatchStore(config.run_dir).load()] == ["done"] * 3
    # Each batch's results came from the configured host (the loopback server).
    assert server.stats()["by_route"][RESULTS_ROUTE] == 3


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_transfers_slower_than_timeout_s_complete(
    tmp_path: Path, make_server: Callable[[ServerConfig], ServerThread], provider: str
) -> None:
    clock = FakeClock()
    # A slow link: an upload is answered 1 s after its body is read, a download takes 1 s
    # in ten chunks; a completion's timeout_s of 0.3 s would cut both off.
    spec = BatchSpec(validating_s=1.0, processing_s=10.0, finalizing_s=1.0, transfer_s=1.0)
    server = make_server(ServerConfig(clock=clock, batches=spec))
    config = config_for(
        tmp_path, "run", provider, server.base_url, timeout_s=0.3, batch_max_requests=100
    )
    summary = await run_sweep(config, progress=False, sleep=fake_sleep(clock))
    assert summary.stopped_endpoints == () and summary.errors == 0
    assert summary.written == PROMPTS and summary.batches == 1
    assert all(r["error"] is None for r in responses(config))
    by_route = server.stats()["by_route"]
    upload = "/v1/files" if provider == "openai" else "/v1/messages/batches"
    download = "/v1/files/{file_id}/content" if provider == "openai" else RESULTS_ROUTE
    assert by_route[upload] == 1 and by_route[download] == 1  # each once: no retry
