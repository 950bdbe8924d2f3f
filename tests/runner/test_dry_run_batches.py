"""``cotaudit run --dry-run`` of a batch run left with open batches: their requests are sent
and paid for already, so they are not counted (nor priced) again, and a config that turned
the endpoint online is refused as the run refuses it."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest

from cotaudit.errors import UsageError
from runner.batch.store import BatchStore
from runner.commands.run import estimate
from runner.config import SweepConfig, config_from_mapping
from runner.engine import run_sweep
from runner.server.batch_jobs import BatchSpec
from runner.server.lifecycle import ServerThread
from runner.server.settings import ServerConfig

PROMPTS = 30
SPEC = BatchSpec(validating_s=1.0, processing_s=3600.0, finalizing_s=1.0)


def _config(tmp_path: Path, base_url: str, **extra: Any) -> SweepConfig:
    (tmp_path / "prompts.jsonl").write_bytes(
        b"".join(
            orjson.dumps({"id": f"q{i:03d}", "prompt": f"Say {i}."}) + b"\n" for i in range(PROMPTS)
        )
    )
    endpoint = {
        "name": "ep",
        "provider": "openai",
        "model": "echo",
        "base_url": base_url,
        "max_tokens": 64,
        "mode": "batch",
        "batch_max_requests": 12,
        "price_input_per_mtok": 2.5,
        "price_output_per_mtok": 10.0,
        **extra,
    }
    return config_from_mapping(
        {
            "run_dir": "run",
            "cache_dir": "cache",
            "task": {"kind": "prompts", "path": "prompts.jsonl"},
            "endpoints": [endpoint],
        },
        config_dir=tmp_path,
    )


def _left_with_open_batches(config: SweepConfig) -> None:
    stop = asyncio.Event()

    async def interrupt(seconds: float) -> None:
        stop.set()  # Ctrl-C at the first wait between polls: the batches are left open
        await asyncio.sleep(0)

    asyncio.run(run_sweep(config, progress=False, sleep=interrupt, stop_event=stop))
    assert [b.open for b in BatchStore(config.run_dir).load()] == [True] * 3


def test_a_dry_run_does_not_count_the_requests_of_open_batches(
    tmp_path: Path, make_server: Callable[[ServerConfig], ServerThread]
) -> None:
    server = make_server(ServerConfig(batches=SPEC))
    config = _config(tmp_path, server.base_url)
    fresh = estimate(config, None)[0]
    assert fresh.requests == PROMPTS and fresh.cost
    _left_with_open_batches(config)
    (left,) = estimate(config, None)
    assert (left.requests, left.in_batches, left.done) == (0, PROMPTS, 0)
    assert left.cost == 0.0 and left.input_tokens == left.output_tokens == 0
    assert f"0 requests left ({PROMPTS} in open batches an earlier run sent" in left.line()


def test_a_dry_run_refuses_an_online_endpoint_with_open_batches(
    tmp_path: Path, make_server: Callable[[ServerConfig], ServerThread]
) -> None:
    server = make_server(ServerConfig(batches=SPEC))
    _left_with_open_batches(_config(tmp_path, server.base_url))
    online = _config(tmp_path, server.base_url, mode="online")
    with pytest.raises(UsageError, match="batches in this run directory are not collected"):
        estimate(online, None)
