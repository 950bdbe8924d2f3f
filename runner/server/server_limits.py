"""Server-side budgets of the local server: token buckets for requests and tokens per minute.

Each limit is a token bucket holding up to one minute's allowance and refilling continuously
(``limit / 60`` per second), the way hosted APIs describe theirs: a fresh key may send a burst
of up to the per-minute limit, then the sustained rate. A request is admitted only when every
configured bucket can pay for it; otherwise nothing is consumed and the caller gets the wait
after which the same request would pass. One :class:`ServerRateLimiter` holds one API key's
buckets; :mod:`runner.server.provider_limits` keeps one per key and writes the headers.

What a request costs, per bucket (the admission estimates OpenAI and Anthropic document):

- ``requests``: 1;
- ``tokens``: prompt tokens + ``max_tokens`` (OpenAI's one token budget);
- ``input-tokens``: prompt tokens (Anthropic's ITPM);
- ``output-tokens``: ``max_tokens`` at admission, corrected to the tokens really produced when
  the answer is done (Anthropic's OTPM: :meth:`ServerRateLimiter.settle_output`).

The clock is injected (``time.monotonic`` by default) so tests advance time without sleeping.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from cotaudit.errors import UsageError

Clock = Callable[[], float]

DIMENSIONS = ("requests", "tokens", "input-tokens", "output-tokens")
LimitHeaders = Literal["route", "both", "none"]
LIMIT_HEADERS: tuple[LimitHeaders, ...] = ("route", "both", "none")


@dataclass(frozen=True, slots=True)
class RateLimitSpec:
    """Per-minute budgets of one API key; ``None`` disables that budget.

    A request costing more than a whole bucket is charged the full bucket (it waits for a full
    bucket; it is not refused forever), except where the server refuses it outright as OpenAI
    does (:meth:`ServerRateLimiter.oversized`). ``limit_headers`` says which rate-limit headers an
    answer carries: ``route``, its own protocol's family (OpenAI's on the OpenAI route,
    Anthropic's on the Anthropic route), as a hosted provider sends them; ``both``, both
    families on every route; ``none``, none, only ``retry-after`` on a 429: a server that tells
    a client nothing but "slow down". A 429's ``retry-after`` is in whole seconds, as both
    providers send it; ``retry_after_ms`` adds the exact wait as ``retry-after-ms``, as some
    OpenAI-compatible servers do.
    """

    requests_per_minute: float | None = None
    tokens_per_minute: float | None = None
    input_tokens_per_minute: float | None = None
    output_tokens_per_minute: float | None = None
    limit_headers: LimitHeaders = "route"
    retry_after_ms: bool = False

    def __post_init__(self) -> None:
        if self.limit_headers not in LIMIT_HEADERS:
            raise UsageError(
                f"limit_headers must be one of {', '.join(LIMIT_HEADERS)}, "
                f"got {self.limit_headers!r}",
                where="server rate limit",
                fix="route: each protocol's own headers; both; none",
            )
        for name, value in self.per_minute().items():
            if value is not None and not value > 0:
                raise UsageError(
                    f"{name.replace('-', '_')}_per_minute must be > 0, got {value}",
                    where="server rate limit",
                    fix="give a positive number or leave it unset to disable the limit",
                )

    def per_minute(self) -> dict[str, float | None]:
        """Each budget by dimension name (``requests``, ``tokens``, ...)."""
        return dict(
            zip(
                DIMENSIONS,
                (
                    self.requests_per_minute,
                    self.tokens_per_minute,
                    self.input_tokens_per_minute,
                    self.output_tokens_per_minute,
                ),
                strict=True,
            )
        )

    @property
    def enabled(self) -> bool:
        return any(value is not None for value in self.per_minute().values())


@dataclass(frozen=True, slots=True)
class Refusal:
    """Why and for how long a request was refused (all times in seconds)."""

    limit: str  # the dimension that was short: "requests", "tokens", ...
    retry_after_s: float  # wait after which this same request would be admitted
    reset_requests_s: float  # time until the requests bucket is full again
    reset_tokens_s: float  # time until the tokens bucket is full again


@dataclass(frozen=True, slots=True)
class BucketState:
    """One bucket as the headers report it."""

    limit: int
    remaining: int
    reset_s: float  # seconds until the bucket is full again


class _Bucket:
    __slots__ = ("capacity", "level", "rate", "updated")

    def __init__(self, per_minute: float, now: float) -> None:
        self.capacity = per_minute
        self.rate = per_minute / 60.0  # units per second
        self.level = per_minute
        self.updated = now

    def refill(self, now: float) -> None:
        elapsed = now - self.updated
        if elapsed > 0:
            self.level = min(self.capacity, self.level + elapsed * self.rate)
            self.updated = now

    def wait_for(self, cost: float) -> float:
        return max(0.0, (min(cost, self.capacity) - self.level) / self.rate)

    def time_to_full(self) -> float:
        return (self.capacity - self.level) / self.rate

    def state(self) -> BucketState:
        return BucketState(int(self.capacity), max(0, int(self.level)), self.time_to_full())


class ServerRateLimiter:
    """One API key's budgets: admits or refuses requests against a :class:`RateLimitSpec`."""

    def __init__(self, spec: RateLimitSpec, *, clock: Clock = time.monotonic) -> None:
        self.spec = spec
        self._clock = clock
        now = clock()
        self._buckets = {
            name: _Bucket(per_minute, now)
            for name, per_minute in spec.per_minute().items()
            if per_minute is not None
        }

    def try_acquire(
        self, tokens: int, *, input_tokens: int | None = None, output_tokens: int | None = None
    ) -> Refusal | None:
        """Charge one request; ``None`` when admitted, else a Refusal (nothing charged).

        ``tokens`` is the request's total estimate (prompt + ``max_tokens``); the input and
        output estimates default to it when not given.
        """
        now = self._clock()
        costs = {
            "requests": 1.0,
            "tokens": float(tokens),
            "input-tokens": float(tokens if input_tokens is None else input_tokens),
            "output-tokens": float(tokens if output_tokens is None else output_tokens),
        }
        waits: dict[str, float] = {}
        for name, bucket in self._buckets.items():
            bucket.refill(now)
            waits[name] = bucket.wait_for(costs[name])
        short = max(waits, key=waits.__getitem__, default=None)
        if short is not None and waits[short] > 0:
            return Refusal(
                limit=short,
                retry_after_s=waits[short],
                reset_requests_s=self._time_to_full("requests"),
                reset_tokens_s=self._time_to_full("tokens"),
            )
        for name, bucket in self._buckets.items():
            bucket.level -= min(costs[name], bucket.capacity)
        return None

    def oversized(self, tokens: int) -> BucketState | None:
        """The ``tokens`` budget when one request's estimate is larger than all of it, else
        ``None``: OpenAI refuses such a request with a 429 that no wait cures ("Request too
        large"), where a smaller one waits for its budget to refill."""
        bucket = self._buckets.get("tokens")
        if bucket is None or tokens <= bucket.capacity:
            return None
        bucket.refill(self._clock())
        return bucket.state()

    def settle_output(self, estimated: int, produced: int) -> None:
        """Correct the output budget once an answer is done: charge the tokens really produced
        instead of the ``max_tokens`` estimate (Anthropic's documented OTPM accounting). A
        bucket charged past empty stays below zero until it refills."""
        bucket = self._buckets.get("output-tokens")
        if bucket is None:
            return
        charged = min(float(estimated), bucket.capacity)  # what try_acquire took
        if produced != charged:
            bucket.refill(self._clock())
            bucket.level = min(bucket.capacity, bucket.level + (charged - produced))

    def _time_to_full(self, name: str) -> float:
        bucket = self._buckets.get(name)
        return 0.0 if bucket is None else bucket.time_to_full()

    def states(self) -> dict[str, BucketState]:
        """Every configured bucket's limit, whole units remaining and time to full, now."""
        now = self._clock()
        out = {}
        for name, bucket in self._buckets.items():
            bucket.refill(now)
            out[name] = bucket.state()
        return out

    def remaining(self) -> tuple[int | None, int | None]:
        """Whole requests and tokens left in the buckets now (``None`` where unlimited)."""
        states = self.states()
        requests, tokens = states.get("requests"), states.get("tokens")
        return (
            None if requests is None else requests.remaining,
            None if tokens is None else tokens.remaining,
        )


def format_duration(seconds: float) -> str:
    """A duration the way OpenAI's ``x-ratelimit-reset-*`` headers write it (Go style).

    ``0.02`` -> ``"20ms"``, ``1.5`` -> ``"1.5s"``, ``360`` -> ``"6m0s"``, ``3725`` ->
    ``"1h2m5s"``, ``0`` -> ``"0s"`` (Go's zero ``Duration``). Sub-second values are rounded up
    to the millisecond so that waiting the advertised time is always enough.
    """
    ms = max(0, -(-round(seconds * 1_000_000) // 1000))  # ceil to whole ms, µs-rounded
    if ms == 0:
        return "0s"
    if ms < 1000:
        return f"{ms}ms"
    hours, rest_ms = divmod(ms, 3_600_000)
    minutes, rest_ms = divmod(rest_ms, 60_000)
    secs = f"{rest_ms / 1000:.3f}".rstrip("0").rstrip(".")
    if hours:
        return f"{hours}h{minutes}m{secs}s"
    if minutes:
        return f"{minutes}m{secs}s"
    return f"{secs}s"
