"""What the progress line says while a run waits for its batches: which batches (provider
ids), how far each is by its last poll, how long ago the oldest was sent, and when the next
poll is (a stub API on a fake wall clock; the batches end at the third poll)."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

from runner.batch.apis import ItemResult, Poll
from runner.batch.runner import BatchRunner
from runner.batch.store import BatchState, BatchStore
from runner.providers.base import BadRequest, ServerError
from tests.runner.test_batch_split import RecordingApi, spec


class CountingApi(RecordingApi):
    """OpenAI-shaped counts: every poll, one more request of each batch is done."""

    def __init__(self, store: BatchStore) -> None:
        super().__init__(store, 4, 10**9)
        self.polls: dict[str, int] = {}

    async def poll(self, remote_id: str) -> Poll:
        n = self.polls[remote_id] = self.polls.get(remote_id, 0) + 1
        done = min(n, 4)
        counts = {"total": 4, "completed": done, "failed": 0}
        status = "completed" if done == 4 else "in_progress"
        return Poll(done == 4, status, counts, {"id": remote_id})

    async def results(self, poll: Poll) -> list[ItemResult]:
        ids = [c for b in self.store.load() if b.remote_id == poll.detail["id"] for c, _ in b.items]
        return [ItemResult(c, error=BadRequest("not the point here", status=400)) for c in ids]


async def _watched(api: CountingApi, tmp_path: Path) -> tuple[BatchRunner, list[str]]:
    """12 requests through ``api`` (3 batches), polled every 60 s on a fake wall clock; the
    line each refresh halfway through a wait shows."""
    now = [1000.0]
    lines: list[str] = []

    async def sleep(seconds: float) -> None:
        now[0] += seconds / 2
        lines.append(runner.describe())  # the line a refresh halfway through the wait shows
        now[0] += seconds / 2

    runner = _runner(api, sleep=sleep, wall_clock=lambda: now[0], results=tmp_path)
    for i in range(12):
        await runner.add(spec(i), now[0])
    await runner.finish()
    return runner, lines


def _runner(
    api: RecordingApi, *, results: Path = Path("/nonexistent"), **options: Any
) -> BatchRunner:
    """A runner of endpoint ``ep`` over ``api`` (its store), polling every 60 s."""
    options.setdefault("sleep", _never)
    return BatchRunner(
        endpoint="ep",
        api=api,
        store=api.store,
        results_path=results / "results.jsonl",
        deliver=_ignore,
        body=lambda s: {"size": 1},
        poll_s=60.0,
        max_requests=None,
        **options,
    )


async def test_the_line_names_the_batches_their_counts_and_the_wait(tmp_path: Path) -> None:
    runner, lines = await _watched(CountingApi(BatchStore(tmp_path)), tmp_path)
    assert lines[0] == (
        "3 batches open, 3/12 requests done, oldest sent 30 s ago, next poll in 30 s: remote-1 "
        "in_progress 1/4, remote-2 in_progress 1/4, +1 more"
    )
    assert lines[1].startswith(
        "3 batches open, 6/12 requests done, oldest sent 2 min ago, next poll in 30 s: "
    )
    assert lines[1].endswith(": remote-1 in_progress 2/4, remote-2 in_progress 2/4, +1 more")
    assert len(lines) == 3  # ended at the fourth poll
    assert runner.describe() == "batch mode"  # all collected


def test_one_batch_being_sent() -> None:
    runner = _runner(RecordingApi(BatchStore(Path("/nonexistent")), 4, 10**9))
    runner.batches.append(BatchState("ep-00001", "ep", "openai", [("a", "a")], 0.0))
    assert runner.describe() == "1 batch open, 0/1 requests done: ep-00001 sending"


def _ignore(*args: Any, **kwargs: Any) -> None:
    return None


async def _never(seconds: float) -> None:
    raise AssertionError("not waited here")


class LongIdApi(CountingApi):
    """Provider ids as long as OpenAI's (``batch_`` and 32 hex digits, 38 characters)."""

    async def submit(self, batch: BatchState, lines: list[bytes], on_upload: Any) -> str:
        await super().submit(batch, lines, on_upload)
        return f"batch_{len(self.created):032x}"


async def test_an_80_column_terminal_shows_the_wait_whatever_the_ids(tmp_path: Path) -> None:
    # A terminal cuts the status line under a bar at its width (tqdm trims it); with the
    # ids first, two provider ids pushed "oldest sent" and "next poll" past 80 columns, so a
    # run waiting for hours showed neither. The line sits under the bar, indented by two.
    _, lines = await _watched(LongIdApi(BatchStore(tmp_path)), tmp_path)
    shown = [("  " + line)[:80] for line in lines]
    assert shown[0].startswith("  3 batches open, 3/12 requests done, oldest sent 30 s ago, next")
    assert all("next poll in 30 s" in line for line in shown), shown


def test_counts_carry_thousands_separators() -> None:
    # As the records' counts in the same line do (1,200/2,700 records).
    runner = _runner(RecordingApi(BatchStore(Path("/nonexistent")), 4, 10**9))
    items = [(f"r{i}", f"r{i}") for i in range(12_000)]
    runner.batches.append(BatchState("ep-00001", "ep", "openai", items, 0.0))
    assert runner.describe() == "1 batch open, 0/12,000 requests done: ep-00001 sending"


class OneFailsApi(CountingApi):
    """Every batch ends at its first poll; of the first, one item fails retryably (a 500)."""

    async def poll(self, remote_id: str) -> Poll:
        return Poll(True, "completed", {"total": 4, "completed": 4, "failed": 0}, {"id": remote_id})

    async def results(self, poll: Poll) -> list[ItemResult]:
        [batch] = [b for b in self.store.load() if b.remote_id == poll.detail["id"]]
        first = batch.items[0][0]
        return [
            ItemResult(c, error=ServerError("overloaded", status=500) if c == first else None)
            for c, _ in batch.items
        ]


async def test_the_resubmission_line_counts_its_requests_in_words(tmp_path: Path) -> None:
    store = BatchStore(tmp_path)
    said = io.StringIO()
    runner = _runner(OneFailsApi(store), results=tmp_path, sleep=_no_wait, stream=said)
    for i in range(4):
        await runner.add(spec(i), 0.0)
    await runner.finish()
    lines = said.getvalue().splitlines()
    assert lines[0] == (
        "cotaudit: endpoint 'ep': 1 request of batch remote-1 did not run or failed retryably "
        "(completed); sending it in a new batch"
    )


async def _no_wait(seconds: float) -> None:
    return None
