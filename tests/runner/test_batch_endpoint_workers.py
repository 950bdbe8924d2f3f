"""A batch endpoint is sized for what it sends on the run's transport (preflight's one ping;
its batch calls have a session of their own), not for the 1024 workers ``"auto"`` may grow
to online: one worker's share of the connection pool, whatever its ``max_concurrency``. A
sweep through the local server's batch API over loopback, on a fake clock."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest

from cotaudit.constants import AUTO_CONCURRENCY_MAX
from runner.config import EndpointConfig, config_from_mapping
from runner.engine import run_sweep, workers_for
from runner.server.batch_jobs import BatchSpec
from runner.server.lifecycle import ServerThread
from runner.server.settings import ServerConfig
from runner.transport import Transport, default_transport
from tests.runner.server.helpers import FakeClock


@pytest.mark.parametrize("concurrency", ["auto", 64])
def test_a_batch_endpoint_needs_one_worker_whatever_its_concurrency(
    concurrency: int | str,
) -> None:
    batch = EndpointConfig("b", "openai", "m", max_concurrency=concurrency, mode="batch")  # type: ignore[arg-type]
    assert workers_for(batch) == 1


def test_an_online_endpoint_keeps_its_pool() -> None:
    assert workers_for(EndpointConfig("o", "openai", "m")) == AUTO_CONCURRENCY_MAX
    assert workers_for(EndpointConfig("o", "openai", "m", max_concurrency=3)) == 3


async def test_the_runs_connection_pool_counts_one_per_batch_endpoint(
    tmp_path: Path, make_server: Callable[[ServerConfig], ServerThread]
) -> None:
    clock = FakeClock()
    server = make_server(
        ServerConfig(clock=clock, batches=BatchSpec(validating_s=1, processing_s=10))
    )
    (tmp_path / "prompts.jsonl").write_bytes(
        b"".join(orjson.dumps({"id": f"q{i}", "prompt": f"Say {i}."}) + b"\n" for i in range(3))
    )

    def endpoint(name: str, mode: str, **extra: Any) -> dict[str, Any]:
        return {
            "name": name,
            "provider": "openai",
            "model": "echo",
            "base_url": server.base_url,
            "max_tokens": 16,
            "mode": mode,
            "requests_per_minute": 60000,
            **extra,
        }

    config = config_from_mapping(
        {
            "run_dir": "run",
            "cache_dir": "cache",
            "task": {"kind": "prompts", "path": "prompts.jsonl"},
            "endpoints": [
                endpoint("bat", "batch", batch_poll_s=5),  # max_concurrency "auto"
                endpoint("onl", "online", max_concurrency=3),
            ],
        },
        config_dir=tmp_path,
    )
    pools: list[int] = []

    def transport(pool_size: int) -> Transport:
        pools.append(pool_size)
        return default_transport(pool_size)

    async def poll_wait(seconds: float) -> None:
        clock.advance(seconds)
        await asyncio.sleep(0)

    summary = await run_sweep(config, progress=False, sleep=poll_wait, transport_factory=transport)
    assert summary.errors == 0 and summary.written == 6 and summary.batches == 1
    assert pools == [1 + 3]
