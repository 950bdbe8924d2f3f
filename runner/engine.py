"""The sweep engine: a lazy plan -> cache -> rate limits -> retries -> providers -> one stream.

Per endpoint, one *dispatcher* walks the endpoint's lazy plan (``task.problems()`` x
``task.requests(problem, endpoint)``), drops requests of other shards and requests already in
the stream, looks the rest up in the cache a chunk at a time (one hop to the cache thread per
chunk), emits cache hits straight to the writer and puts misses, their request bodies built,
on a bounded queue. A fixed pool of ``max_concurrency`` *workers* takes requests off that
queue; each attempt acquires the endpoint's requests-per-minute and tokens-per-minute
limiters, then calls the provider; tenacity retries retryable failures. What follows a
finished request (its record, the cache store, the counts) is done for all of a loop turn's
finished requests in one batch, and one *writer* appends every record (one drain per turn).
Memory is bounded by the queues, never by the plan.

Problem records (and the task's per-endpoint records) are queued to the writer when the
dispatcher meets the first request of the problem that will be written, i.e. always before the
responses that refer to them, and only once per stream.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import random
import signal
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from aiolimiter import AsyncLimiter

from cotaudit.constants import AUTH_FAILURES_BEFORE_STOP, FSYNC_INTERVAL_S, SHUTDOWN_GRACE_S
from cotaudit.schema import SCHEMA_VERSION, JSONDict
from runner.cache import CachedResponse, ResponseCache
from runner.collector import collector_spared
from runner.config import EndpointConfig, SweepConfig
from runner.manifest import Shard, check_manifest, write_manifest
from runner.progress import Progress
from runner.providers import make_provider
from runner.providers.base import (
    AuthError,
    Provider,
    ProviderError,
    ProviderResult,
    read_api_key,
)
from runner.request_spec import EndpointIdentity, RequestSpec
from runner.resume import StreamState, scan_stream, truncate_torn_tail
from runner.retry import Clock, RetryPolicy, Sleep, call_with_retries
from runner.run_lock import run_dir_lock
from runner.tasks.registry import Task
from runner.transport import Transport, TransportFactory, default_transport
from runner.writer import RecordWriter

RESULTS_NAME = "results.jsonl"
CACHE_LOOKUP_CHUNK = 512  # planned requests looked up in the cache per hop to its thread
# The first lookups are smaller (doubling up to CACHE_LOOKUP_CHUNK), so the first requests
# leave after a few planned specs, not after two full chunks (~10 ms of planning).
FIRST_LOOKUP_CHUNK = 16
# The dispatcher lets the event loop run after planning this many requests: planning a
# 512-request chunk in one go takes several milliseconds, a stall that every response
# arriving meanwhile would wait out.
PLAN_SLICE = 64
QUEUE_PER_WORKER = 2  # queued requests per worker: enough to keep workers busy, no more
LIMITER_BURST_S = 0.2  # seconds of allowance a limiter may spend at once (precision vs. jitter)

# A request ready to send: spec, request body, estimated tokens (both made by the dispatcher,
# a batch at a time: see _Sweep._finish_batch for why batching pays).
_Ready = tuple[RequestSpec, bytes, int]
# A request whose attempts are over: spec, result, error, attempt outcomes, latency (s),
# started and finished (wall clock). Turned into a record by _Sweep._finish_batch.
_Finished = tuple[
    RequestSpec, ProviderResult | None, ProviderError | None, list[str], float, float, float
]


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

    @property
    def elapsed(self) -> float:
        """Seconds the run took (alias of ``elapsed_s``)."""
        return self.elapsed_s

    def line(self) -> str:
        text = (
            f"{self.planned} planned, {self.written} written, {self.skipped} already done, "
            f"{self.cache_hits} from cache, {self.http_requests} HTTP requests, "
            f"{self.retries} retries, {self.errors} errors, {self.elapsed_s:.1f} s"
        )
        if self.pending:
            text += f", {self.pending} pending (rerun to resume)"
        if self.uncached:
            text += f", {self.uncached} not cached (the store failed)"
        return text


def keep_for_shard(request_id: str, shard: Shard | None) -> bool:
    """``--shard i/N`` keeps a request iff ``int(sha256(request_id)) % N == i``."""
    if shard is None or shard.count == 1:
        return True
    digest = hashlib.sha256(request_id.encode("utf-8")).hexdigest()
    return int(digest, 16) % shard.count == shard.index


def iter_plan(
    task: Task, identity: EndpointIdentity, shard: Shard | None = None
) -> Iterator[tuple[Any, RequestSpec]]:
    """The endpoint's lazy plan: (problem, spec) in order, restricted to ``shard``."""
    if shard is None or shard.count == 1:
        for problem in task.problems():
            for spec in task.requests(problem, identity):
                yield problem, spec
        return
    for problem in task.problems():
        for spec in task.requests(problem, identity):
            if keep_for_shard(spec.request_id, shard):
                yield problem, spec


class RateLimits:
    """An endpoint's requests-per-minute and tokens-per-minute leaky buckets (aiolimiter).

    Each bucket holds ``LIMITER_BURST_S`` of allowance (at least one request), so the
    sustained rate is exact from the first second instead of after a minute-sized burst. A
    request estimated at more tokens than the bucket holds is charged in bucket-sized parts:
    it waits for its full cost instead of being under-charged.
    """

    def __init__(self, requests_per_minute: float, tokens_per_minute: float) -> None:
        rps, tps = requests_per_minute / 60.0, tokens_per_minute / 60.0
        req_cap = max(1.0, rps * LIMITER_BURST_S)
        tok_cap = max(1.0, tps * LIMITER_BURST_S)
        self.requests = AsyncLimiter(req_cap, req_cap / rps)
        self.tokens = AsyncLimiter(tok_cap, tok_cap / tps)
        self.token_capacity = tok_cap

    def try_acquire(self, tokens: int) -> bool:
        """Take one request and ``tokens`` now if both buckets have room; never waits.

        The hot-path fast lane: when the buckets have capacity (always, below the limits),
        this costs two level checks instead of two coroutine acquisitions. It charges exactly
        what :meth:`acquire` would, so the sustained rates are unchanged. It declines (and the
        caller awaits :meth:`acquire`) whenever anyone is queued, so waiters keep their turn.
        Relies on aiolimiter's bucket state (``_level``, ``_waiters``), stable since 1.0.
        """
        requests, bucket = self.requests, self.tokens
        if (
            tokens > self.token_capacity
            or requests._waiters
            or bucket._waiters
            or not requests.has_capacity(1)
            or not bucket.has_capacity(tokens)
        ):
            return False
        requests._level += 1
        bucket._level += tokens
        return True

    async def acquire(self, tokens: int) -> None:
        """Wait until one request and ``tokens`` fit in the buckets, then take them."""
        await self.requests.acquire()
        remaining = float(tokens)
        while remaining > 0:
            part = min(remaining, self.token_capacity)
            await self.tokens.acquire(part)
            remaining -= part


@dataclass(slots=True)
class _Counters:
    planned: int = 0
    written: int = 0
    skipped: int = 0
    cache_hits: int = 0
    http_requests: int = 0
    retries: int = 0
    errors: int = 0


@dataclass(slots=True)
class _EndpointRun:
    config: EndpointConfig
    identity: EndpointIdentity
    provider: Provider
    limits: RateLimits
    queue: asyncio.Queue[_Ready | None]
    # Set by workers when the queue has drained to half: the dispatcher refills it in one
    # go instead of being woken for every single free slot.
    room: asyncio.Event = field(default_factory=asyncio.Event)
    auth_failures: int = 0
    stopped: bool = False
    held: list[JSONDict] = field(default_factory=list)  # auth failures, written if not stopped


_iso_second = -1
_iso_prefix = ""


def _iso(ts: float) -> str:
    """UTC ISO 8601 with milliseconds; the per-second prefix is cached (hot path: 2 per record)."""
    global _iso_second, _iso_prefix
    second = int(ts)
    if second != _iso_second:
        _iso_second = second
        _iso_prefix = datetime.fromtimestamp(second, UTC).strftime("%Y-%m-%dT%H:%M:%S")
    return f"{_iso_prefix}.{int((ts - second) * 1000):03d}Z"


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


class _Sweep:
    """One run of the engine; see :func:`run_sweep`."""

    def __init__(
        self,
        config: SweepConfig,
        task: Task,
        *,
        retry_errors: bool,
        shard: Shard | None,
        progress: Progress,
        policy: RetryPolicy,
        clock: Clock,
        wall_clock: Callable[[], float],
        sleep: Sleep,
        rng: random.Random,
        stop_event: asyncio.Event,
        state: StreamState,
        writer: RecordWriter,
        cache: ResponseCache,
        transport: Transport,
        endpoints: list[_EndpointRun],
    ) -> None:
        self.config = config
        self.task = task
        self.retry_errors = retry_errors
        self.shard = shard
        self.progress = progress
        self.policy = policy
        self.clock = clock
        self.wall_clock = wall_clock
        self.sleep = sleep
        self.rng = rng
        self.stop_event = stop_event
        self.state = state
        self.writer = writer
        self.cache = cache
        self.transport = transport
        self.endpoints = endpoints
        self.counters = _Counters()
        self.stopping = False
        self._finished: list[_Finished] = []
        self._failure: Exception | None = None  # raised by run(): a record could not be written
        self._loop = asyncio.get_running_loop()

    def _already_done(self, request_id: str) -> bool:
        if request_id in self.state.succeeded:
            return True
        return request_id in self.state.failed and not self.retry_errors

    def _emit_response(self, record: JSONDict, *, cached: bool, error: bool) -> None:
        self.writer.put(record)
        self.counters.written += 1
        progress = self.progress
        progress.done += 1
        if cached:
            self.counters.cache_hits += 1
            progress.cache_hits += 1
        if error:
            self.counters.errors += 1
            progress.errors += 1

    def _ensure_problem(self, ep: _EndpointRun, problem: Any) -> None:
        pid = problem.problem_id
        if pid not in self.state.problems:
            self.state.problems.add(pid)
            self.writer.put(problem.to_record())
        for extra in self.task.endpoint_records(problem, ep.identity):
            key = (str(extra.get("kind")), ep.identity.name, pid)
            if key not in self.state.endpoint_records:
                self.state.endpoint_records.add(key)
                self.writer.put(extra)

    async def dispatch(self, ep: _EndpointRun) -> None:
        """Walk the plan; cached answers go to the writer, the rest to the workers.

        Cache lookups are pipelined: chunk k+1 is planned while chunk k is looked up on the
        cache thread, so planning and SQLite reads overlap.
        """
        chunk: list[RequestSpec] = []
        chunk_size = FIRST_LOOKUP_CHUNK
        pending: tuple[list[RequestSpec], asyncio.Future[list[CachedResponse | None]]] | None
        pending = None
        last_problem: str | None = None
        counters = self.counters
        for problem, spec in iter_plan(self.task, ep.identity, self.shard):
            if self.stopping or ep.stopped:
                break
            counters.planned += 1
            if counters.planned % PLAN_SLICE == 0:
                await asyncio.sleep(0)
            if self._already_done(spec.request_id):
                counters.skipped += 1
                continue
            if problem.problem_id != last_problem:
                last_problem = problem.problem_id
                self._ensure_problem(ep, problem)
            chunk.append(spec)
            if len(chunk) >= chunk_size:
                chunk_size = min(2 * chunk_size, CACHE_LOOKUP_CHUNK)
                lookup = asyncio.ensure_future(self.cache.get_many([s.cache_key for s in chunk]))
                if pending is not None:
                    await self._route(ep, *pending)
                pending, chunk = (chunk, lookup), []
        if chunk and not (self.stopping or ep.stopped):
            lookup = asyncio.ensure_future(self.cache.get_many([s.cache_key for s in chunk]))
            if pending is not None:
                await self._route(ep, *pending)
            pending = (chunk, lookup)
        if pending is not None:
            if self.stopping or ep.stopped:
                pending[1].cancel()
            else:
                await self._route(ep, *pending)

    async def _route(
        self,
        ep: _EndpointRun,
        chunk: list[RequestSpec],
        lookup: asyncio.Future[list[CachedResponse | None]],
    ) -> None:
        hits = await lookup
        now = _iso(self.wall_clock())  # one timestamp for the chunk's hits, formatted once
        queue, room, payload = ep.queue, ep.room, ep.provider.payload
        for spec, hit in zip(chunk, hits, strict=True):
            if hit is None:
                ready = (spec, payload(spec), spec.estimated_tokens())
                while queue.full():
                    room.clear()
                    await room.wait()
                queue.put_nowait(ready)
            else:
                record = self._record(spec, hit, None, [], 0.0, now, now, cached=True)
                self._emit_response(record, cached=True, error=False)

    def _record(
        self,
        spec: RequestSpec,
        result: ProviderResult | CachedResponse | None,
        error: ProviderError | None,
        outcomes: list[str],
        latency_s: float,
        started_at: str,
        finished_at: str,
        *,
        cached: bool,
    ) -> JSONDict:
        # One literal instead of spec.to_record() plus a dozen item assignments (hot path:
        # one per request); the key order is to_record()'s, then the response fields.
        return {
            "kind": "response",
            "schema": SCHEMA_VERSION,
            "request_id": spec.request_id,
            "cache_key": spec.cache_key,
            "endpoint": spec.endpoint,
            "task": spec.task,
            "problem_id": spec.problem_id,
            "condition": spec.condition,
            "target_premise": spec.target_premise,
            "sample_index": spec.sample_index,
            "probe": spec.probe,
            "messages": spec.messages,  # a tuple: orjson writes it as the list it was
            "params": spec.params,
            "model": spec.model,
            "text": result.text if result is not None else None,
            "finish_reason": result.finish_reason if result is not None else None,
            "usage": result.usage if result is not None else None,
            # round() of a float to digits costs ~0.2 us; a cache hit (one per request of a
            # warm rerun) has latency 0.0, which it would return unchanged.
            "latency_s": round(latency_s, 6) if latency_s else 0.0,
            "attempts": len(outcomes),
            "attempt_outcomes": outcomes,
            "cached": cached,
            "started_at": started_at,
            "finished_at": finished_at,
            "error": error.to_record(len(outcomes)) if error is not None else None,
        }

    async def work(self, ep: _EndpointRun) -> None:
        """One worker: take requests off the endpoint's queue until told to stop."""
        queue, room = ep.queue, ep.room
        low_water = queue.maxsize // 2
        while True:
            try:
                ready = queue.get_nowait()  # the queue is usually full: no coroutine needed
            except asyncio.QueueEmpty:
                ready = await queue.get()
            if queue.qsize() <= low_water and not room.is_set():
                room.set()
            if ready is None:
                return
            if self.stopping or ep.stopped:
                continue  # left pending: a resumed run sends it
            await self._execute(ep, *ready)

    async def _execute(
        self, ep: _EndpointRun, spec: RequestSpec, payload: bytes, tokens: int
    ) -> None:
        outcomes: list[str] = []
        provider, transport, limits = ep.provider, self.transport, ep.limits
        counters = self.counters
        started_wall, t0 = self.wall_clock(), self.clock()
        result: ProviderResult | None = None
        error: ProviderError | None = None
        # The first attempt is ``attempt()`` written out inline: most requests succeed at
        # once, and every await level is paid again each time the transport resumes the task. A
        # retryable failure goes to call_with_retries as its attempt 1, so waits and stops
        # see the true attempt numbers and the time budget starts before it.
        try:
            if not limits.try_acquire(tokens):
                await limits.acquire(tokens)
            counters.http_requests += 1
            result = await provider.complete(spec, transport, payload=payload)
            outcomes.append("ok")
        except ProviderError as exc:
            outcomes.append(exc.outcome)
            if not exc.retryable:
                error = exc
            else:

                async def attempt() -> ProviderResult:  # built only when a retry is needed
                    if not limits.try_acquire(tokens):
                        await limits.acquire(tokens)
                    counters.http_requests += 1
                    result: ProviderResult = await provider.complete(
                        spec, transport, payload=payload
                    )
                    return result

                try:
                    result = await call_with_retries(
                        attempt,
                        self.policy,
                        outcomes=outcomes,
                        sleep=self.sleep,
                        clock=self.clock,
                        rng=self.rng,
                        first_failure=exc,
                        started=t0,
                    )
                except ProviderError as final:
                    error = final
        latency = self.clock() - t0
        if isinstance(error, AuthError):
            self._auth_failure(ep, spec, error, outcomes, latency, started_wall)
            return
        finished = self._finished
        if not finished:
            self._loop.call_soon(self._finish_batch)
        finished.append((spec, result, error, outcomes, latency, started_wall, self.wall_clock()))

    def _finish_batch(self) -> None:
        """Records, cache stores and counts for every request finished since the last call.

        Workers only send requests; what follows a response is batched here, once per event-
        loop turn (scheduled by the turn's first finished request, like the writer's drain).
        Interleaved with the HTTP client's per-request code, this bookkeeping cost about twice
        its own CPU (measured with aiohttp: ~8-11 us per request less at zero latency, where
        the engine is CPU-bound).
        The records still reach the writer in the same turn plus one, before the loop waits
        for the network again.
        """
        batch, self._finished = self._finished, []
        counters, progress, cache = self.counters, self.progress, self.cache
        try:
            for spec, result, error, outcomes, latency, started, finished in batch:
                retries = len(outcomes) - 1
                counters.retries += retries
                progress.retries += retries
                record = self._record(
                    spec,
                    result,
                    error,
                    outcomes,
                    latency,
                    _iso(started),
                    _iso(finished),
                    cached=False,
                )
                if result is not None:
                    cache.put(
                        spec.cache_key,
                        CachedResponse(result.text, result.finish_reason, result.usage),
                    )
                self._emit_response(record, cached=False, error=error is not None)
        except Exception as exc:
            # A callback's exception would only be logged by the event loop: keep it, stop
            # sending (what is not written stays pending for a resume), and run() raises it.
            self._failure = self._failure or exc
            self.stopping = True

    def _auth_failure(
        self,
        ep: _EndpointRun,
        spec: RequestSpec,
        error: AuthError,
        outcomes: list[str],
        latency: float,
        started_wall: float,
    ) -> None:
        """Count an authentication failure; held back, and written only if the endpoint is
        not stopped (a stopped endpoint's requests stay pending for a resume)."""
        retries = len(outcomes) - 1
        self.counters.retries += retries
        self.progress.retries += retries
        record = self._record(
            spec,
            None,
            error,
            outcomes,
            latency,
            _iso(started_wall),
            _iso(self.wall_clock()),
            cached=False,
        )
        ep.auth_failures += 1
        self.counters.errors += 1
        self.progress.errors += 1
        if ep.stopped:
            return
        ep.held.append(record)
        if ep.auth_failures >= AUTH_FAILURES_BEFORE_STOP:
            ep.stopped = True
            ep.held.clear()
            print(
                f"cotaudit: endpoint {ep.config.name!r}: {ep.auth_failures} authentication "
                f"failures ({error.message}); stopped sending to it. Check the key in "
                f"${ep.config.api_key_env or '(no api_key_env set)'} and rerun to resume.",
                file=sys.stderr,
                flush=True,
            )

    async def run_endpoint(self, ep: _EndpointRun) -> None:
        workers = [
            asyncio.create_task(self.work(ep), name=f"cotaudit-worker-{ep.config.name}-{i}")
            for i in range(ep.config.max_concurrency)
        ]
        try:
            await self.dispatch(ep)
            for _ in workers:
                await ep.queue.put(None)
            await asyncio.gather(*workers)
        except BaseException:
            # Cancelled after the grace period (or a bug): in-flight requests are abandoned
            # and stay pending; never wait on a full queue or a slow server here.
            for worker in workers:
                worker.cancel()
            await asyncio.gather(*workers, return_exceptions=True)
            raise
        self._finish_batch()  # this endpoint's last responses, before its held failures
        if not ep.stopped:
            for record in ep.held:
                self.counters.errors -= 1  # counted again by _emit_response
                self.progress.errors -= 1
                self._emit_response(record, cached=False, error=True)
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
            else:
                main.result()
        finally:
            stop_wait.cancel()
            ticker.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await ticker
            self._finish_batch()  # what finished in the last turn (or before a cancel)
        if self._failure is not None:
            raise self._failure
        return interrupted

    async def _tick(self) -> None:
        while True:
            await asyncio.sleep(self.progress.interval_s)
            self.progress.refresh()


async def _gather(*aws: Awaitable[None]) -> None:
    await asyncio.gather(*aws)


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
) -> RunSummary:
    """Run (or resume) a sweep into ``config.run_dir``; see the module docstring.

    Validation (task, keys, manifest) happens before anything is written and raises
    ``UsageError``. ``base_urls`` overrides endpoints' base URLs by name (tests, benchmarks);
    ``local`` endpoints without one get the embedded server. Setting ``stop_event`` stops the
    run gracefully (what Ctrl-C does). ``clock``/``sleep``/``rng``/``transport_factory`` are
    injectable so tests control time and transport.
    """
    t_start = clock()
    task = config.build_task()
    for ep in config.endpoints:
        read_api_key(ep)  # a missing key variable fails now, before anything is written
    existing = check_manifest(config.run_dir, config, shard)
    policy = retry_policy or RetryPolicy.from_settings(config.retry)
    stop_event = stop_event or asyncio.Event()
    overrides = dict(base_urls or {})

    async with contextlib.AsyncExitStack() as stack:
        if any(ep.embedded and ep.name not in overrides for ep in config.endpoints):
            overrides.update(
                {
                    k: v
                    for k, v in (
                        await stack.enter_async_context(_embedded_server_urls(config))
                    ).items()
                    if k not in overrides
                }
            )
        providers = {
            ep.name: make_provider(ep, base_url=overrides.get(ep.name)) for ep in config.endpoints
        }
        pool = sum(ep.max_concurrency for ep in config.endpoints)
        transport = (transport_factory or default_transport)(pool)
        stack.push_async_callback(transport.close)
        if preflight:
            from runner.preflight import run_preflight

            await run_preflight(config, providers, transport)

        # The cache first: one that cannot be opened fails the run before it writes anything.
        cache = await ResponseCache.open(config.cache_dir)
        stack.push_async_callback(cache.close)
        run_dir = config.run_dir
        run_dir.mkdir(parents=True, exist_ok=True)
        stack.enter_context(run_dir_lock(run_dir))
        # Read again under the lock: a run that held it may have written the manifest since.
        existing = check_manifest(run_dir, config, shard)
        write_manifest(run_dir, config, shard, existing)
        results = run_dir / RESULTS_NAME
        truncate_torn_tail(results)
        state = await asyncio.to_thread(scan_stream, results)

        total = None
        show = progress and (progress_stream or sys.stderr).isatty()
        if show:
            total = sum(
                1
                for ep in config.endpoints
                for _, spec in iter_plan(task, ep.identity(), shard)
                if not (
                    spec.request_id in state.succeeded
                    or (spec.request_id in state.failed and not retry_errors)
                )
            )
        prog = Progress(enabled=progress, total=total, stream=progress_stream, clock=clock)

        writer = RecordWriter(results, fsync_interval_s=fsync_interval_s, clock=clock)
        writer.start()
        stack.push_async_callback(writer.close)

        endpoints = [
            _EndpointRun(
                config=ep,
                identity=ep.identity(),
                provider=providers[ep.name],
                limits=RateLimits(ep.requests_per_minute, ep.tokens_per_minute),
                queue=asyncio.Queue(maxsize=ep.max_concurrency * QUEUE_PER_WORKER),
            )
            for ep in config.endpoints
        ]
        sweep = _Sweep(
            config,
            task,
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
        )
        try:
            with collector_spared():
                interrupted = await sweep.run()
        finally:
            prog.close()
        c = sweep.counters
    pending = c.planned - c.skipped - c.written
    if interrupted:
        # The plan walk stopped early: count what it never reached as pending too.
        pending = max(pending, 0)
    return RunSummary(
        run_dir=config.run_dir,
        planned=c.planned,
        written=c.written,
        skipped=c.skipped,
        cache_hits=c.cache_hits,
        http_requests=c.http_requests,
        retries=c.retries,
        errors=c.errors,
        elapsed_s=clock() - t_start,
        interrupted=interrupted,
        stopped_endpoints=tuple(ep.config.name for ep in endpoints if ep.stopped),
        pending=pending,
        uncached=cache.failed_stores,
    )


def run_sweep_sync(config: SweepConfig, **kwargs: Any) -> RunSummary:
    """Run :func:`run_sweep` in a fresh event loop; SIGINT/SIGTERM stop it gracefully."""

    async def main() -> RunSummary:
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
            return await run_sweep(config, stop_event=stop, **kwargs)
        finally:
            for sig in installed:
                loop.remove_signal_handler(sig)

    return asyncio.run(main())
