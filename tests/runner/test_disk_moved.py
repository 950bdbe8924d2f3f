"""A run directory deleted while the run writes: the run stops with the error, not a success
whose stream is nowhere; a rerun rebuilds the stream, answers already received from the cache."""

from __future__ import annotations

import shutil
from collections import Counter
from pathlib import Path

import pytest

from runner.engine import STREAM_MOVED_ADVICE, run_sweep
from runner.server.lifecycle import running_server
from runner.transport import HttpAnswer, Route, Transport, default_transport
from runner.writer import StreamMovedError
from tests.runner.test_engine import make_config, planned_ids, responses


class DeletesDirectory:
    """A transport that removes ``directory`` just before its ``after``-th request."""

    def __init__(self, inner: Transport, directory: Path, after: int) -> None:
        self.inner, self.directory, self.after = inner, directory, after
        self.sent = 0

    async def post(
        self, route: Route, body: bytes, *, timeout_s: float | None = None
    ) -> HttpAnswer:
        self.sent += 1
        if self.sent == self.after:
            shutil.rmtree(self.directory)
        return await self.inner.post(route, body, timeout_s=timeout_s)

    async def close(self) -> None:
        await self.inner.close()


async def test_a_run_dir_deleted_mid_run_stops_the_run_and_a_rerun_rebuilds_it(
    tmp_path: Path,
) -> None:
    async with running_server() as server:
        config = make_config(tmp_path, server.base_url, prompts=400, samples=1)
        made: list[DeletesDirectory] = []

        def factory(pool: int) -> Transport:
            made.append(DeletesDirectory(default_transport(pool), config.run_dir, after=20))
            return made[-1]

        # fsync_interval_s=0: every drain fsyncs, and checks the stream is still in place.
        with pytest.raises(StreamMovedError) as raised:
            await run_sweep(config, progress=False, transport_factory=factory, fsync_interval_s=0.0)
        assert raised.value.filename == str(config.run_dir / "results.jsonl")
        # Not "nothing to resume" (the path is empty now, the stream not): how to get it back.
        assert raised.value.__notes__ == [STREAM_MOVED_ADVICE]
        assert made[0].sent < 400  # stopped sending, rather than running the plan to the end
        assert not config.run_dir.exists()

        summary = await run_sweep(config, progress=False)
    assert summary.cache_hits > 0 and summary.pending == 0
    ids = Counter(r["request_id"] for r in responses(config))
    assert set(ids) == planned_ids(config) and max(ids.values()) == 1
