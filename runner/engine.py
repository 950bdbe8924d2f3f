"""The sweep engine: a lazy plan -> cache -> pacing -> retries -> providers -> one stream.

Per endpoint, one *dispatcher* walks the endpoint's lazy plan (``task.problems()`` x
``task.requests(problem, endpoint)``), drops requests of other shards and requests already in
the stream, looks the rest up in the cache a chunk at a time (one hop to the cache thread per
chunk), emits cache hits straight to the writer and puts misses, their request bodies built,
on a bounded queue. A pool of *workers* takes requests off that queue; tenacity runs each
request's attempts, and every attempt waits for the endpoint to be up
(:mod:`runner.outage`), for a slot (:mod:`runner.concurrency`, with ``max_concurrency =
"auto"``) and for the endpoint's pacing (:mod:`runner.pacing`: the configured limits and
what the server's rate-limit headers ask for), then calls the provider. The worker writes the
request's record through the one *writer*. Memory is bounded by the queues, never by the plan.

Problem records (and the task's per-endpoint records) are queued to the writer when the
dispatcher meets the first request of the problem that will be written, i.e. always before the
responses that refer to them, and only once per stream.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import itertools
import random
import signal
import sys
import time
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any, NamedTuple, TypeVar

from cotaudit.constants import (
    AUTH_FAILURES_BEFORE_STOP,
    AUTO_CONCURRENCY_MAX,
    FSYNC_INTERVAL_S,
    SHUTDOWN_GRACE_S,
)
from cotaudit.errors import UsageError
from cotaudit.schema import RESULTS_NAME, JSONDict
from runner.batch.apis import batch_api
from runner.batch.runner import BatchesGone, BatchRunner, ResultsUnreadable
from runner.batch.store import BatchStore
from runner.cache import CachedResponse, ResponseCache
from runner.concurrency import AdaptiveConcurrency
from runner.config import EndpointConfig, SweepConfig
from runner.manifest import (
    Shard,
    check_manifest,
    record_planned_requests,
    write_manifest,
)
from runner.outage import EndpointHealth, EndpointStopped, Probe
from runner.pacing import Cost, Pacing, RateBucket
from runner.preflight import ping_spec
from runner.progress import Counts, Progress, Track
from runner.providers import make_provider
from runner.providers.api_client import ApiClient
from runner.providers.base import (
    AuthError,
    Provider,
    ProviderError,
    ProviderResult,
    RateLimited,
    Timeout,
    read_api_key,
    read_header_values,
)
from runner.providers.served import Served, ServedWatch
from runner.redaction import redact
from runner.request_spec import EndpointIdentity, RequestSpec
from runner.resume import StreamState, endpoint_record_key, scan_stream, truncate_torn_tail
from runner.retry import Clock, Retrier, RetryPolicy, Sleep, attempt_timeout_s
from runner.run_lock import locked_run_dir
from runner.stream_plan import foreign_stream_error, plan_check
from runner.tasks.registry import Task
from runner.transport import Transport, TransportFactory, default_transport
from runner.writer import RecordWriter, StreamMovedError

CACHE_LOOKUP_CHUNK = 512  # planned requests looked up in the cache per hop to its thread
QUEUE_PER_WORKER = 2  # queued requests per worker: enough to keep workers busy, no more
# Planned requests a run stopped part-way counts on its way out when it did not count its plan
# before the sweep (--quiet): its pending count is exact up to this, and a
# larger plan is not walked to the end, which would hold up the exit for as long.
EXIT_COUNT_MAX_REQUESTS = 20_000
_T = TypeVar("_T")


@dataclass(frozen=True, slots=True)
class RunSummary:
    """What a run did. ``planned`` counts this shard's requests; ``skipped`` those already in
    the stream; ``written`` the response records written now (errors included)."""

    run_dir: Path
    planned: int
    written: int
    skipped: int
    cache_hits: int
    http_requests: int
    retries: int
    errors: int
    elapsed_s: float
    interrupted: bool = False
    stopped_endpoints: tuple[str, ...] = ()
    pending: int = 0  # planned requests neither in the stream before nor written now
    uncached: int = 0  # successful responses whose cache store failed (in the stream all the same)
    probes: int = 0  # requests sent to check on a down endpoint (not in http_requests)
    error_types: Mapping[str, int] = field(default_factory=dict)  # error records written now
    stored_errors: int = 0  # requests whose records were all errors before, not retried now

    @property
    def failed(self) -> int:
        """Requests that failed for good: error records written now, and stored ones left."""
        return sum(self.error_types.values()) + self.stored_errors

    batches: int = 0  # batches submitted to batch APIs by this run
    batches_cancelled: int = 0  # batches this run cancelled (--cancel-batches)
    # Batches at a provider that the run stopped (interrupted, or an endpoint stopped) before
    # they ended: they run on there, and are billed, whatever happens here.
    batches_open: int = 0
    started: bool = True  # False: stopped while its plan was counted, before any send or write
    # False: a run that did not count its plan before the sweep (--quiet) and
    # stopped before its dispatchers had walked all of it, on a plan of more than
    # EXIT_COUNT_MAX_REQUESTS; ``planned`` and ``pending`` then cover only what they walked.
    counted: bool = True
    in_preflight: bool = False  # stopped (not started) during the preflight, not the count

    @property
    def elapsed(self) -> float:
        """Seconds the run took (alias of ``elapsed_s``)."""
        return self.elapsed_s

    def interrupted_line(self) -> str:
        """What a command says after a stopped (``interrupted``) run: what is pending, and
        that rerunning resumes."""
        if self.in_preflight:
            return "interrupted during the preflight, before the sweep sent or wrote anything"
        if not self.started:
            return "interrupted while counting the plan, before anything was sent or written"
        if not self.counted:
            return (
                f"interrupted with {self.written:,} records written now and the rest of the "
                "plan pending (not counted: --quiet); rerun the same command to resume"
            )
        return (
            f"interrupted with {self.pending:,} of {self.planned:,} planned requests pending; "
            "rerun the same command to resume"
        )

    def lines(self) -> tuple[str, ...]:
        """The run as ``cotaudit run`` prints it, in two lines that fit a terminal: what the
        stream holds now (planned, written, already done, pending, errors), then how it got
        there (its time, the cache, HTTP requests, retries, and what else happened).

        Every count reads ``N label`` with thousands separators, as the progress lines print
        them. The counts a script may read (planned, written, already done, errors, from
        cache, HTTP requests, retries) are there even when zero, always under the same
        label; the others only when they happened. Python reads the fields instead.
        """
        if not self.started:
            return (f"stopped before the sweep started, {self.elapsed_s:.1f} s",)
        # An uncounted plan (--quiet, stopped part-way) only knows a lower bound.
        more = "" if self.counted else "+"
        stream = (
            f"{self.planned:,}{more} planned, {self.written:,} written, "
            f"{self.skipped:,} already done"
        )
        if self.pending or not self.counted:
            # No advice here: `cotaudit run` follows with the interrupted or stopped line,
            # which says why they are pending and how to resume.
            stream += f", {self.pending:,}{more} pending"
        stream += f", {self.errors:,} errors"
        traffic = (
            f"in {self.elapsed_s:,.1f} s: {self.cache_hits:,} from cache, "
            f"{self.http_requests:,} HTTP requests, {self.retries:,} retries"
        )
        if self.probes:
            traffic += f", {self.probes:,} probes of down endpoints"
        if self.batches:
            traffic += f", {self.batches:,} batch{'es' if self.batches != 1 else ''} submitted"
        if self.batches_cancelled:
            n = self.batches_cancelled
            traffic += f", {n:,} batch{'es' if n != 1 else ''} cancelled"
        if self.uncached:
            traffic += f", {self.uncached:,} not cached (the store failed)"
        return stream, traffic

    def line(self) -> str:
        """The run in one line (for a log): :meth:`lines` joined by ``"; "``."""
        return "; ".join(self.lines())


def keep_for_shard(request_id: str, shard: Shard | None) -> bool:
    """``--shard i/N`` keeps a request iff ``int(sha256(request_id), 16) % N == i``."""
    return shard is None or shard.keeps(request_id)


def iter_plan(
    task: Task, identity: EndpointIdentity, shard: Shard | None = None
) -> Iterator[tuple[Any, RequestSpec]]:
    """The endpoint's lazy plan: (problem, spec) in order, restricted to ``shard``."""
    for problem in task.problems():
        for spec in task.requests(problem, identity):
            if keep_for_shard(spec.request_id, shard):
                yield problem, spec


class _Queued(NamedTuple):
    """A request ready to send, as the dispatcher queues it."""

    spec: RequestSpec
    payload: bytes  # the request body
    cost: Cost  # what one attempt costs the endpoint's budgets
    queued_at: float  # wall clock


@dataclass(slots=True)
class _Trace:
    """What the attempts of one request did, for its record."""

    outcomes: list[str] = field(default_factory=list)
    admitted_at: float | None = None  # wall clock: the pacing first let it go
    started_at: float | None = None  # wall clock: its first attempt was sent
    first_sent: float | None = None  # the run's clock, at the same moment
    held_s: float = 0.0  # seconds it waited while its endpoint was down


@dataclass(slots=True)
class _EndpointRun:
    config: EndpointConfig
    counts: Counts
    identity: EndpointIdentity
    provider: Provider
    pacing: Pacing
    health: EndpointHealth
    concurrency: AdaptiveConcurrency | None  # None: a fixed max_concurrency, or batch mode
    queue: asyncio.Queue[_Queued | None]
    # Set by workers when the queue has drained to half: the dispatcher refills it in one
    # go instead of being woken for every single free slot.
    room: asyncio.Event = field(default_factory=asyncio.Event)
    watch: ServedWatch | None = None  # cached answers vs what the server serves now
    # The model a server that answers any name has loaded (preflight read it off the list):
    # what the records say served, since the answer's echo of the name says nothing.
    served_override: str | None = None
    batch: BatchRunner | None = None  # mode = "batch": its batches instead of workers
    batch_failed: bool = False  # a batch API call failed for good
    auth_failures: int = 0
    auth_stopped: bool = False
    held: list[JSONDict] = field(default_factory=list)  # auth failures, written if not stopped
    walked: bool = False  # its dispatcher went through the whole plan: ``counts.planned`` is it

    @property
    def stopped(self) -> bool:
        return self.auth_stopped or self.batch_failed or self.health.stopped

    def slot(self, *, retry: bool = False) -> contextlib.AbstractAsyncContextManager[None]:
        """A slot of the endpoint's "auto" concurrency (none to take at a fixed one, whose
        workers are its slots); ``retry``: a later attempt, served first."""
        if self.concurrency is None:
            return contextlib.nullcontext()
        return self.concurrency.slot(retry=retry)

    def on_wire(self) -> contextlib.AbstractContextManager[None]:
        if self.concurrency is None:
            return contextlib.nullcontext()
        return self.concurrency.sending()

    def describe(self) -> str:
        """The endpoint's adaptive state for the progress line."""
        # An outage first: it is what the user most needs to see, and what a narrow terminal
        # would otherwise cut off.
        parts = [text for text in (self.health.describe(),) if text]
        if self.batch is not None:
            parts.append(self.batch.describe())
        if self.concurrency is not None:
            parts.append(f"concurrency {self.concurrency.current} (auto)")
        parts += [text for text in (self.pacing.describe(),) if text]
        return f"{self.config.name}: {', '.join(parts)}" if parts else ""


def workers_for(config: EndpointConfig) -> int:
    """The worker pool of an endpoint: its fixed concurrency, or the most "auto" may use; 1
    for a batch endpoint, whatever its ``max_concurrency``.

    What this sizes (the workers, the dispatcher's queue, the endpoint's share of the run's
    connection pool) is what online requests need. A batch endpoint has no workers and queues
    nothing (its misses go to its BatchRunner), and its batch calls, one at a time, go through
    a session of its own (ApiClient): on the run's transport it sends only preflight's one
    ping, so one connection is what it needs. Not 0: an asyncio.Queue of maxsize 0 has no
    bound.
    """
    if config.batch:
        return 1
    if config.max_concurrency == "auto":
        return AUTO_CONCURRENCY_MAX
    return int(config.max_concurrency)


def _iso(ts: float) -> str:
    """UTC ISO 8601 with milliseconds: ``2026-11-30T10:20:00.123Z``."""
    return _iso_second(int(ts)) + f".{int(ts % 1 * 1000):03d}Z"


@functools.lru_cache(maxsize=64)
def _iso_second(second: int) -> str:
    # Every request stamps four times, nearly all within the same few seconds: the calendar
    # part is formatted once per second, not four times per request.
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second))


@contextlib.asynccontextmanager
async def _embedded_server_urls(config: SweepConfig) -> AsyncIterator[dict[str, str]]:
    """Start the project's local server when a ``local`` endpoint has no base_url."""
    embedded = [ep.name for ep in config.endpoints if ep.embedded]
    if not embedded:
        yield {}
        return
    from runner.server.lifecycle import running_server

    async with running_server() as server:
        yield {name: server.base_url for name in embedded}


@dataclass(kw_only=True)
class _Sweep:
    """One run of the engine; see :func:`run_sweep`."""

    config: SweepConfig
    task: Task
    retry_errors: bool
    shard: Shard | None
    progress: Progress
    policy: RetryPolicy
    clock: Clock
    wall_clock: Callable[[], float]
    sleep: Sleep
    rng: random.Random
    stop_event: asyncio.Event
    state: StreamState
    writer: RecordWriter
    cache: ResponseCache | NoCache
    transport: Transport
    endpoints: list[_EndpointRun]
    progress_stream: Any = None
    cancel_batches: bool = False  # --cancel-batches: stop the open batches, send nothing new
    stopping: bool = False
    failure: Exception | None = None  # what stopped the run early (a write error)
    # Batch endpoints' batches the provider does not have, raised as one after the sweep.
    gone: list[BatchesGone] = field(default_factory=list)
    retrier: Retrier = field(init=False)  # the policy's strategies, shared by every request

    def __post_init__(self) -> None:
        self.retrier = Retrier(self.policy, sleep=self.sleep, clock=self.clock, rng=self.rng)

    def _already_done(self, request_ids: list[str]) -> list[bool]:
        done = self.state.succeeded.contains_many(request_ids)
        if not self.retry_errors:
            done |= self.state.failed.contains_many(request_ids)
        return done.tolist()  # type: ignore[no-any-return]

    @property
    def counters(self) -> Counts:
        """The whole run's counts (the sum of the endpoints')."""
        return Counts.total_of([ep.counts for ep in self.endpoints])

    def _emit_response(
        self, ep: _EndpointRun, record: JSONDict, *, cached: bool, error: bool
    ) -> None:
        self.writer.put(record)
        counts = ep.counts
        counts.written += 1
        counts.cache_hits += cached
        if error:
            counts.errors += 1
            counts.error_types[str(record["error"]["type"])] += 1

    def _ensure_problem(self, ep: _EndpointRun, problem: Any) -> None:
        pid = problem.problem_id
        if self.state.problems.add(pid):  # not written yet
            self.writer.put(problem.to_record())
        for extra in self.task.endpoint_records(problem, ep.identity):
            key = endpoint_record_key(
                str(extra.get("kind")), ep.identity.name, pid, extra.get("trace")
            )
            if self.state.endpoint_records.add(key):
                self.writer.put(extra)

    async def dispatch(self, ep: _EndpointRun) -> None:
        """Walk the plan; cached answers go to the writer, the rest to the workers.

        The plan is taken ``CACHE_LOOKUP_CHUNK`` requests at a time: what the stream already
        holds is dropped in one vectorised lookup, and the rest is looked up in the cache in
        one hop to its thread, awaited while the loop has nothing else to do, so the cache
        thread has the interpreter to itself: a lookup running beside the loop's planning had
        to win the GIL back after every SQLite call, and spent most of its time waiting for
        it. The loop gets a turn at least once per chunk, even when all of it is done.
        """
        plan = iter_plan(self.task, ep.identity, self.shard)
        last_problem: str | None = None
        while batch := list(itertools.islice(plan, CACHE_LOOKUP_CHUNK)):
            if self.stopping or ep.stopped:
                return
            ep.counts.planned += len(batch)
            done = self._already_done([spec.request_id for _, spec in batch])
            chunk = []
            for (problem, spec), skip in zip(batch, done, strict=True):
                if skip:
                    continue
                if problem.problem_id != last_problem:
                    last_problem = problem.problem_id
                    self._ensure_problem(ep, problem)
                chunk.append(spec)
            ep.counts.skipped += len(batch) - len(chunk)
            if chunk:
                await self._route(ep, chunk)
            else:
                await asyncio.sleep(0)
        ep.walked = True

    async def _route(self, ep: _EndpointRun, chunk: list[RequestSpec]) -> None:
        if ep.batch is not None and len(ep.batch.claimed):
            # A request in a batch an earlier run sent waits for that batch's result, even
            # if the cache has an answer meanwhile: written once, from what was paid for.
            claimed = ep.batch.claimed.contains_many([spec.request_id for spec in chunk])
            chunk = [spec for spec, sent in zip(chunk, claimed.tolist(), strict=True) if not sent]
        hits = await self.cache.get_many([spec.cache_key for spec in chunk])
        moment = _iso(self.wall_clock())  # a cache hit is queued, sent and answered at once
        queue, room, provider = ep.queue, ep.room, ep.provider
        for spec, hit in zip(chunk, hits, strict=True):
            if hit is None and ep.batch is not None:
                await ep.batch.add(spec, self.wall_clock())
            elif hit is None:
                while queue.full() and not self.stopping:
                    room.clear()
                    await room.wait()
                if self.stopping:
                    return
                ready = _Queued(
                    spec=spec,
                    payload=provider.payload(spec),
                    cost=Cost(
                        input_tokens=spec.estimated_input_tokens(),
                        output_tokens=int(spec.params.get("max_tokens") or 0),
                    ),
                    queued_at=self.wall_clock(),
                )
                queue.put_nowait(ready)
            else:
                if ep.watch is not None:
                    ep.watch.cache_hit(Served(hit.served_model, hit.system_fingerprint))
                record = self._record(
                    spec,
                    hit,
                    None,
                    [],
                    latency_s=0.0,
                    times=(moment, moment, moment, moment),
                    cached=True,
                )
                self._emit_response(ep, record, cached=True, error=False)

    def _record(
        self,
        spec: RequestSpec,
        result: ProviderResult | CachedResponse | None,
        error: ProviderError | None,
        outcomes: list[str],
        *,
        latency_s: float,
        times: tuple[str, str, str, str],  # queued, admitted, started, finished
        cached: bool,
        via: str | None = None,
    ) -> JSONDict:
        queued_at, admitted_at, started_at, finished_at = times
        record = spec.to_record()
        record["kind"] = "response"
        if result is not None:
            record.update(
                served_model=result.served_model,
                system_fingerprint=result.system_fingerprint,
                reasoning=result.reasoning,
                reasoning_tokens=result.reasoning_tokens,
            )
            if result.reasoning_withheld:  # written only where true: absent reads as false
                record["reasoning_withheld"] = True
        if via is not None:
            record["via"] = via
        record.update(
            text=result.text if result is not None else None,
            finish_reason=result.finish_reason if result is not None else None,
            usage=result.usage if result is not None else None,
            latency_s=round(latency_s, 6),
            attempts=len(outcomes),
            attempt_outcomes=outcomes,
            cached=cached,
            queued_at=queued_at,
            admitted_at=admitted_at,
            started_at=started_at,
            finished_at=finished_at,
            error=error.to_record(len(outcomes)) if error is not None else None,
        )
        return record

    async def work(self, ep: _EndpointRun) -> None:
        """One worker: take requests off the endpoint's queue until told to stop."""
        queue, room = ep.queue, ep.room
        low_water = queue.maxsize // 2
        while True:
            ready = await queue.get()
            if queue.qsize() <= low_water and not room.is_set():
                room.set()
            if ready is None:
                return
            if self.stopping or ep.stopped:
                continue  # left pending: a resumed run sends it
            try:
                await self._execute(ep, ready)
            except Exception as exc:  # a record could not be written: stop sending
                self._fail(exc)

    def _fail(self, exc: Exception) -> None:
        """Stop the run for ``exc``: nothing more is sent, what is not written stays pending
        for a resume, and :meth:`run` raises it once in-flight requests are done."""
        self.failure = self.failure or exc
        self.stopping = True
        for ep in self.endpoints:
            ep.room.set()  # a dispatcher waiting for room sees the stop

    async def _execute(self, ep: _EndpointRun, item: _Queued) -> None:
        spec, trace = item.spec, _Trace()

        async def attempt() -> ProviderResult:
            trace.held_s += await ep.health.wait_up()
            # A later attempt's budget is running: it goes ahead of requests not yet sent.
            async with ep.slot(retry=trace.first_sent is not None):
                pace = await ep.pacing.admit(item.cost)
                if trace.admitted_at is None:
                    trace.admitted_at = self.wall_clock()
                # The request's time budget is a hard cap: an attempt gets at most what is
                # left of it (the whole budget before the first send).
                timeout = attempt_timeout_s(self.policy, spent(), ep.config.timeout_s)
                if timeout is not None and timeout <= 0:
                    raise Timeout(
                        f"time budget of {self.policy.time_budget_s:g} s spent", maybe_sent=False
                    )
                sent = self.clock()
                if trace.first_sent is None:
                    trace.first_sent, trace.started_at = sent, self.wall_clock()
                else:
                    # Counted as it is sent, not when the request's record is written: the
                    # progress line shows the 429s being retried while they happen.
                    ep.counts.retries += 1
                ep.counts.http_requests += 1
                error: ProviderError | None = None
                with ep.on_wire():
                    try:
                        if timeout is None:
                            result = await ep.provider.complete(
                                spec, self.transport, payload=item.payload
                            )
                        else:
                            result = await ep.provider.complete(
                                spec, self.transport, payload=item.payload, timeout_s=timeout
                            )
                    except ProviderError as exc:
                        error = exc
            self._observe(ep, sent, pace, error if error is not None else result, error)
            if error is not None:
                raise error
            return result

        def spent() -> float:
            if trace.first_sent is None:
                return 0.0
            return self.clock() - trace.first_sent - trace.held_s

        result: ProviderResult | None = None
        error: ProviderError | None = None
        try:
            result = await self.retrier.call(attempt, outcomes=trace.outcomes, elapsed=spent)
        except ProviderError as exc:
            error = exc
        except EndpointStopped:
            return  # pending: a resumed run sends it
        result = self._served(ep, result)
        if trace.first_sent is None:  # the budget was spent before anything was sent
            trace.first_sent = self.clock()
            trace.started_at = trace.admitted_at = trace.admitted_at or self.wall_clock()
        assert trace.admitted_at and trace.started_at
        latency = self.clock() - trace.first_sent
        record = self._record(
            spec,
            result,
            error,
            trace.outcomes,
            latency_s=latency,
            times=(
                _iso(item.queued_at),
                _iso(trace.admitted_at),
                _iso(trace.started_at),
                _iso(self.wall_clock()),
            ),
            cached=False,
        )
        if isinstance(error, AuthError):
            self._auth_failure(ep, record, error)
            return
        self._store(ep, spec, result)
        self._emit_response(ep, record, cached=False, error=error is not None)

    def _served(self, ep: _EndpointRun, result: ProviderResult | None) -> ProviderResult | None:
        """``result`` with what served it as the records and the cache keep it; the watch
        sees it first."""
        if result is None:
            return None
        if ep.served_override is not None:
            result = dataclasses.replace(result, served_model=ep.served_override)
        if ep.watch is not None:
            ep.watch.answered(Served(result.served_model, result.system_fingerprint))
        return result

    def _store(self, ep: _EndpointRun, spec: RequestSpec, result: ProviderResult | None) -> None:
        if result is None:
            return
        self.cache.put(
            spec.cache_key,
            CachedResponse(
                text=result.text,
                finish_reason=result.finish_reason,
                usage=result.usage,
                served_model=result.served_model,
                system_fingerprint=result.system_fingerprint,
                reasoning=result.reasoning,
                reasoning_tokens=result.reasoning_tokens,
                reasoning_withheld=result.reasoning_withheld or None,
            ),
        )

    def deliver_batch_item(
        self,
        ep: _EndpointRun,
        spec: RequestSpec,
        result: ProviderResult | None,
        error: ProviderError | None,
        *,
        queued_at: float,
        submitted_at: float,
    ) -> None:
        """A batch item's result: the record an online answer gets, ``via: "batch"``."""
        result = self._served(ep, result)
        now = self.wall_clock()
        outcome = "ok" if error is None else error.outcome
        record = self._record(
            spec,
            result,
            error,
            [outcome],
            latency_s=max(now - submitted_at, 0.0),
            times=(_iso(queued_at), _iso(submitted_at), _iso(submitted_at), _iso(now)),
            cached=False,
            via="batch",
        )
        self._store(ep, spec, result)
        self._emit_response(ep, record, cached=False, error=error is not None)

    def _observe(
        self,
        ep: _EndpointRun,
        sent: float,
        pace: RateBucket | None,
        answer: ProviderResult | ProviderError,
        error: ProviderError | None,
    ) -> None:
        """What one attempt's outcome tells the endpoint's pacing, slots and health.

        The server's headers pace every endpoint; only an ``auto`` one adapts its slots, and
        learns a pace from 429s without headers, to what the server does.
        """
        ep.pacing.observe(answer.budgets)
        ep.health.observe(error)
        if ep.concurrency is None:
            return  # a fixed max_concurrency: the user's choice, not adapted
        if error is None:
            ep.pacing.answered()
            ep.concurrency.succeeded(sent, self.clock() - sent)
        elif isinstance(error, RateLimited):
            if not error.budgets:
                ep.pacing.refused(pace, error.retry_after_s)
            ep.concurrency.rate_limited(sent)

    def _auth_failure(self, ep: _EndpointRun, record: JSONDict, error: AuthError) -> None:
        """Count an authentication failure; held back, and written only if the endpoint is
        not stopped (a stopped endpoint's requests stay pending for a resume). It counts as
        an error only once written (``_emit_response``): the summary's errors are the error
        records in the stream, and a stopped endpoint's held failures are pending, not
        errors."""
        ep.auth_failures += 1
        if ep.stopped:
            return
        ep.held.append(record)
        if ep.auth_failures >= AUTH_FAILURES_BEFORE_STOP:
            ep.auth_stopped = True
            ep.held.clear()
            key_env = f"${ep.config.api_key_env}" if ep.config.api_key_env else "the endpoint"
            print(
                redact(
                    f"cotaudit: endpoint {ep.config.name}: {ep.auth_failures} authentication "
                    f"failures ({error.message}); stopped sending to it. Check the key in "
                    f"{key_env} and rerun to resume."
                ),
                file=sys.stderr,
                flush=True,
            )

    async def run_batch_endpoint(self, ep: _EndpointRun, batch: BatchRunner) -> None:
        """A ``mode = "batch"`` endpoint: the plan's misses into batches, then their results;
        with ``--cancel-batches``, its open batches stopped and collected, the plan unwalked."""
        batch.load()
        try:
            if self.cancel_batches:
                await batch.cancel_open()
            else:
                await self.dispatch(ep)
            if not self.stopping:
                await batch.finish()
        except BatchesGone as exc:
            # Batches the provider does not have: raised once the run's other endpoints are
            # done (run), with theirs. Stopping the run here, as another failure does, left
            # the other endpoints' batches uncollected and their own lost ones unnamed, for
            # the next rerun to stop at.
            self.gone.append(exc)
        except ProviderError as exc:
            # A batch call failed for good (the key, the quota, the route), or a batch's
            # results could not be read: what is sent stays in RUN/batches for a resume;
            # nothing is lost.
            what = (
                exc.message
                if isinstance(exc, ResultsUnreadable)
                else f"the batch API refused a call ({exc.message})"
            )
            print(
                f"cotaudit: endpoint {ep.config.name!r}: {what}; its batches so far are kept "
                f"in {batch.store.directory}, rerun to resume.",
                file=sys.stderr,
                flush=True,
            )
            ep.batch_failed = True
        except Exception as exc:
            self._fail(exc)

    async def run_endpoint(self, ep: _EndpointRun) -> None:
        if ep.batch is not None:
            await self.run_batch_endpoint(ep, ep.batch)
            return
        if self.cancel_batches:
            return  # an online endpoint has no batch to cancel, and nothing new is sent
        workers = [
            asyncio.create_task(self.work(ep), name=f"cotaudit-worker-{ep.config.name}-{i}")
            for i in range(workers_for(ep.config))
        ]
        try:
            try:
                await self.dispatch(ep)
            except Exception as exc:  # a cache hit's record could not be written
                self._fail(exc)
            for _ in workers:
                await ep.queue.put(None)
            await asyncio.gather(*workers)
        except BaseException:
            # Cancelled after the grace period, or a write failed: in-flight requests are
            # abandoned and stay pending; never wait on a full queue or a slow server here.
            for worker in workers:
                worker.cancel()
            await asyncio.gather(*workers, return_exceptions=True)
            raise
        finally:
            await ep.health.close()
        if not ep.stopped:
            for record in ep.held:
                self._emit_response(ep, record, cached=False, error=True)
            ep.held.clear()

    async def run(self) -> bool:
        """Run every endpoint; returns True when interrupted by ``stop_event``."""
        main = asyncio.create_task(
            _gather(*(self.run_endpoint(ep) for ep in self.endpoints)), name="cotaudit-sweep"
        )
        stop_wait = asyncio.create_task(self.stop_event.wait(), name="cotaudit-stop")
        ticker = asyncio.create_task(self._tick(), name="cotaudit-progress")
        try:
            await asyncio.wait({main, stop_wait}, return_when=asyncio.FIRST_COMPLETED)
            interrupted = not main.done()
            if interrupted:
                self.stopping = True
                # In-flight requests get a grace period; then the rest is cancelled and
                # stays pending for a resume.
                with contextlib.suppress(TimeoutError, asyncio.CancelledError):
                    await asyncio.wait_for(asyncio.shield(main), SHUTDOWN_GRACE_S)
                if not main.done():
                    main.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await main
            if not main.cancelled():
                main.result()
        finally:
            stop_wait.cancel()
            ticker.cancel()
            if not main.done():
                # This call itself was cancelled: its endpoints' workers must not go on
                # sending and writing in the caller's loop after it has returned.
                main.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.gather(main, ticker, return_exceptions=True)
        if self.failure is not None:
            raise self.failure
        if self.gone and not interrupted:
            raise BatchesGone.of(self.gone)
        return interrupted

    async def _tick(self) -> None:
        while True:
            await asyncio.sleep(self.progress.interval_s)
            self.progress.refresh()


async def _gather(*aws: Awaitable[None]) -> None:
    await asyncio.gather(*aws)


def _probe(provider: Provider, transport: Transport) -> Probe:
    """One small request to a down endpoint: the preflight's ping, ``max_tokens=1``."""
    spec = ping_spec(provider.endpoint)

    async def probe() -> ProviderError | None:
        try:
            await provider.complete(spec, transport, max_tokens=1)
        except ProviderError as exc:
            return exc
        return None

    return probe


async def run_sweep(
    config: SweepConfig,
    *,
    retry_errors: bool = False,
    shard: Shard | None = None,
    progress: bool = True,
    preflight: bool = False,
    clock: Clock = time.monotonic,
    wall_clock: Callable[[], float] = time.time,
    sleep: Sleep = asyncio.sleep,
    transport_factory: TransportFactory | None = None,
    retry_policy: RetryPolicy | None = None,
    base_urls: Mapping[str, str] | None = None,
    stop_event: asyncio.Event | None = None,
    rng: random.Random | None = None,
    fsync_interval_s: float = FSYNC_INTERVAL_S,
    progress_stream: Any = None,
    use_cache: bool = True,
    cancel_batches: bool = False,
) -> RunSummary:
    """Run (or resume) a sweep into ``config.run_dir``; see the module docstring.

    Validation (task, keys, manifest, lock, the stream's lines, a cache that cannot be
    opened) happens before anything is sent or written and raises ``UsageError``; a run with
    nothing left to send does not open the cache. ``base_urls`` overrides endpoints' base
    URLs by name (tests, benchmarks); ``local`` endpoints without one get the embedded server.
    Setting ``stop_event`` stops the run gracefully (what Ctrl-C does: :func:`stop_on_signals`).
    ``clock``/``sleep``/``rng``/``transport_factory`` are injectable so tests control time and
    transport; ``sleep`` serves the retries' waits and the probes of a down endpoint.
    ``use_cache=False`` (``--no-cache``) neither reads nor writes the response cache.
    ``cancel_batches`` (``--cancel-batches``) sends nothing new: it cancels the run's open
    batches at the provider and writes what they return.
    """
    t_start = clock()
    task = config.build_task()
    for ep in config.endpoints:
        read_api_key(ep)  # a missing key variable fails now, before anything is written
        read_header_values(ep)
    existing = check_manifest(config.run_dir, config, shard)
    check_open_batches(config)
    policy = retry_policy or RetryPolicy.from_settings(config.retry)
    stop_event = stop_event or asyncio.Event()
    overrides = dict(base_urls or {})
    stage = Progress(enabled=progress, stream=progress_stream, clock=clock, tty=False)

    run_dir = config.run_dir
    results = run_dir / RESULTS_NAME
    async with contextlib.AsyncExitStack() as stack:
        # Last out: an OSError (a full disk, a permission) says whether there is a run to resume.
        stack.push(functools.partial(_advise_on_os_error, results))
        if any(ep.embedded and ep.name not in overrides for ep in config.endpoints):
            embedded = await stack.enter_async_context(_embedded_server_urls(config))
            overrides.update({k: v for k, v in embedded.items() if k not in overrides})
        providers = {
            ep.name: make_provider(ep, base_url=overrides.get(ep.name)) for ep in config.endpoints
        }
        pool = sum(workers_for(ep) for ep in config.endpoints)
        transport = (transport_factory or default_transport)(pool)
        stack.push_async_callback(transport.close)
        # A run refused before it wrote anything (its cache, its preflight) leaves no
        # directory it made; one refused by the lock never touches another run's.
        stack.enter_context(locked_run_dir(run_dir))
        # Read again under the lock: a run that held it may have written the manifest since.
        existing = check_manifest(run_dir, config, shard)
        # The stream is read (a corrupt line, or a record this plan would not have written,
        # refuses the run) before anything is written: a refused run leaves the manifest and
        # the stream as they were. The scan ignores a torn tail, so cutting it afterwards
        # changes nothing the state holds.
        membership = plan_check(config, shard, task)
        state = await asyncio.to_thread(scan_stream, results, membership.watch)
        foreign = await asyncio.to_thread(membership.finish)
        if foreign is not None:
            raise foreign_stream_error(results, foreign)

        identities = [ep.identity() for ep in config.endpoints]
        plan: list[PlanCount] | None = None
        # Per endpoint, whether its plan has a request the stream does not hold.
        left: list[bool] | None = None
        # --cancel-batches walks no plan: it only collects the batches already sent.
        if not cancel_batches and (progress or preflight):
            if progress:
                # The progress totals are the counts: the whole plan is walked.
                stage.say("planning: counting the requests left to do ...")
                plan = await _count_plans(task, identities, shard, state, retry_errors, stop_event)
                left = None if plan is None else [count.left > 0 for count in plan]
            else:
                # The preflight only needs to know which endpoints have a request left, not
                # how many: counting a large plan would hold up a --quiet run's start, with
                # nothing on screen. Each endpoint's walk stops at its first request left.
                left = await _left_per_endpoint(
                    task, identities, shard, state, retry_errors, stop_event
                )
            if left is None:  # stopped while walking the plan: nothing was sent or written
                return _stopped_before_start(config, clock() - t_start)
        # The cache after the lock and the stream, before anything is sent or written: one
        # that cannot be opened (read-only, full, not a database) refuses the run then. A run
        # with nothing left to send (a finished run rerun) neither reads nor stores an answer,
        # and does not open it.
        cache: ResponseCache | NoCache = NoCache()
        if use_cache and (
            any(left)
            if left is not None
            else _anything_left(task, identities, shard, state, retry_errors)
        ):
            cache = await ResponseCache.open(config.cache_dir)
        stack.push_async_callback(cache.close)
        served: dict[str, Any] = {}
        if preflight and left is not None:
            # After the lock and the stream: a run refused for those sends nothing, and an
            # endpoint with nothing left to send (a finished run rerun) is not pinged, which
            # would be a billed request and would refuse a finished run whose server is down.
            # A Ctrl-C while a ping waits (a server that accepts and does not answer holds it
            # for the endpoint's timeout_s, 10 minutes by default) stops the run at once.
            checked = await _unless_stopped(
                _preflight(
                    config,
                    [ep for ep, any_left in zip(config.endpoints, left, strict=True) if any_left],
                    providers,
                    transport,
                    stage,
                    clock,
                    progress_stream,
                    progress,
                ),
                stop_event,
            )
            if checked is None:  # stopped during the preflight: nothing was written
                return _stopped_before_start(config, clock() - t_start, in_preflight=True)
            served = checked
        written = write_manifest(
            run_dir,
            config,
            shard,
            existing,
            served={k: v.to_record() for k, v in served.items()},
            planned=None
            if plan is None
            else {ep.name: count.planned for ep, count in zip(config.endpoints, plan, strict=True)},
        )
        truncate_torn_tail(results)
        stored_errors = 0 if retry_errors else len(state.failed)
        endpoints = [
            _EndpointRun(
                config=ep,
                counts=Counts(),
                identity=identities[i],
                provider=providers[ep.name],
                pacing=Pacing(
                    ep.requests_per_minute, ep.tokens_per_minute, clock=clock, sleep=sleep
                ),
                health=EndpointHealth(
                    ep.name,
                    budget_s=ep.outage_budget_s,
                    probe=_probe(providers[ep.name], transport),
                    clock=clock,
                    sleep=sleep,
                ),
                # A batch endpoint has no workers: no slots to adapt, none to show.
                concurrency=AdaptiveConcurrency(clock=clock)
                if ep.max_concurrency == "auto" and not ep.batch
                else None,
                queue=asyncio.Queue(maxsize=workers_for(ep) * QUEUE_PER_WORKER),
                watch=ServedWatch(
                    ep.name,
                    Served(served[ep.name].served_model, served[ep.name].system_fingerprint)
                    if ep.name in served
                    else None,
                    stream=progress_stream,
                ),
                served_override=served[ep.name].served_model
                if ep.name in served and served[ep.name].answers_any_name
                else None,
            )
            for i, ep in enumerate(config.endpoints)
        ]
        prog = Progress(
            enabled=progress,
            stream=progress_stream,
            clock=clock,
            tracks=[
                Track(
                    ep.config.name,
                    ep.counts,
                    plan[i].left if plan is not None else None,
                    ep.describe,
                    batch=ep.config.batch,
                )
                for i, ep in enumerate(endpoints)
            ],
        )
        prog.details = lambda: "; ".join(d for d in (ep.describe() for ep in endpoints) if d)

        writer = RecordWriter(results, fsync_interval_s=fsync_interval_s, clock=clock)
        writer.start()
        stack.push_async_callback(writer.close)

        batch_store = BatchStore(run_dir, wall_clock=wall_clock)

        sweep = _Sweep(
            config=config,
            task=task,
            retry_errors=retry_errors,
            shard=shard,
            progress=prog,
            policy=policy,
            clock=clock,
            wall_clock=wall_clock,
            sleep=sleep,
            rng=rng or random.Random(),
            stop_event=stop_event,
            state=state,
            writer=writer,
            cache=cache,
            transport=transport,
            endpoints=endpoints,
            progress_stream=progress_stream,
            cancel_batches=cancel_batches,
        )
        for ep_run in endpoints:
            if ep_run.config.batch:
                client = await stack.enter_async_context(ApiClient(ep_run.provider))
                ep_run.batch = _batch_runner(sweep, ep_run, client, batch_store, results, sleep)
        try:
            interrupted = await sweep.run()
        finally:
            prog.close()
        stopped = interrupted or any(ep.stopped for ep in endpoints)
        walked: dict[str, int] | None = None
        if plan is None and all(ep.walked for ep in endpoints):
            walked = {ep.config.name: ep.counts.planned for ep in endpoints}
        elif plan is None and stopped and not cancel_batches:
            # The dispatchers stopped part-way and the plan was not counted before the sweep
            # (that would hold up the start of a large plan): count it now only if it is small.
            plan = await _count_plans(
                task,
                identities,
                shard,
                state,
                retry_errors,
                stop=asyncio.Event(),
                most=EXIT_COUNT_MAX_REQUESTS,
            )
            if plan is not None:
                walked = {ep.name: c.planned for ep, c in zip(config.endpoints, plan, strict=True)}
        if walked is not None:
            # Counted after all, where it cost no more than the walk: record it, as the
            # planning pass would have.
            record_planned_requests(run_dir, config, existing, written, walked)
    c = sweep.counters
    planned, skipped = c.planned, c.skipped
    if plan is not None and stopped:
        # The dispatchers stopped part-way: what they had walked is not the plan. Use the
        # count of all of it against the stream as it was before this run.
        planned = sum(part.planned for part in plan)
        skipped = sum(part.done for part in plan)
    pending = max(planned - skipped - c.written, 0)
    return RunSummary(
        run_dir=config.run_dir,
        planned=planned,
        written=c.written,
        skipped=skipped,
        cache_hits=c.cache_hits,
        http_requests=c.http_requests,
        retries=c.retries,
        errors=c.errors,
        elapsed_s=clock() - t_start,
        interrupted=interrupted,
        stopped_endpoints=tuple(ep.config.name for ep in endpoints if ep.stopped),
        pending=pending,
        uncached=cache.failed_stores,
        probes=sum(ep.health.probes for ep in endpoints),
        error_types=dict(c.error_types),
        stored_errors=stored_errors,
        batches=sum(ep.batch.submitted for ep in endpoints if ep.batch is not None),
        batches_cancelled=sum(ep.batch.cancelled for ep in endpoints if ep.batch is not None),
        batches_open=sum(ep.batch.at_provider for ep in endpoints if ep.batch is not None),
        counted=plan is not None or walked is not None or cancel_batches,
    )


def _stopped_before_start(
    config: SweepConfig, elapsed_s: float, *, in_preflight: bool = False
) -> RunSummary:
    """The summary of a run stopped before it sent or wrote anything (while its plan was
    walked, or during the preflight)."""
    return RunSummary(
        run_dir=config.run_dir,
        planned=0,
        written=0,
        skipped=0,
        cache_hits=0,
        http_requests=0,
        retries=0,
        errors=0,
        elapsed_s=elapsed_s,
        interrupted=True,
        started=False,
        in_preflight=in_preflight,
    )


class PlanCount(NamedTuple):
    """An endpoint's plan against the stream: requests planned, and those already done."""

    planned: int
    done: int

    @property
    def left(self) -> int:
        return self.planned - self.done


NOTHING_TO_RESUME = (
    "No result of this run was written, so there is nothing to resume: fix this and rerun "
    "the same command."
)
STREAM_MOVED_ADVICE = (
    "Move the run directory back and rerun the same command to resume it, or rerun it as it "
    "is to write the stream anew (the answers already received come from the response cache)."
)


def _advise_on_os_error(
    results: Path,
    exc_type: type[BaseException] | None,
    exc: BaseException | None,
    tb: TracebackType | None,
) -> bool:
    """An OSError that ends a run whose stream holds no record says there is nothing to
    resume (a note the command line prints as its advice); otherwise it resumes. A stream
    moved or deleted under the run is not an empty one: it says how to get it back."""
    if isinstance(exc, StreamMovedError):
        exc.add_note(STREAM_MOVED_ADVICE)
        return False
    if isinstance(exc, OSError):
        try:
            empty = results.stat().st_size == 0
        except FileNotFoundError:
            empty = True
        except OSError:
            empty = False  # not known: the usual advice, that a rerun resumes, stays
        if empty:
            exc.add_note(NOTHING_TO_RESUME)
    return False


async def _preflight(
    config: SweepConfig,
    waiting: Sequence[EndpointConfig],
    providers: Mapping[str, Provider],
    transport: Transport,
    stage: Progress,
    clock: Clock,
    stream: Any,
    announce: bool,
) -> dict[str, Any]:
    """The preflight of the endpoints with requests left to send (``waiting``)."""
    from runner.preflight import run_preflight

    if not waiting:
        stage.say("preflight: skipped: no endpoint has a request left to send")
        return {}
    n = len(waiting)
    checked = "1 endpoint" if n == 1 else f"{n} endpoints"
    stage.say(f"preflight: checking {checked} with one small request each ...")
    began = clock()
    served = await run_preflight(
        config, providers, transport, stream=stream, announce=announce, endpoints=waiting
    )
    stage.say(f"preflight: {checked} answered ({clock() - began:.1f} s)")
    return dict(served)


async def _unless_stopped(work: Awaitable[_T], stop: asyncio.Event) -> _T | None:
    """``work``'s result, or None (``work`` cancelled) if ``stop`` is set first."""
    task = asyncio.ensure_future(work)
    stopped = asyncio.create_task(stop.wait(), name="cotaudit-stop-preflight")
    try:
        await asyncio.wait({task, stopped}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        stopped.cancel()
        if not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
    return None if task.cancelled() else task.result()


async def _count_plans(
    task: Task,
    identities: Sequence[EndpointIdentity],
    shard: Shard | None,
    state: StreamState,
    retry_errors: bool,
    stop: asyncio.Event,
    most: int | None = None,
) -> list[PlanCount] | None:
    """Walk each endpoint's plan and count what the stream already holds (sends nothing),
    the loop given a turn after every chunk: counting a large plan takes a while, and a
    Ctrl-C (``stop``, set by a loop signal handler) must be seen meanwhile, not once it is
    done. None when ``stop`` was set, or the plans hold more than ``most`` requests."""
    counts = []
    total = 0
    for identity in identities:
        planned = done = 0
        for part in _plan_chunks(task, identity, shard, state, retry_errors):
            planned += part.planned
            done += part.done
            total += part.planned
            await asyncio.sleep(0)
            if stop.is_set() or (most is not None and total > most):
                return None
        counts.append(PlanCount(planned, done))
    return counts


def _anything_left(
    task: Task,
    identities: Sequence[EndpointIdentity],
    shard: Shard | None,
    state: StreamState,
    retry_errors: bool,
) -> bool:
    """Whether a plan has a request the stream does not hold; stops at the first one, and
    walks nothing when the stream holds no response (a new run)."""
    if not len(state.succeeded) and (retry_errors or not len(state.failed)):
        return True
    return any(
        part.left
        for identity in identities
        for part in _plan_chunks(task, identity, shard, state, retry_errors)
    )


async def _left_per_endpoint(
    task: Task,
    identities: Sequence[EndpointIdentity],
    shard: Shard | None,
    state: StreamState,
    retry_errors: bool,
    stop: asyncio.Event,
) -> list[bool] | None:
    """Per endpoint, whether its plan has a request the stream does not hold: each walk stops
    at the endpoint's first one (a new run's at its first chunk), the loop given a turn after
    every chunk so that a Ctrl-C (``stop``) is seen meanwhile. None when ``stop`` was set."""
    left = []
    for identity in identities:
        found = False
        for part in _plan_chunks(task, identity, shard, state, retry_errors):
            await asyncio.sleep(0)
            if stop.is_set():
                return None
            if part.left:
                found = True
                break
        left.append(found)
    return left


def _plan_chunks(
    task: Task,
    identity: EndpointIdentity,
    shard: Shard | None,
    state: StreamState,
    retry_errors: bool,
) -> Iterator[PlanCount]:
    """The plan against the stream, ``CACHE_LOOKUP_CHUNK`` requests at a time."""
    plan = iter_plan(task, identity, shard)
    while batch := [spec.request_id for _, spec in itertools.islice(plan, CACHE_LOOKUP_CHUNK)]:
        found = state.succeeded.contains_many(batch)
        if not retry_errors:
            found |= state.failed.contains_many(batch)
        yield PlanCount(len(batch), int(found.sum()))


class NoCache:
    """``--no-cache``: every lookup misses, nothing is stored, the cache directory is untouched."""

    failed_stores = 0

    async def get_many(self, keys: list[str]) -> list[CachedResponse | None]:
        return [None] * len(keys)

    def put(self, key: str, response: CachedResponse) -> None:
        return None

    async def room(self) -> None:
        await asyncio.sleep(0)  # nothing to wait for but the writer's turn

    async def close(self) -> None:
        return None


def _batch_runner(
    sweep: _Sweep,
    ep: _EndpointRun,
    client: ApiClient,
    store: BatchStore,
    results: Path,
    sleep: Sleep,
) -> BatchRunner:
    def deliver(
        spec: RequestSpec,
        result: ProviderResult | None,
        error: ProviderError | None,
        *,
        queued_at: float,
        submitted_at: float,
    ) -> None:
        sweep.deliver_batch_item(
            ep, spec, result, error, queued_at=queued_at, submitted_at=submitted_at
        )

    def retried() -> None:
        ep.counts.retries += 1

    return BatchRunner(
        endpoint=ep.config.name,
        api=batch_api(ep.provider, client),
        store=store,
        results_path=results,
        deliver=deliver,
        body=ep.provider.build_body,
        poll_s=ep.config.batch_poll_s,
        max_requests=ep.config.batch_max_requests,
        sleep=sleep,
        room=sweep.cache.room,
        wall_clock=sweep.wall_clock,
        stopping=lambda: sweep.stopping or ep.stopped,
        stream=sweep.progress_stream,
        policy=sweep.policy,
        clock=sweep.clock,
        rng=sweep.rng,
        on_retry=retried,
    )


def check_open_batches(config: SweepConfig) -> None:
    """An online endpoint must not send requests that open batches of its own have sent."""
    online = {ep.name for ep in config.endpoints if not ep.batch}
    stuck = Counter(
        b.endpoint for b in BatchStore(config.run_dir).load() if b.open and b.endpoint in online
    )
    if stuck:
        name, count = sorted(stuck.items())[0]
        raise UsageError(
            f"endpoint {name!r} is online now, but {count} of its batches in this run "
            "directory are not collected yet: sending their requests online would pay twice",
            where=str(config.run_dir / "batches"),
            # Deleting the files (what this once advised) sends online, and pays again for,
            # what the batches had answered; --cancel-batches writes that and marks the rest.
            fix=f'Resume with mode = "batch" on {name!r} to collect them. To stop waiting for '
            'them instead, run with --cancel-batches while mode = "batch" (what they '
            "finished is written, the rest as BatchCancelled errors), then switch to online "
            "and rerun with --retry-errors to send the cancelled requests online.",
        )


@contextlib.contextmanager
def stop_on_signals() -> Iterator[asyncio.Event]:
    """Within the block, SIGINT and SIGTERM set the event it yields instead of ending the
    process: given to :func:`run_sweep` as ``stop_event``, they stop the sweep gracefully
    (in-flight requests get their grace period, the writer drains; ``interrupted`` is set).

    Call it in the running event loop, in the main thread; elsewhere the signals keep their
    handlers and the event is never set."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    installed: list[signal.Signals] = []
    for sig in (signal.SIGINT, signal.SIGTERM):
        try:
            loop.add_signal_handler(sig, stop.set)
            installed.append(sig)
        except (NotImplementedError, RuntimeError, ValueError):
            pass  # not the main thread, or a platform without loop signal handlers
    try:
        yield stop
    finally:
        for sig in installed:
            loop.remove_signal_handler(sig)


def run_sweep_sync(config: SweepConfig, **kwargs: Any) -> RunSummary:
    """Run :func:`run_sweep` in a fresh event loop; SIGINT/SIGTERM stop it gracefully."""

    async def main() -> RunSummary:
        with stop_on_signals() as stop:
            return await run_sweep(config, stop_event=stop, **kwargs)

    return asyncio.run(main())
