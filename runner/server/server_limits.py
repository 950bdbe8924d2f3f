"""Server-side rate limits of the local server: requests/min and tokens/min token buckets.

Each limit is a token bucket holding up to one minute's allowance and refilling continuously
(``limit / 60`` per second), the way hosted APIs behave: a fresh server admits a burst of up
to the per-minute limit, then the sustained rate. A request is admitted only when every
configured bucket can pay for it; otherwise nothing is consumed and the caller gets the wait
that would make it pass (``retry-after``) plus the reset times OpenAI reports in
``x-ratelimit-reset-requests`` / ``x-ratelimit-reset-tokens``.

The clock is injected (``time.monotonic`` by default) so tests advance time without sleeping.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from cotaudit.errors import UsageError

Clock = Callable[[], float]


@dataclass(frozen=True, slots=True)
class RateLimitSpec:
    """Per-minute limits; ``None`` disables that limit.

    Token cost of a request = its prompt tokens (~4 characters each) + its ``max_tokens``,
    the admission estimate hosted APIs use. A request costing more than the whole per-minute
    allowance is charged the full allowance (it waits for a full bucket, it is not refused).
    """

    requests_per_minute: float | None = None
    tokens_per_minute: float | None = None

    def __post_init__(self) -> None:
        for name, value in (
            ("requests_per_minute", self.requests_per_minute),
            ("tokens_per_minute", self.tokens_per_minute),
        ):
            if value is not None and not value > 0:
                raise UsageError(
                    f"{name} must be > 0, got {value}",
                    where="server rate limit",
                    fix="give a positive number or leave it unset to disable the limit",
                )

    @property
    def enabled(self) -> bool:
        return self.requests_per_minute is not None or self.tokens_per_minute is not None


@dataclass(frozen=True, slots=True)
class Refusal:
    """Why and for how long a request was refused (all times in seconds)."""

    limit: str  # "requests" or "tokens": the bucket that was short
    retry_after_s: float  # wait after which this same request would be admitted
    reset_requests_s: float  # time until the requests bucket is full again
    reset_tokens_s: float  # time until the tokens bucket is full again


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


class ServerRateLimiter:
    """Admits or refuses requests against a :class:`RateLimitSpec`."""

    def __init__(self, spec: RateLimitSpec, *, clock: Clock = time.monotonic) -> None:
        self.spec = spec
        self._clock = clock
        now = clock()
        rpm, tpm = spec.requests_per_minute, spec.tokens_per_minute
        self._requests = None if rpm is None else _Bucket(rpm, now)
        self._tokens = None if tpm is None else _Bucket(tpm, now)

    def try_acquire(self, tokens: int) -> Refusal | None:
        """Charge one request costing ``tokens``; ``None`` when admitted, else a Refusal."""
        now = self._clock()
        req, tok = self._requests, self._tokens
        wait_req = wait_tok = 0.0
        if req is not None:
            req.refill(now)
            wait_req = req.wait_for(1.0)
        if tok is not None:
            tok.refill(now)
            wait_tok = tok.wait_for(float(tokens))
        if wait_req > 0 or wait_tok > 0:
            return Refusal(
                limit="requests" if wait_req >= wait_tok else "tokens",
                retry_after_s=max(wait_req, wait_tok),
                reset_requests_s=0.0 if req is None else req.time_to_full(),
                reset_tokens_s=0.0 if tok is None else tok.time_to_full(),
            )
        if req is not None:
            req.level -= 1.0
        if tok is not None:
            tok.level -= min(float(tokens), tok.capacity)
        return None

    def remaining(self) -> tuple[int | None, int | None]:
        """Whole requests and tokens left in the buckets now (``None`` where unlimited)."""
        now = self._clock()
        out: list[int | None] = []
        for bucket in (self._requests, self._tokens):
            if bucket is None:
                out.append(None)
            else:
                bucket.refill(now)
                out.append(int(bucket.level))
        return out[0], out[1]


def format_duration(seconds: float) -> str:
    """A duration the way OpenAI's ``x-ratelimit-reset-*`` headers write it (Go style).

    ``0.02`` -> ``"20ms"``, ``1.5`` -> ``"1.5s"``, ``360`` -> ``"6m0s"``, ``3725`` ->
    ``"1h2m5s"``. Sub-second values are rounded up to the millisecond so that waiting the
    advertised time is always enough.
    """
    ms = max(0, -(-round(seconds * 1_000_000) // 1000))  # ceil to whole ms, µs-rounded
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
