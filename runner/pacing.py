"""How fast an endpoint may send: its configured budgets, and the pace its server asks for.

Two ``aiolimiter.AsyncLimiter`` leaky buckets hold the configured requests and tokens per
minute. A bucket holds ``LIMITER_BURST_S`` of allowance rather than a whole minute, so the
sustained rate is exact from the start. A request is charged its estimated tokens
(prompt characters / 4 + ``max_tokens``), in bucket-sized parts when it costs more than a
bucket holds (``acquire`` refuses an amount above the bucket's size).

The server's rate-limit headers (:mod:`runner.providers.rate_limits`) add a pace of their
own: when a budget the server reports falls to ``LOW_REMAINING`` of its limit, the endpoint is
held to the rate at which that budget refills, so it levels off instead of running into 429s;
when the budget has recovered to ``RECOVERED``, the pace is lifted and the endpoint may use
the burst the server allows. aiolimiter fixes a limiter's rate when it is made and has no
public way to change it, so a changed pace is a new limiter (``docs/engine.md``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from aiolimiter import AsyncLimiter

from runner.providers.rate_limits import Budget

LIMITER_BURST_S = 0.2  # seconds of allowance a limiter may spend at once (precision vs. jitter)
LOW_REMAINING = 0.2  # share of a server budget left at which the endpoint paces itself to it
RECOVERED = 0.5  # share left at which that pace is lifted again
PACE_CHANGE = 0.1  # relative change of a pace worth a new limiter


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
    """A leaky bucket of ``per_second`` units holding ``LIMITER_BURST_S`` of them."""

    def __init__(self, per_second: float) -> None:
        self.per_second = per_second
        self.capacity = max(1.0, per_second * LIMITER_BURST_S)
        self.limiter = AsyncLimiter(self.capacity, self.capacity / per_second)

    async def take(self, amount: float) -> None:
        """Wait until ``amount`` units fit, then take them (in bucket-sized parts)."""
        while amount > 0:
            part = min(amount, self.capacity)
            await self.limiter.acquire(part)
            amount -= part


class Pacing:
    """An endpoint's configured buckets and the paces its server's headers call for."""

    def __init__(self, requests_per_minute: float, tokens_per_minute: float) -> None:
        self.requests = RateBucket(requests_per_minute / 60.0)
        self.tokens = RateBucket(tokens_per_minute / 60.0)
        self.server: dict[str, RateBucket] = {}  # by budget name: paces the headers set

    async def admit(self, cost: Cost) -> None:
        """Wait until every bucket has room for one attempt of ``cost``."""
        await self.requests.take(1)
        await self.tokens.take(cost.tokens)
        for name, bucket in list(self.server.items()):
            await bucket.take(cost.of(name))

    def observe(self, budgets: Mapping[str, Budget]) -> None:
        """Take in what an answer's headers said of the server's budgets."""
        for name, budget in budgets.items():
            if not budget.limit:
                continue
            left = budget.remaining / budget.limit
            if left >= RECOVERED:
                self.server.pop(name, None)
                continue
            refill = budget.refill_per_s()
            if left > LOW_REMAINING or refill is None:
                continue
            # Below the mark, slow further as the budget drains (another client of the same
            # key may be spending it too), never below a tenth of the refill rate.
            pace = refill * max(0.1, left / LOW_REMAINING)
            current = self.server.get(name)
            if current is None or abs(current.per_second - pace) > PACE_CHANGE * pace:
                self.server[name] = RateBucket(pace)

    def describe(self) -> str:
        """The paces in force, for the progress line (empty when none)."""
        return ", ".join(
            f"{name} paced to {bucket.per_second * 60:.0f}/min"
            for name, bucket in sorted(self.server.items())
        )
