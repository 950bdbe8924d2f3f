"""One batch-mode endpoint of a run: requests into batches, batches into the stream.

The engine's dispatcher walks the plan and looks every request up in the cache, as for an
online endpoint; a miss is handed to :meth:`BatchRunner.add` instead of a worker. Misses
fill a batch up to the provider's limits (requests and bytes; ``batch_max_requests`` lower
still); a full batch is written to ``RUN/batches/`` and then submitted. When the plan is
walked, the last batch is submitted and every open batch polled every ``batch_poll_s``
until it ends; its results are delivered (:class:`Deliver`: the engine writes the same
response record an online answer gets, with ``via: "batch"``, and fills the cache).

A resumed run first reads ``RUN/batches/``: requests of a batch that is not done are never
put in a new batch; the batch is polled (or, if its create call was cut off, looked for at
the provider) and its results written once. Items a batch did not run (it expired), and
items answered with a retryable error (5xx, 429, overloaded), go into a follow-up batch, up
to ``BATCH_ROUNDS`` rounds in all; then, like a cancelled batch's items and permanent
errors, they are written as error records, which ``--retry-errors`` sends again. An OpenAI
batch that failed as a whole (no line at fault: the enqueued-token limit) is sent again, the
same file, once another batch of the endpoint has ended; one that fails so while none of the
endpoint's other batches is open has its items written as :class:`BatchRefused` errors.

A batch found at the provider after a create call failed is never another run's: OpenAI's
is matched by its input file and nonce; Anthropic's, matched by size and time only, is
checked against its results' custom ids (which carry the batch's nonce) before any is
written, and if it is not this one, nothing of it is written and the batch is sent again.
"""

from __future__ import annotations

import asyncio
import functools
import random
import sys
import time
from collections.abc import Awaitable, Callable
from contextlib import aclosing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, TypeVar

from cotaudit.errors import UsageError
from cotaudit.schema import JSONDict, iter_records
from cotaudit.terminal import duration
from runner.batch.apis import BYTES_MARGIN, BatchApi, ItemResult, OpenAIBatchApi, Poll
from runner.batch.custom_ids import custom_id_for
from runner.batch.store import BatchState, BatchStore, new_nonce
from runner.config import RetrySettings
from runner.providers.base import (
    BadRequest,
    MalformedResponse,
    NotFound,
    ProviderError,
    ProviderResult,
    ServerError,
)
from runner.request_spec import RequestSpec
from runner.resume import DigestSet
from runner.retry import RetryPolicy, call_with_retries

T = TypeVar("T")

BATCH_ROUNDS = 3  # submissions of one request (expired or retryable items are resubmitted)
DESCRIBED_BATCHES = 2  # batches the progress line names (the oldest); the rest are counted
# Results written between two turns of the event loop (in which the writer drains them): at
# most this many, of at most this many bytes of results lines.
ITEMS_PER_YIELD = 256
YIELD_BYTES = 2**20


class BatchExpired(ServerError):
    """The batch ended (expired) before this item ran, in every round it was sent."""

    family = "expired"


class BatchCancelled(ProviderError):
    """The batch was cancelled before this item ran; ``--retry-errors`` sends it again."""

    family = "cancelled"


class BatchRefused(ServerError):
    """The provider failed the whole batch for none of its lines (the enqueued-token limit)
    while no other batch of the endpoint was open to wait for; ``--retry-errors`` sends it
    again."""

    family = "refused"


class ResultsUnreadable(MalformedResponse):
    """A batch's results were not JSON lines of results however often downloaded (a file
    damaged at the provider, or every transfer of it cut): the batch stays ``ended``, and
    a rerun downloads them again."""


class BatchesGone(UsageError):
    """Batches of a run the provider does not have (404): what each endpoint's are, their
    state files, and what to do. Raised by an endpoint once it has collected its other
    batches; the engine lets the run's other endpoints finish, then raises one for all of
    them (:meth:`of`), so that one rerun cannot stop at the next endpoint's."""

    def __init__(self, whats: list[str], files: list[str], requests: int) -> None:
        self.whats, self.files, self.requests = whats, files, requests
        super().__init__(
            "; ".join(whats),
            where=", ".join(files),
            fix="If they were sent with another API key or base_url, set those back and rerun "
            "to collect them. If the provider no longer has them (deleted, or past its "
            f"retention), delete those state files and rerun: their {requests} requests go "
            "into new batches (paid again)",
        )

    @classmethod
    def of(cls, errors: list[BatchesGone]) -> BatchesGone:
        """The errors of several endpoints as one."""
        return cls(
            [w for e in errors for w in e.whats],
            [f for e in errors for f in e.files],
            sum(e.requests for e in errors),
        )


class Deliver(Protocol):
    """The engine's side: write one item's record (and fill the cache)."""

    def __call__(
        self,
        spec: RequestSpec,
        result: ProviderResult | None,
        error: ProviderError | None,
        *,
        queued_at: float,
        submitted_at: float,
    ) -> None: ...


@dataclass(slots=True)
class _Building:
    items: list[tuple[str, RequestSpec, bytes]] = field(default_factory=list)
    nbytes: int = 0
    queued_at: float = 0.0
    nonce: str = field(default_factory=new_nonce)  # its custom ids carry it (Anthropic)


class BatchRunner:
    """Batches of one endpoint; see the module docstring."""

    def __init__(
        self,
        *,
        endpoint: str,
        api: BatchApi,
        store: BatchStore,
        results_path: Path,
        deliver: Deliver,
        body: Callable[[RequestSpec], JSONDict],
        poll_s: float,
        max_requests: int | None,
        sleep: Callable[[float], Awaitable[None]],
        room: Callable[[], Awaitable[None]] = lambda: asyncio.sleep(0),
        wall_clock: Callable[[], float] = time.time,
        stopping: Callable[[], bool] = lambda: False,
        stream: Any = None,
        policy: RetryPolicy | None = None,
        clock: Callable[[], float] = time.monotonic,
        rng: random.Random | None = None,
        on_retry: Callable[[], None] = lambda: None,
    ) -> None:
        self.endpoint = endpoint
        self.api = api
        self.store = store
        self.results_path = results_path
        self.deliver = deliver
        self.body = body
        self.poll_s = poll_s
        self.max_requests = min(max_requests or api.max_requests, api.max_requests)
        self.max_bytes = int(api.max_bytes * BYTES_MARGIN)
        self.sleep = sleep
        # Awaited between runs of results delivered: a turn for the writer, and a wait while
        # the response cache is behind with their stores (ResponseCache.room).
        self.room = room
        self.wall_clock = wall_clock
        self.stopping = stopping
        self._stream = stream
        self.policy = policy or RetryPolicy.from_settings(RetrySettings())
        self.clock = clock
        self.rng = rng or random.Random()
        # Told of every batch API call tried again (the engine counts it in the run's
        # retries): a download of damaged results may be retried for minutes.
        self.on_retry = on_retry
        self.batches: list[BatchState] = []  # this endpoint's open ones, loaded and new
        # Request ids in batches an earlier run sent and did not finish (12 bytes each).
        self.claimed = DigestSet()
        self._building = _Building()
        self._next = 0
        self.submitted = 0  # batches created at the provider by this run
        self.cancelled = 0  # batches this run asked the provider to cancel
        # False once the run cancels its batches: failed items are written, never resent.
        self.resubmit = True
        # Batches that failed as a whole, oldest first, each sent again once another of the
        # endpoint's batches has ended (``_room`` counts those ends).
        self._deferred: list[BatchState] = []
        self._room = 0
        # Local ids of batches last sent while no other batch of the endpoint was open.
        self._alone: set[str] = set()
        # For the progress line: requests each batch has done by its last poll (local id ->
        # count), and when the wait between polls ends (wall clock).
        self._done: dict[str, int] = {}
        self._next_poll_at: float | None = None

    @property
    def at_provider(self) -> int:
        """Batches sent and not seen ended: what a run that stops now leaves running, and
        billed, at the provider (an ended one has run; a rerun collects it all the same)."""
        return sum(b.state == "submitted" for b in self.batches)

    # -- start ---------------------------------------------------------------------------

    def load(self) -> None:
        """Read this endpoint's batches from the run directory (before the plan is walked)."""
        every = self.store.load()
        self._next = 1 + max((_number(b.local_id) for b in every), default=0)
        # Only the open ones stay in memory: a done batch's items are needed no more.
        self.batches = [b for b in every if b.endpoint == self.endpoint and b.open]
        self.claimed = DigestSet.of(request_id for b in self.batches for _, request_id in b.items)

    # -- building ------------------------------------------------------------------------

    async def add(self, spec: RequestSpec, queued_at: float) -> None:
        """A planned request the cache did not have: into a batch (one of an earlier run's
        open batches holds it already: the engine does not hand those over)."""
        building = self._building
        body = self.body(spec)
        custom_id = custom_id_for(spec.request_id, self.api.name, building.nonce)
        line = self.api.line(custom_id, body)
        if len(line) + 1 > self.max_bytes:
            # Alone in a batch it would still be refused (413) on every rerun.
            raise UsageError(
                f"request {spec.request_id} is {len(line):,} bytes as a batch line, over the "
                f"{self.max_bytes:,} bytes a {self.api.name} batch may carry",
                where=f"endpoint {self.endpoint!r}",
                fix="Shorten its prompt, or send it through an endpoint with "
                'mode = "online"; the batches sent before it are kept for a rerun',
            )
        if building.items and (
            len(building.items) >= self.max_requests
            or building.nbytes + len(line) + 1 > self.max_bytes
        ):
            await self._submit_building()
            building = self._building  # another nonce (a custom id of the same length)
            custom_id = custom_id_for(spec.request_id, self.api.name, building.nonce)
            line = self.api.line(custom_id, body)
        if not building.items:
            building.queued_at = queued_at
        building.items.append((custom_id, spec, line))
        building.nbytes += len(line) + 1

    async def _submit_building(self, round_: int = 1) -> None:
        building, self._building = self._building, _Building()
        if not building.items:
            return
        ids = [custom_id for custom_id, _, _ in building.items]
        if len(set(ids)) != len(ids):  # a shared custom id would mix two requests' results
            raise RuntimeError(f"endpoint {self.endpoint!r}: two requests share a custom_id")
        batch = BatchState(
            local_id=f"{self.endpoint}-{self._next:05d}",
            endpoint=self.endpoint,
            api=self.api.name,
            items=[(custom_id, spec.request_id) for custom_id, spec, _ in building.items],
            queued_at=building.queued_at,
            round=round_,
            nonce=building.nonce,
        )
        self._next += 1
        self.store.save_requests(batch.local_id, [spec for _, spec, _ in building.items])
        self.store.save(batch)  # prepared: on disk before anything is sent
        self.batches.append(batch)
        await self._create(batch, [line for _, _, line in building.items])

    async def _retrying(self, attempt: Callable[[], Awaitable[T]]) -> T:
        """A batch API call with the run's retry policy (429, 5xx, timeouts, resets); every
        attempt after the first is counted as it starts (``on_retry``), as an online
        request's resend is, so the progress line shows retries while they happen."""
        first = True

        async def counted() -> T:
            nonlocal first
            if not first:
                self.on_retry()
            first = False
            return await attempt()

        return await call_with_retries(
            counted, self.policy, outcomes=[], sleep=self.sleep, clock=self.clock, rng=self.rng
        )

    def _open_elsewhere(self, batch: BatchState) -> bool:
        """Whether another batch of the endpoint is at the provider (sent, not collected)."""
        return any(b is not batch and b.state in ("submitted", "ended") for b in self.batches)

    async def _create(self, batch: BatchState, lines: list[bytes]) -> None:
        batch.state, batch.submitting_at = "submitting", self.wall_clock()
        self.store.save(batch)
        if self._open_elsewhere(batch):
            self._alone.discard(batch.local_id)
        else:
            self._alone.add(batch.local_id)

        def uploaded(file_id: str) -> None:
            batch.input_file_id = file_id
            self.store.save(batch)

        tried = False

        async def attempt() -> str:
            # A create call that timed out or was cut off may have created the batch: look
            # for it before sending it again, as a resumed run does.
            nonlocal tried
            if tried:
                claimed = {b.remote_id for b in self.store.load() if b.remote_id}
                found = await self.api.find_submitted(batch, claimed)
                if found is not None:
                    batch.notes.append("found at the provider after a failed create call")
                    batch.unverified = not self.api.identifies_batches
                    return found
            tried = True
            return await self.api.submit(batch, lines, uploaded)

        batch.remote_id = await self._retrying(attempt)
        batch.state, batch.submitted_at = "submitted", self.wall_clock()
        self.store.save(batch)
        self.submitted += 1

    # -- cancelling ----------------------------------------------------------------------

    async def cancel_open(self) -> None:
        """Stop every open batch of this endpoint (``cotaudit run --cancel-batches``), before
        :meth:`finish` collects them: a running batch is cancelled at the provider (what it
        finished is still written, the rest as ``BatchCancelled`` errors); a batch whose
        create call never got through is not sent, and its items are written as
        ``BatchCancelled`` at once; nothing is resubmitted. A batch the provider cannot cancel
        any more (ended, being cancelled, OpenAI's ``finalizing``) is left to end."""
        self.resubmit = False
        claimed = {b.remote_id for b in self.store.load() if b.remote_id}
        for batch in list(self.batches):
            if batch.state == "submitting":
                await self._found_at_provider(batch, claimed)
            if batch.state in ("prepared", "submitting"):
                await self._drop_unsent(batch)
            elif batch.state == "submitted":
                if batch.unverified:
                    # Found by size and time only: it may be another run's, which is not
                    # this run's to cancel. Its results show whose it is once it ends.
                    self._say(
                        f"batch {batch.remote_id} was found by its size and creation time only "
                        "and may be another run's: not cancelled; it is collected when it ends"
                    )
                    continue
                try:
                    poll = await self._poll(batch)
                except NotFound:
                    continue  # nothing to cancel: finish names it with what to do
                remote_id = str(batch.remote_id)
                if not poll.cancellable:
                    # Ended, being cancelled or finalizing already: collected as it is.
                    if poll.status == "finalizing":
                        self._say(
                            f"batch {remote_id} is finalizing (every request has run): not "
                            "cancelled; its results are collected when it ends"
                        )
                    continue
                try:
                    await self._retrying(functools.partial(self.api.cancel, remote_id))
                except BadRequest:
                    # It moved on between the poll and the cancel (ended, or began
                    # finalizing), and the provider refuses to cancel it: collected as it is.
                    # Raised, it would stop the endpoint with the other batches not cancelled.
                    if (await self._poll(batch)).cancellable:
                        raise
                    continue
                batch.notes.append("cancelled by cotaudit run --cancel-batches")
                self.store.save(batch)
                self.cancelled += 1
                self._say(f"cancelled batch {remote_id} ({len(batch.items)} requests)")

    async def _drop_unsent(self, batch: BatchState) -> None:
        specs = self.store.load_requests(batch.local_id)
        error = BatchCancelled(f"batch {batch.local_id} was cancelled before it was sent")
        for _, request_id in batch.items:
            # Never sent: the record's sending time is the time it was queued.
            self.deliver(
                specs[request_id],
                None,
                error,
                queued_at=batch.queued_at,
                submitted_at=batch.queued_at,
            )
        await asyncio.sleep(0)  # the writer drains its buffer first: records before "done"
        batch.notes.append("not sent: cancelled by cotaudit run --cancel-batches")
        batch.state = "done"
        self.store.save(batch)
        self.batches.remove(batch)
        self._say(
            f"batch {batch.local_id} was never sent; its {len(batch.items)} requests "
            "are written as cancelled"
        )

    # -- finishing -----------------------------------------------------------------------

    async def flush(self) -> None:
        """Submit the batch being built (the plan is walked)."""
        await self._submit_building()

    async def finish(self) -> None:
        """Submit what is built, then poll every open batch until its results are written
        (or the run stops: the batches stay open for a resume)."""
        await self.flush()
        await self._recover()
        gone: list[tuple[BatchState, NotFound]] = []
        damaged: list[ResultsUnreadable] = []
        while not self.stopping():
            await self._send_deferred()
            pending = [b for b in self.batches if b.state in ("submitted", "ended")]
            if not pending:
                break
            for batch in pending:
                if self.stopping():
                    return
                try:
                    await self._advance(batch)
                except NotFound as exc:
                    # Every rerun would stop at the same 404: the batches the provider has
                    # are collected first, then the run names the ones it has not.
                    self.batches.remove(batch)
                    gone.append((batch, exc))
                    self._say(
                        f"batch {batch.remote_id} ({batch.local_id}) is unknown to "
                        f"{self.api.client.base_url} ({exc.message}); the run collects the "
                        "other batches, then stops naming it"
                    )
                except ResultsUnreadable as exc:
                    # It stays "ended" for a rerun, which downloads its results again. The
                    # endpoint's other batches are collected first: one damaged file must
                    # not hold them up on every rerun.
                    self.batches.remove(batch)
                    damaged.append(exc)
                    self._say(
                        f"the results of batch {batch.remote_id} ({batch.local_id}) could not "
                        "be read; the run collects the other batches, then stops"
                    )
            if any(b.state in ("submitted", "ended") for b in self.batches) and not self.stopping():
                self._next_poll_at = self.wall_clock() + self.poll_s
                await self.sleep(self.poll_s)
                self._next_poll_at = None
        if gone and not self.stopping():
            raise self._gone_error(gone)
        if damaged and not self.stopping():
            raise ResultsUnreadable("; ".join(exc.message for exc in damaged))

    def _gone_error(self, gone: list[tuple[BatchState, NotFound]]) -> BatchesGone:
        """Batches (or their result files) the provider answers 404 for: sent with another
        key or to another server, or deleted there. Not sent again by themselves: with the
        key that sent them, they may still run and be paid for."""
        names = ", ".join(f"{b.remote_id} ({b.local_id})" for b, _ in gone)
        return BatchesGone(
            [
                f"endpoint {self.endpoint!r}: {len(gone)} of its batches are unknown to "
                f"{self.api.client.base_url}: {names} ({gone[0][1].message}); the results of "
                "the others are written"
            ],
            [str(self.store.directory / f"{b.local_id}.json") for b, _ in gone],
            sum(len(b.items) for b, _ in gone),
        )

    async def _send_deferred(self) -> None:
        """Send again batches that failed as a whole: one for each of the endpoint's batches
        that has ended since, and one in any case when none is open (sent alone, it either
        passes or has its items written as errors)."""
        while self._deferred and not self.stopping():
            if any(b.state in ("submitted", "ended") for b in self.batches):
                if self._room <= 0:
                    return
                self._room -= 1
            await self._resend(self._deferred.pop(0))

    async def _recover(self) -> None:
        """Batches a crash left before or inside their create call."""
        claimed = {b.remote_id for b in self.store.load() if b.remote_id}
        for batch in self.batches:
            if batch.state == "submitting" and await self._found_at_provider(batch, claimed):
                continue
            if batch.state in ("prepared", "submitting"):
                await self._resend(batch)

    async def _found_at_provider(self, batch: BatchState, claimed: set[str]) -> bool:
        """Whether a batch left in ``submitting`` exists at the provider; if so, it is
        ``submitted`` from now on (and its id claimed)."""
        found = await self._find(batch, claimed)
        if found is None:
            return False
        batch.remote_id, batch.state = found, "submitted"
        batch.submitted_at = batch.submitted_at or batch.submitting_at
        batch.unverified = not self.api.identifies_batches
        batch.notes.append("found at the provider after an interrupted create")
        self.store.save(batch)
        claimed.add(found)
        return True

    async def _resend(self, batch: BatchState) -> None:
        """Create a batch whose create call never got through, from its stored items."""
        specs = self.store.load_requests(batch.local_id)
        lines = [
            self.api.line(custom_id, self.body(specs[request_id]))
            for custom_id, request_id in batch.items
        ]
        await self._create(batch, lines)

    async def _advance(self, batch: BatchState) -> None:
        if batch.state == "submitted":
            poll = await self._poll(batch)
            if batch.status != poll.status:
                batch.status = poll.status
                self.store.save(batch)
            if not poll.ended:
                return
            batch.state, batch.ended_at = "ended", self.wall_clock()
            self.store.save(batch)
        if batch.state == "ended":
            await self._download(batch, await self._poll(batch))

    async def _poll(self, batch: BatchState) -> Poll:
        remote_id = batch.remote_id
        assert remote_id is not None, "a submitted batch has its provider id"
        poll = await self._retrying(lambda: self.api.poll(remote_id))
        self._done[batch.local_id] = poll.done
        return poll

    async def _find(self, batch: BatchState, claimed: set[str]) -> str | None:
        return await self._retrying(lambda: self.api.find_submitted(batch, claimed))

    async def _download(self, batch: BatchState, poll: Poll) -> None:
        failed: ProviderError | None = None  # the error of every item of a failed batch
        if isinstance(self.api, OpenAIBatchApi) and poll.status == "failed":
            failure, whole = self.api.failure(poll), self.api.failed_as_a_whole(poll)
            if whole and self.resubmit and batch.local_id not in self._alone:
                self._defer(batch, failure)
                return
            failed = self._failed_error(batch, failure, whole=whole)
        if batch.unverified:
            try:
                ours = await self._ours(batch, poll)
            except MalformedResponse as exc:
                raise self._unreadable(batch, exc, 0) from exc
            if not ours:
                await self._reject(batch)
                return
            batch.unverified = False  # its results are this batch's (saved with the offset)
        # Where this batch's records start: a resume after a stop in the middle of writing
        # them (a crash mid-download, or a download that failed for good) reads from here
        # which are in the stream already, downloads the results again and writes the rest.
        offset = self.results_path.stat().st_size if self.results_path.exists() else 0
        written = self._written_since(batch)
        batch.notes.append(f"results written from stream offset {offset}")
        self.store.save(batch)
        positions = {custom_id: i for i, (custom_id, _) in enumerate(batch.items)}
        handled = bytearray(len(batch.items))  # 1: delivered, or held for a new batch
        again: list[RequestSpec] = []
        queued_at = batch.queued_at
        submitted_at = batch.submitted_at or batch.queued_at
        specs = self.store.load_requests(batch.local_id)
        resend = self.resubmit and batch.round < BATCH_ROUNDS
        delivered = 0

        def take(index: int, item: ItemResult | None) -> None:
            nonlocal delivered
            handled[index] = 1
            request_id = batch.items[index][1]
            if request_id in written:
                return
            spec = specs[request_id]
            result, error = self._outcome(batch, item, failed, poll)
            if error is not None and resend and _resubmit(error, item):
                again.append(spec)
                return
            self.deliver(spec, result, error, queued_at=queued_at, submitted_at=submitted_at)
            delivered += 1

        finished: set[str] = set()  # result files read to their end

        async def attempt() -> None:
            # Each result is written as its line arrives (in the provider's order, which
            # the stream's contract allows), so memory holds a line, not the file. A
            # download tried again after a cut skips what the cut one delivered.
            taken = held = 0
            async with aclosing(self.api.stream_results(poll, finished)) as items:
                async for item in items:
                    index = positions.get(item.custom_id)
                    if index is None or handled[index]:
                        continue  # not this batch's (a verified one), or a repeated line
                    take(index, item)
                    taken, held = taken + 1, held + item.size
                    # Lines already received are read without a turn of the event loop, so
                    # the writer (which drains once a turn) would hold them all.
                    if held >= YIELD_BYTES or taken % ITEMS_PER_YIELD == 0:
                        held = 0
                        await self.room()

        try:
            await self._retrying(attempt)
        except MalformedResponse as exc:
            raise self._unreadable(batch, exc, delivered) from exc
        for index in range(len(batch.items)):
            if not handled[index]:
                take(index, None)
        await asyncio.sleep(0)  # the writer drains its buffer first: records before "done"
        batch.state = "done"
        self.store.save(batch)
        self.batches.remove(batch)
        if failed is None:
            self._room += 1  # its place in the provider's queue is free for a deferred batch
        if again and not self.stopping():
            n = len(again)
            self._say(
                f"{n:,} request{'s' if n != 1 else ''} of batch {batch.remote_id} did not run "
                f"or failed retryably ({poll.status}); sending {'them' if n != 1 else 'it'} "
                "in a new batch"
            )
            for spec in again:
                custom_id = custom_id_for(spec.request_id, self.api.name, self._building.nonce)
                line = self.api.line(custom_id, self.body(spec))
                self._building.items.append((custom_id, spec, line))
            self._building.queued_at = self.wall_clock()
            await self._submit_building(batch.round + 1)

    def _unreadable(
        self, batch: BatchState, exc: MalformedResponse, written: int
    ) -> ResultsUnreadable:
        """A batch's results still malformed when the retry policy gave up downloading them."""
        return ResultsUnreadable(
            f"the results of batch {batch.remote_id} ({batch.local_id}) could not be read, "
            f"downloaded as often as the [retry] policy allows (the last time: {exc.message}); "
            f"{written:,} of its {len(batch.items):,} results were written by this run, the "
            "rest are written once a rerun downloads them again"
        )

    async def _ours(self, batch: BatchState, poll: Poll) -> bool:
        """Whether a batch found by size and time only is this one: every custom id of its
        results is one of this batch's (another run's carry its own nonce). Read through
        once before any result is written, and again to write them: memory holds a line."""
        ours = {custom_id for custom_id, _ in batch.items}

        async def attempt() -> bool:
            async with aclosing(self.api.stream_results(poll, set())) as items:
                async for item in items:
                    if item.custom_id not in ours:
                        return False
            return True

        return await self._retrying(attempt)

    def _failed_error(self, batch: BatchState, failure: str, *, whole: bool) -> ProviderError:
        """The error record of every item of a ``failed`` OpenAI batch not sent again: a
        ``BadRequest`` for a file with lines at fault, else ``BatchRefused``."""
        if not whole:
            return BadRequest(f"batch {batch.remote_id} failed: {failure}")
        alone = " while no other batch of the endpoint was open" if self.resubmit else ""
        self._say(
            f"batch {batch.remote_id} failed as a whole ({failure}){alone}: its "
            f"{len(batch.items)} requests are written as BatchRefused errors"
        )
        fix = (
            " (the batch alone exceeds the limit, or other batches on the key fill it): lower "
            "batch_max_requests, or wait, then rerun with --retry-errors"
            if self.resubmit
            else " (not sent again: --cancel-batches)"
        )
        return BatchRefused(f"batch {batch.remote_id} failed as a whole ({failure}){alone}{fix}")

    def _unsend(self, batch: BatchState, remote_id: str, note: str) -> None:
        """Back to ``prepared``: ``remote_id`` is not (or no longer) where its requests run."""
        batch.rejected.append(remote_id)
        batch.notes.append(note)
        batch.remote_id, batch.state, batch.status = None, "prepared", None
        batch.submitted_at = batch.ended_at = None
        batch.unverified = False
        self.store.save(batch)

    async def _reject(self, batch: BatchState) -> None:
        """A batch taken for this one after a failed create call whose results carry other
        custom ids: another run's. None of it is written; this batch is sent (now)."""
        foreign = str(batch.remote_id)
        self._unsend(
            batch,
            foreign,
            f"batch {foreign} is not this batch (its results carry other custom ids): "
            "none of it written, sent anew",
        )
        self._say(
            f"batch {foreign}, taken for batch {batch.local_id} when its create call went "
            "unanswered, is another run's (its results carry other custom ids): none of its "
            f"results is written; sending the {len(batch.items)} requests of {batch.local_id} now"
        )
        if not self.resubmit:
            await self._drop_unsent(batch)
        elif not self.stopping():
            await self._resend(batch)

    def _defer(self, batch: BatchState, failure: str) -> None:
        """An OpenAI batch that failed as a whole, to be sent again (its input file is still
        at the provider) once another batch of the endpoint has ended."""
        remote_id = str(batch.remote_id)
        self._unsend(
            batch,
            remote_id,
            f"batch {remote_id} failed as a whole ({failure}); sent again once another "
            "batch of the endpoint has ended",
        )
        if not self._deferred:
            self._room = 0  # only the ends from now on free room for it
        self._deferred.append(batch)
        self._say(
            f"batch {remote_id} failed as a whole ({failure}); its {len(batch.items)} "
            "requests are sent again once another of the endpoint's batches has ended"
        )

    def _outcome(
        self,
        batch: BatchState,
        item: ItemResult | None,
        failed: ProviderError | None,
        poll: Poll,
    ) -> tuple[ProviderResult | None, ProviderError | None]:
        if item is None:
            if failed is not None:
                return None, failed
            if poll.status in ("cancelled", "cancelling", "canceling"):
                # Cancelled before its input was read: no file names the items at all.
                return None, BatchCancelled(
                    f"batch {batch.remote_id} was cancelled before this request ran"
                )
            return None, BatchExpired(
                f"batch {batch.remote_id} ended ({poll.status}) without a result for this request"
            )
        if item.unrun == "cancelled":
            return None, BatchCancelled(f"batch {batch.remote_id} was cancelled before it ran")
        if item.unrun == "expired":
            return None, BatchExpired(f"batch {batch.remote_id} expired before it ran")
        return item.result, item.error

    def _written_since(self, batch: BatchState) -> set[str]:
        """Request ids of this batch already written: a run stopped while writing them."""
        offsets = [_number(n.rsplit(" ", 1)[-1]) for n in batch.notes if "stream offset" in n]
        if not offsets or not self.results_path.exists():
            return set()
        ids = set(batch.request_ids())
        found = set()
        with self.results_path.open("rb") as f:
            f.seek(min(offsets))
            for record in iter_records(f, where=str(self.results_path)):
                if record.get("kind") == "response" and record.get("request_id") in ids:
                    found.add(str(record["request_id"]))
        return found

    def describe(self) -> str:
        """The endpoint's batches for the progress line: what a run that may wait for hours
        is waiting for, ``3 batches open, 17/30 requests done, oldest sent 2.1 h ago, next
        poll in 40 s: batch_a in_progress 12/12, batch_b in_progress 5/12, +1 more``.

        The wait comes before the batches: a terminal cuts the status line at its width,
        and two provider ids (OpenAI's are 38 characters) fill most of 80 columns, which
        left a run waiting for hours showing neither how long it had waited nor when it
        would look again. What is cut now is the end of the list of ids."""
        open_ = [b for b in self.batches if b.open]
        if not open_:
            return "batch mode"
        done = sum(self._done.get(b.local_id, 0) for b in open_)
        total = sum(len(b.items) for b in open_)
        shown = [self._one(b) for b in open_[:DESCRIBED_BATCHES]]
        if len(open_) > DESCRIBED_BATCHES:
            shown.append(f"+{len(open_) - DESCRIBED_BATCHES} more")
        plural = "batch" if len(open_) == 1 else "batches"
        parts = [f"{len(open_)} {plural} open", f"{done:,}/{total:,} requests done"]
        now = self.wall_clock()
        sent = [b.submitted_at for b in open_ if b.submitted_at is not None]
        if sent:
            parts.append(f"oldest sent {duration(now - min(sent))} ago")
        if self._next_poll_at is not None:
            parts.append(f"next poll in {duration(self._next_poll_at - now)}")
        return f"{', '.join(parts)}: {', '.join(shown)}"

    def _one(self, batch: BatchState) -> str:
        if batch.remote_id is None or batch.state in ("prepared", "submitting"):
            return f"{batch.local_id} sending"
        status = batch.status or batch.state
        done = self._done.get(batch.local_id)
        counts = f" {done}/{len(batch.items)}" if done is not None else ""
        return f"{batch.remote_id} {status}{counts}"

    def _say(self, text: str) -> None:
        print(f"cotaudit: endpoint {self.endpoint!r}: {text}", file=self._stream or sys.stderr)


def _resubmit(error: ProviderError, item: ItemResult | None) -> bool:
    """Whether an item's failure is one a new batch may cure (it never ran, or a 5xx/429)."""
    if isinstance(error, BatchCancelled | BatchRefused):
        return False
    return isinstance(error, BatchExpired) or error.retryable


def _number(text: str) -> int:
    digits = text.rsplit("-", 1)[-1]
    return int(digits) if digits.isdigit() else 0
