"""How BatchRunner cuts a plan into batches: by request count and by bytes, with every batch
written to the run directory before its create call (a stub API records the calls; the
integration tests run both real APIs on the local server)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from cotaudit.errors import UsageError
from runner.batch.apis import BatchApi, ItemResult, Poll
from runner.batch.runner import BatchRunner
from runner.batch.store import BatchState, BatchStore
from runner.providers.base import ServerError, Timeout
from runner.request_spec import EndpointIdentity, make_spec
from runner.retry import RetryPolicy


class RecordingApi(BatchApi):
    name = "anthropic"
    batches_path = "/messages/batches"

    def __init__(self, store: BatchStore, max_requests: int, max_bytes: int) -> None:
        self.store = store
        self.max_requests = max_requests
        self.max_bytes = max_bytes
        self.created: list[tuple[list[bytes], list[str]]] = []

    def line(self, custom_id: str, body: dict[str, Any]) -> bytes:
        return custom_id.encode() + b" " + b"x" * int(body["size"])

    async def submit(self, batch: BatchState, lines: list[bytes], on_upload: Any) -> str:
        on_disk = [b.state for b in self.store.load() if b.local_id == batch.local_id]
        self.created.append((lines, on_disk))
        return f"remote-{len(self.created)}"

    async def poll(self, remote_id: str) -> Poll:
        raise AssertionError("not polled here")

    async def results(self, poll: Poll) -> list[ItemResult]:
        raise AssertionError("not read here")

    async def find_submitted(self, batch: BatchState, claimed: set[str]) -> str | None:
        return None


def spec(i: int) -> Any:
    ident = EndpointIdentity("ep", "anthropic", "m", "h", "u", {"max_tokens": 1})
    return make_spec(
        ident,
        task="t",
        problem_id=f"p{i}",
        condition="original",
        messages=[{"role": "user", "content": str(i)}],
        temperature=0.0,
    )


@pytest.mark.parametrize(("max_requests", "max_bytes", "sizes"), [(4, 10**9, [4, 4, 2])])
async def test_batches_close_at_the_request_limit(
    tmp_path: Path, max_requests: int, max_bytes: int, sizes: list[int]
) -> None:
    runner, api = make_runner(tmp_path, max_requests, max_bytes, size=10)
    for i in range(10):
        await runner.add(spec(i), 0.0)
    await runner.flush()  # the end of the plan walk, without polling
    assert [len(lines) for lines, _ in api.created] == sizes
    assert all(states == ["submitting"] for _, states in api.created)  # on disk first


async def test_batches_close_below_the_byte_limit(tmp_path: Path) -> None:
    # Lines of ~240 bytes (a 41-character custom id, a space, 200 bytes) and 1,000 bytes
    # allowed (less the 2% margin): 4 lines a batch.
    runner, api = make_runner(tmp_path, 100, 1000, size=200)
    for i in range(10):
        await runner.add(spec(i), 0.0)
    await runner.flush()
    assert [len(lines) for lines, _ in api.created] == [4, 4, 2]
    for lines, _ in api.created:
        assert sum(len(line) + 1 for line in lines) <= 980
    ids = [b.items for b in BatchStore(tmp_path).load()]
    assert sum(len(items) for items in ids) == 10


def make_runner(
    tmp_path: Path, max_requests: int, max_bytes: int, *, size: int
) -> tuple[BatchRunner, RecordingApi]:
    store = BatchStore(tmp_path)
    api = RecordingApi(store, max_requests, max_bytes)

    async def no_sleep(_: float) -> None:
        return None

    runner = BatchRunner(
        endpoint="ep",
        api=api,
        store=store,
        results_path=tmp_path / "results.jsonl",
        deliver=lambda *a, **k: None,
        body=lambda s: {"size": size},
        poll_s=1.0,
        max_requests=None,
        sleep=no_sleep,
    )
    return runner, api


class FlakyApi(RecordingApi):
    """A create call that reaches the provider and then times out, and polls that fail twice
    with a 503 before they answer."""

    def __init__(self, store: BatchStore) -> None:
        super().__init__(store, 100, 10**9)
        self.creates = 0
        self.polls = 0

    async def submit(self, batch: BatchState, lines: list[bytes], on_upload: Any) -> str:
        self.creates += 1
        raise Timeout("no complete answer in time", maybe_sent=True)

    async def find_submitted(self, batch: BatchState, claimed: set[str]) -> str | None:
        return "remote-1" if self.creates else None

    async def poll(self, remote_id: str) -> Poll:
        self.polls += 1
        if self.polls <= 2:
            raise ServerError("HTTP 503", status=503)
        return Poll(True, "cancelled", {}, {"id": remote_id})  # its items: errors, once

    async def results(self, poll: Poll) -> list[ItemResult]:
        return []


async def test_batch_calls_retry_and_a_timed_out_create_is_looked_for_not_repeated(
    tmp_path: Path,
) -> None:
    store = BatchStore(tmp_path)
    api = FlakyApi(store)
    slept: list[float] = []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)

    delivered: list[str] = []
    runner = BatchRunner(
        endpoint="ep",
        api=api,
        store=store,
        results_path=tmp_path / "results.jsonl",
        deliver=lambda spec, *a, **k: delivered.append(spec.request_id),
        body=lambda s: {"size": 1},
        poll_s=1.0,
        max_requests=None,
        sleep=sleep,
        policy=RetryPolicy(max_attempts=5, base_delay_s=0.5, max_delay_s=2, time_budget_s=60),
    )
    for i in range(3):
        await runner.add(spec(i), 0.0)
    await runner.finish()
    assert api.creates == 1  # the timed-out create was found at the provider, not resent
    [batch] = store.load()
    assert batch.remote_id == "remote-1" and batch.state == "done"
    assert api.polls == 4  # two 503s retried, then the poll that ended it and the one before
    assert len(slept) == 3  # the create's retry and two poll retries: backoff, no poll wait
    assert len(delivered) == 3  # every item written once (cancelled: not resubmitted)


async def test_a_request_over_the_byte_limit_alone_is_refused_before_it_is_sent(
    tmp_path: Path,
) -> None:
    runner, api = make_runner(tmp_path, 100, 1000, size=1000)
    with pytest.raises(UsageError, match=r"request ep/p0/.* bytes as a batch line, over the 980"):
        await runner.add(spec(0), 0.0)
    await runner.flush()
    assert api.created == [] and BatchStore(tmp_path).load() == []
