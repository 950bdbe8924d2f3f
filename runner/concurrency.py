"""``max_concurrency = "auto"``: how many requests an endpoint keeps in flight, adapted to it.

Additive increase, multiplicative decrease, as TCP does and as Inspect AI's adaptive
connections do for model APIs:

- it starts at ``AUTO_CONCURRENCY_INITIAL`` and, while no 429 has been seen, grows by one for
  every success (doubling per round trip, "slow start"); after that by one per round trip
  (``1 / limit`` per success). It grows only while nearly every slot is on the wire: when the
  rate limiters, not the slots, hold requests back, more slots would not send more;
- a 429 cuts it to ``RATE_LIMITED_FACTOR`` of itself, rising latency (the median of the last
  ``LATENCY_WINDOW`` answers above ``LATENCY_RISE`` times the lowest such median) to
  ``SLOW_FACTOR``; at most once per round trip (the median latency of the recent answers):
  the failures of requests sent before the last cut, or in the moment after it (a server
  refuses at once), say nothing about the new limit. After a cut for latency the lowest
  median is the current one, so a workload whose answers are simply longer costs one cut,
  not a spiral.

Never below 1 nor above ``AUTO_CONCURRENCY_MAX``. Slots are handed out first come, first
served, but for a request's later attempts (a retry after a 429, a 5xx), which go ahead of the
requests not yet sent: a retry's time budget runs from its first send, and behind up to
``AUTO_CONCURRENCY_MAX`` waiting first attempts at a low limit (a 50-requests-per-minute key
holds a thousand waiting requests for 20 minutes) it would be spent before the retry was sent.
"""

from __future__ import annotations

import asyncio
import contextlib
import statistics
import time
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterator

from cotaudit.constants import AUTO_CONCURRENCY_INITIAL, AUTO_CONCURRENCY_MAX

RATE_LIMITED_FACTOR = 0.7
SLOW_FACTOR = 0.8
LATENCY_WINDOW = 50  # answers per latency median
LATENCY_RISE = 2.0  # a median this many times the lowest one counts as congestion
BUSY_SHARE = 0.9  # share of the slots on the wire at which more slots would help


class AdaptiveConcurrency:
    """Slots for in-flight requests whose number follows the server (see the module doc)."""

    def __init__(
        self,
        *,
        initial: int = AUTO_CONCURRENCY_INITIAL,
        maximum: int = AUTO_CONCURRENCY_MAX,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.limit = float(min(initial, maximum))
        self.maximum = maximum
        self.clock = clock
        self.held = 0  # slots taken (a request waiting for the rate limiters holds one)
        self.on_wire = 0  # requests sent and not yet answered
        self.slow_start = True
        self._last_cut = -float("inf")
        self._waiters: deque[asyncio.Future[None]] = deque()  # first attempts
        self._retry_waiters: deque[asyncio.Future[None]] = deque()  # later attempts
        self._latencies: deque[float] = deque(maxlen=LATENCY_WINDOW)
        self._new_latencies = 0
        self._lowest_median: float | None = None

    @property
    def current(self) -> int:
        """The number of slots now."""
        return max(1, int(self.limit))

    @contextlib.asynccontextmanager
    async def slot(self, *, retry: bool = False) -> AsyncIterator[None]:
        """Hold one slot for the duration of the block; ``retry``: a request's later attempt,
        which waits ahead of the first attempts (see the module doc)."""
        await self._acquire(retry)
        try:
            yield
        finally:
            self.held -= 1
            self._wake()

    @contextlib.contextmanager
    def sending(self) -> Iterator[None]:
        """Count a request as on the wire for the duration of the block."""
        self.on_wire += 1
        try:
            yield
        finally:
            self.on_wire -= 1

    async def _acquire(self, retry: bool) -> None:
        if self.held < self.current and not self._waiters and not self._retry_waiters:
            self.held += 1
            return
        waiter = asyncio.get_running_loop().create_future()
        queue = self._retry_waiters if retry else self._waiters
        queue.append(waiter)
        try:
            await waiter
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():
                self.held -= 1  # handed a slot in the same turn it was cancelled: give it back
                self._wake()
            else:
                with contextlib.suppress(ValueError):
                    queue.remove(waiter)
            raise

    def _wake(self) -> None:
        for queue in (self._retry_waiters, self._waiters):  # later attempts first
            while queue and self.held < self.current:
                waiter = queue.popleft()
                if not waiter.done():
                    self.held += 1
                    waiter.set_result(None)

    def succeeded(self, sent_at: float, latency_s: float) -> None:
        """An attempt sent at ``sent_at`` (the clock's time) was answered in ``latency_s``."""
        if self.on_wire + 1 >= BUSY_SHARE * self.current:  # this request was on the wire too
            self.limit = min(
                float(self.maximum), self.limit + (1.0 if self.slow_start else 1.0 / self.limit)
            )
            self._wake()
        self._latencies.append(latency_s)
        self._new_latencies += 1
        if self._new_latencies < LATENCY_WINDOW:
            return
        self._new_latencies = 0
        median = statistics.median(self._latencies)
        if (
            self._lowest_median is None
            or median < self._lowest_median
            or (median > LATENCY_RISE * self._lowest_median and self._cut(sent_at, SLOW_FACTOR))
        ):
            self._lowest_median = median

    def rate_limited(self, sent_at: float) -> None:
        """An attempt sent at ``sent_at`` was answered 429."""
        self._cut(sent_at, RATE_LIMITED_FACTOR)

    def _cut(self, sent_at: float, factor: float) -> bool:
        now = self.clock()
        round_trip = statistics.median(self._latencies) if self._latencies else 1.0
        if sent_at <= self._last_cut or now - self._last_cut < round_trip:
            return False  # it reflects the old limit, or the new one had no time to act
        self._last_cut = now
        self.slow_start = False
        self.limit = max(1.0, self.limit * factor)
        return True
