"""The progress line of a batch endpoint says what the run waits for (its batches), never a
worker concurrency: a batch endpoint has no workers, whatever its ``max_concurrency``. An
online endpoint of the same sweep keeps its ``concurrency N (auto)``. A sweep through the
local server's batch API over loopback, on a fake clock that the poll waits move."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest

import runner.engine
from runner.config import config_from_mapping
from runner.engine import run_sweep
from runner.progress import Progress
from runner.server.batch_jobs import BatchSpec
from runner.server.lifecycle import ServerThread
from runner.server.settings import ServerConfig
from tests.runner.server.helpers import FakeClock


def _endpoint(name: str, base_url: str, mode: str) -> dict[str, Any]:
    return {
        "name": name,
        "provider": "openai",
        "model": "echo",
        "base_url": base_url,
        "max_tokens": 16,
        "mode": mode,
        "batch_poll_s": 5,
        "requests_per_minute": 60000,  # no pacing wait: every wait here is a poll's
    }


async def test_a_batch_endpoint_shows_its_batches_not_a_concurrency(
    tmp_path: Path,
    make_server: Callable[[ServerConfig], ServerThread],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    clock = FakeClock()
    server = make_server(
        ServerConfig(clock=clock, batches=BatchSpec(validating_s=1, processing_s=10))
    )
    (tmp_path / "prompts.jsonl").write_bytes(
        b"".join(orjson.dumps({"id": f"q{i}", "prompt": f"Say {i}."}) + b"\n" for i in range(4))
    )
    config = config_from_mapping(
        {
            "run_dir": "run",
            "cache_dir": "cache",
            "task": {"kind": "prompts", "path": "prompts.jsonl"},
            "endpoints": [
                _endpoint("bat", server.base_url, "batch"),
                _endpoint("onl", server.base_url, "online"),
            ],
        },
        config_dir=tmp_path,
    )
    assert {ep.max_concurrency for ep in config.endpoints} == {"auto"}
    shown: list[Progress] = []

    class Recorded(Progress):
        """The run's own display, kept so the test reads the lines a refresh would print."""

        def __init__(self, **kwargs: Any) -> None:
            super().__init__(**kwargs)
            shown.append(self)

    monkeypatch.setattr(runner.engine, "Progress", Recorded)
    lines: list[list[str]] = []

    async def poll_wait(seconds: float) -> None:
        lines.append(shown[-1].lines())  # what a refresh during the wait would print
        clock.advance(seconds)
        await asyncio.sleep(0)

    summary = await run_sweep(config, progress=True, sleep=poll_wait, progress_stream=_Null())
    assert summary.errors == 0 and summary.written == 8 and summary.batches == 1
    assert lines, "the run never waited for its batch"
    for batch_line, online_line in lines:
        assert batch_line.startswith("cotaudit [bat]: ")
        assert "bat: 1 batch open" in batch_line
        assert "concurrency" not in batch_line
        # Records that come a batch at a time, hours apart, have no rate to give or time left.
        counts = batch_line.split(", retries")[0]
        assert "/s" not in counts and " left" not in counts, batch_line
        assert online_line.startswith("cotaudit [onl]: ")
        assert "onl: concurrency 32 (auto)" in online_line
        assert "/s" in online_line.split(", retries")[0]


class _Null:
    """A stream that keeps nothing (the stage lines are not the point here)."""

    def write(self, text: str) -> int:
        return len(text)

    def flush(self) -> None:
        return None

    def isatty(self) -> bool:
        return False
