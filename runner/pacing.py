"""How fast an endpoint may send: its configured budgets, and the pace its server asks for.

Two ``aiolimiter.AsyncLimiter`` leaky buckets hold the configured requests and tokens per
minute. A bucket holds ``LIMITER_BURST_S`` of allowance rather than a whole minute, so the
sustained rate is exact from the start. A request is charged its estimated tokens
(prompt characters / 4 + ``max_tokens``), in bucket-sized parts when it costs more than a
bucket holds (``acquire`` refuses an amount above the bucket's size).

The server's rate-limit headers (:mod:`runner.providers.rate_limits`) add a pace of their
own: when a budget the server reports falls to ``LOW_REMAINING`` of its limit, the endpoint is
paced to the rate at which that budget refills, scaled by how far the budget is from that mark
(slower below it, faster above it), so the budget levels off at the mark instead of running
into 429s, and what the endpoint sends in the long run is the refill rate; when the budget
has recovered to ``RECOVERED``, the pace is lifted and the endpoint may use the burst the
server allows.

A server that sends no such headers says only "429, retry after". For an endpoint with
``max_concurrency = "auto"`` (a fixed one is the user's choice), the first such 429 holds the
whole endpoint for the hint and sets a pace far below what got through just before
(``FIRST_PACE`` of the successes per second of the last ``DELIVERY_WINDOW_S``: that rate was
the server's burst allowance, not its limit). The pace then grows by ``PROBE_GROWTH`` a second
until a 429 cuts it, and from then on by ``RATE_GROWTH`` a second. A 429 of a request the pace
in force let go cuts it by ``RATE_CUT``, once that pace has let ``CUT_SPACING`` requests go: a
server refuses at once, so until then the 429s say nothing about the new pace. The server's
own bucket keeps what the pace leaves unused for later, so the sawtooth costs little. A server
that answers 429 at random, not for a rate, would drive such a pace down to ``MIN_PACE``:
give it a fixed ``max_concurrency``.

aiolimiter fixes a limiter's rate when it is made and has no public way to change it, so a
changed pace is a new limiter (``docs/engine.md``). Clock and sleep are injected.
"""

from __future__ import annotations

import asyncio
import functools
import time
from collections import deque
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass

from aiolimiter import AsyncLimiter

from runner.providers.rate_limits import Budget

LIMITER_BURST_S = 0.2  # seconds of allowance a limiter may spend at once (precision vs. jitter)
LOW_REMAINING = 0.2  # share of a server budget left at which the endpoint paces itself to it
RECOVERED = 0.5  # share left at which that pace is lifted again
PACE_CHANGE = 0.02  # relative change of a pace worth a new limiter (each change is a new one)
RATE_CUT = 0.7  # a 429 without headers: the learned pace falls to this share
RATE_GROWTH = 0.02  # and rises by this share for each second without one
FIRST_PACE = 0.1  # the first learned pace: this share of what got through before the 429
PROBE_GROWTH = 0.25  # the first pace grows this much a second, until a 429 cuts it
DELIVERY_WINDOW_S = 2.0  # seconds of successes the first learned pace is measured over
MAX_HOLD_S = 60.0  # the longest a 429's hint may hold a whole endpoint
MIN_PACE = 1 / 60  # requests per second: a learned pace never falls below one a minute
CUT_SPACING = 5  # requests a learned pace lets go before a 429 may cut it again


@dataclass(frozen=True, slots=True)
class Cost:
    """What one attempt of a request costs in each budget a server may keep."""

    input_tokens: int  # the prompt, estimated at ~4 characters per token
    output_tokens: int  # max_tokens: what the server reserves at admission

    @property
    def tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    def of(self, dimension: str) -> float:
        """The cost in a budget named as the headers name it."""
        if dimension == "requests":
            return 1.0
        if dimension == "input-tokens":
            return float(self.input_tokens)
        if dimension == "output-tokens":
            return float(self.output_tokens)
        return float(self.tokens)


class RateBucket:
    """A leaky bucket of ``per_second`` units holding ``LIMITER_BURST_S`` of them.

    ``spent`` makes it start as if it had just let its whole allowance go: a pace that
    replaces another (or engages once a budget runs low) must not let a burst through. The
    first :meth:`take` pays that allowance before its own amount (aiolimiter offers no public
    way to set a limiter's level).
    """

    def __init__(self, per_second: float, *, spent: bool = False) -> None:
        self.per_second = per_second
        self.capacity = max(1.0, per_second * LIMITER_BURST_S)
        self.limiter = AsyncLimiter(self.capacity, self.capacity / per_second)
        self.owed = self.capacity if spent else 0.0
        # One request takes its parts at a time. Interleaved, the parts of N waiting
        # requests drained together: none was let go before N times its cost had passed,
        # then all at once (32 requests of 512 output tokens behind a pace of 3,600 a
        # minute waited about 4.6 minutes, where the first should go after 8.5 s).
        self._turn = asyncio.Lock()

    async def take(self, amount: float, in_force: Callable[[], bool] = lambda: True) -> bool:
        """Wait until ``amount`` units fit, then take them (in bucket-sized parts); False,
        having stopped, as soon as ``in_force()`` says the bucket no longer paces anyone (a
        pace lifted or replaced: its waiters owe it nothing more)."""
        async with self._turn:
            amount, self.owed = amount + self.owed, 0.0
            while amount > 0:
                if not in_force():
                    return False
                part = min(amount, self.capacity)
                await self.limiter.acquire(part)
                amount -= part
        return True


class Pacing:
    """An endpoint's configured buckets and the paces its server calls for."""

    def __init__(
        self,
        requests_per_minute: float,
        tokens_per_minute: float,
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self.requests = RateBucket(requests_per_minute / 60.0)
        self.tokens = RateBucket(tokens_per_minute / 60.0)
        self.server: dict[str, RateBucket] = {}  # by budget name: paces the headers set
        self.learned: RateBucket | None = None  # requests: the pace learned from bare 429s
        self.clock = clock
        self.sleep = sleep
        self._hold_until = -float("inf")
        self._changed = -float("inf")
        self._probing = True  # the learned pace grows fast until its first cut
        self._answers: deque[float] = deque()  # success times within DELIVERY_WINDOW_S

    async def admit(self, cost: Cost) -> RateBucket | None:
        """Wait until every bucket has room for one attempt of ``cost``; returns the learned
        pace that admitted it (give it to :meth:`refused` if the attempt gets a 429).

        A pace replaced while a request waited for it no longer counts: the request then
        waits for the pace in force, so a cut takes effect for everyone already waiting; and
        one lifted (its budget recovered) lets them all go at once.
        """
        while (hold := self._hold_until - self.clock()) > 0:
            await self.sleep(hold)
        await self.requests.take(1)
        await self.tokens.take(cost.tokens)
        for name in list(self.server):
            while (bucket := self.server.get(name)) is not None:
                if await bucket.take(cost.of(name), functools.partial(self._paces, name, bucket)):
                    break
        while (learned := self.learned) is not None:
            if await learned.take(1, functools.partial(self._learns, learned)):
                break
        return self.learned

    def _paces(self, name: str, bucket: RateBucket) -> bool:
        return self.server.get(name) is bucket

    def _learns(self, bucket: RateBucket) -> bool:
        return self.learned is bucket

    def answered(self) -> None:
        """A success: counted for the delivery rate; a second without a 429 raises a learned
        pace."""
        now = self.clock()
        answers = self._answers
        answers.append(now)
        while answers[0] < now - DELIVERY_WINDOW_S:
            answers.popleft()
        if self.learned is not None and now - self._changed >= 1.0:
            self._changed = now
            growth = PROBE_GROWTH if self._probing else RATE_GROWTH
            self.learned = RateBucket(self.learned.per_second * (1.0 + growth), spent=True)

    def refused(self, admitted_by: RateBucket | None, hint_s: float | None) -> None:
        """A 429 whose answer said nothing of the server's budgets, for an attempt that
        ``admitted_by`` (what :meth:`admit` returned) let go."""
        if admitted_by is not self.learned:
            return  # let go by an earlier pace: it says nothing of the one in force
        now = self.clock()
        if self.learned is not None and now - self._changed < CUT_SPACING / self.learned.per_second:
            return  # too soon: the new pace has not had its chance yet
        if self.learned is None:
            delivered = len(self._answers) / DELIVERY_WINDOW_S
            if not delivered:
                return  # nothing got through to learn from: the retries' waits must do
            self.learned = RateBucket(max(MIN_PACE, FIRST_PACE * delivered), spent=True)
            self._hold_until = now + min(hint_s or 0.0, MAX_HOLD_S)
        else:
            self.learned = RateBucket(max(MIN_PACE, self.learned.per_second * RATE_CUT), spent=True)
            self._probing = False
        self._changed = now

    def observe(self, budgets: Mapping[str, Budget]) -> None:
        """Take in what an answer's headers said of the server's budgets."""
        for name, budget in budgets.items():
            if not budget.limit:
                continue
            left = budget.remaining / budget.limit
            if left >= RECOVERED:
                self.server.pop(name, None)
                continue
            current = self.server.get(name)
            refill = budget.refill_per_s()
            if refill is None or (current is None and left > LOW_REMAINING):
                continue
            # Once paced, the pace holds the budget at the mark: in proportion to what is left,
            # so below it the endpoint sends slower than the budget refills (another client of
            # the same key may be spending it too; never below a tenth of the refill) and
            # above it faster, until the budget is back at the mark. Capped at the refill, a
            # pace set on the way back up stayed within PACE_CHANGE below it for good.
            pace = refill * max(0.1, left / LOW_REMAINING)
            if current is None or abs(current.per_second - pace) > PACE_CHANGE * pace:
                self.server[name] = RateBucket(pace, spent=True)

    def describe(self) -> str:
        """The paces in force, for the progress line (empty when none)."""
        paces = [
            f"{name} paced to {bucket.per_second * 60:.0f}/min"
            for name, bucket in sorted(self.server.items())
        ]
        if self.learned is not None:
            paces.append(f"paced to {self.learned.per_second * 60:.0f} requests/min after 429s")
        return ", ".join(paces)
