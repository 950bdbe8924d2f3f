"""Provider mode: per-key budgets, and the providers' rate-limit headers on every answer.

With any budget configured (``ServerConfig.rate_limit``), the local server behaves like a
hosted API towards a client: each API key (the ``Authorization: Bearer`` or ``x-api-key``
value; requests without one share a budget) has its own buckets
(:class:`~runner.server.server_limits.ServerRateLimiter`), a request that does not fit is
refused with a 429 and ``retry-after``, and every answer carries the rate-limit headers as
OpenAI and Anthropic send them (``docs/server.md``), each route its own protocol's family by
default (``RateLimitSpec.limit_headers``):

- ``x-ratelimit-{limit,remaining,reset}-{requests,tokens}``, reset as a duration (``6m0s``);
- ``anthropic-ratelimit-{requests,tokens,input-tokens,output-tokens}-{limit,remaining,reset}``,
  reset as an RFC 3339 time. ``tokens`` there is the most exhausted of the token budgets.

Keys are held in memory only, never logged or shown.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from datetime import UTC, datetime

from runner.server.anthropic_codec import ROUTE_ANTHROPIC
from runner.server.openai_codec import ROUTE_OPENAI
from runner.server.server_limits import (
    Clock,
    RateLimitSpec,
    Refusal,
    ServerRateLimiter,
    format_duration,
)

_OPENAI_DIMENSIONS = ("requests", "tokens")


class ProviderLimits:
    """Every key's budgets under one :class:`RateLimitSpec`."""

    def __init__(
        self,
        spec: RateLimitSpec,
        *,
        clock: Clock = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        self.spec = spec
        self._clock = clock
        self._wall_clock = wall_clock
        self._keys: dict[str, ServerRateLimiter] = {}

    def budget(self, key: str | None) -> ServerRateLimiter:
        """The buckets of ``key`` (created full on its first request)."""
        name = key or ""
        limiter = self._keys.get(name)
        if limiter is None:
            limiter = self._keys[name] = ServerRateLimiter(self.spec, clock=self._clock)
        return limiter

    def headers(self, budget: ServerRateLimiter, route: str) -> dict[str, str]:
        """The header families an answer on ``route`` carries for ``budget`` as it stands
        now: the route's own protocol's, both, or none (``RateLimitSpec.limit_headers``)."""
        style = self.spec.limit_headers
        openai = style == "both" or (style == "route" and route == ROUTE_OPENAI)
        anthropic = style == "both" or (style == "route" and route == ROUTE_ANTHROPIC)
        states = budget.states()
        out: dict[str, str] = {}
        if openai:
            for name in _OPENAI_DIMENSIONS:
                state = states.get(name)
                if state is not None:
                    out[f"x-ratelimit-limit-{name}"] = str(state.limit)
                    out[f"x-ratelimit-remaining-{name}"] = str(state.remaining)
                    out[f"x-ratelimit-reset-{name}"] = format_duration(state.reset_s)
        if not anthropic:
            return out
        token_states = [s for n, s in states.items() if n != "requests"]
        if token_states:
            states["tokens"] = min(token_states, key=lambda s: s.remaining / max(1, s.limit))
        now = self._wall_clock()
        for name, state in states.items():
            prefix = f"anthropic-ratelimit-{name}"
            out[f"{prefix}-limit"] = str(state.limit)
            out[f"{prefix}-remaining"] = str(state.remaining)
            out[f"{prefix}-reset"] = _rfc3339(now + state.reset_s)
        return out

    def refusal_headers(
        self, refusal: Refusal, budget: ServerRateLimiter, route: str
    ) -> dict[str, str]:
        """The headers of a 429: the wait in whole seconds (and to the millisecond with
        ``retry_after_ms``), and the route's rate-limit headers."""
        headers = {"retry-after": str(max(1, math.ceil(refusal.retry_after_s)))}
        if self.spec.retry_after_ms:
            headers["retry-after-ms"] = str(max(1, math.ceil(refusal.retry_after_s * 1000)))
        headers.update(self.headers(budget, route))
        return headers


def _rfc3339(timestamp: float) -> str:
    """``2026-11-30T10:20:00.123Z``: Anthropic's reset format, to the millisecond (rounded
    up, so waiting until then is always enough)."""
    ms = math.ceil(timestamp * 1000)
    when = datetime.fromtimestamp(ms / 1000, UTC)
    return when.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}Z"
