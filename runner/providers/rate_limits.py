"""What an answer's rate-limit headers say is left of each of the server's budgets.

Read on every answer (a 200 as much as a 429), in both providers' forms (``../shared/
PROVIDERS.md``):

- OpenAI: ``x-ratelimit-{limit,remaining,reset}-{requests,tokens}``, the reset a duration such
  as ``6m0s``, ``1.5s`` or ``20ms``;
- Anthropic: ``anthropic-ratelimit-{requests,tokens,input-tokens,output-tokens}-{limit,
  remaining,reset}``, the reset an RFC 3339 time.

Either form's reset is the time until the budget is full again. Anthropic's is a time on the
server's clock: where this machine's clock is more than :data:`CLOCK_SKEW_TOLERANCE_S` off the
answer's ``Date``, the reset is dated from ``Date`` (a clock five minutes slow would otherwise
read a 54 s reset as 354 s and pace the endpoint six times too slow; one five minutes fast
would read it as past, and retry a 429 at once). :func:`dating_clock` is that choice, for the
retry hints too (``runner.providers.base.retry_hint_s``). Where both forms
describe one budget, the more exhausted one is kept. Anthropic's ``tokens`` family (the most
restrictive of its input and output budgets) is dropped when those two are given themselves.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from email.utils import parsedate_to_datetime

DIMENSIONS = ("requests", "tokens", "input-tokens", "output-tokens")
# Go's time.Duration units, as OpenAI writes them (longest first: "ms" before "m").
_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(ns|us|µs|μs|ms|h|m|s)")
_SCALE = {
    "ns": 1e-9,
    "us": 1e-6,
    "µs": 1e-6,  # MICRO SIGN, as Go writes it
    "μs": 1e-6,  # GREEK SMALL LETTER MU
    "ms": 0.001,
    "s": 1.0,
    "m": 60.0,
    "h": 3600.0,
}
# A Date header has whole seconds: a gap above this is the clocks', not the rounding's.
CLOCK_SKEW_TOLERANCE_S = 2.0


@dataclass(frozen=True, slots=True)
class Budget:
    """One budget as a server reported it."""

    limit: float | None  # units per window; None when the server did not say
    remaining: float
    reset_s: float | None  # seconds until the budget is full again; None when not said

    @property
    def used_fraction(self) -> float:
        return 1.0 - self.remaining / self.limit if self.limit else 0.0

    def refill_per_s(self) -> float | None:
        """Units per second the budget regains, as its limit, remaining and reset imply;
        None when they do not say (a full budget, or no reset)."""
        if self.limit is None or self.reset_s is None or self.reset_s <= 0:
            return None
        missing = self.limit - self.remaining
        return missing / self.reset_s if missing > 0 else None


def parse_duration_s(text: str) -> float | None:
    """OpenAI reset durations: ``"1s"``, ``"6m0s"``, ``"20ms"``, ``"1h2m3.5s"`` -> seconds."""
    text = text.strip()
    if not text:
        return None
    pos, total = 0, 0.0
    for match in _DURATION_PART.finditer(text):
        if match.start() != pos:
            return None
        total += float(match.group(1)) * _SCALE[match.group(2)]
        pos = match.end()
    if pos != len(text):
        return finite_number(text)  # a bare number of seconds
    return total


def finite_number(text: str | None) -> float | None:
    """``text`` as a number, or None: unreadable, or not finite. ``float`` reads "inf" and
    "nan" too, and a budget or a wait made of them is no budget: a reset of "inf" made a pace
    of zero, which no rate bucket can be built from."""
    if text is None:
        return None
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def rfc3339_in_s(text: str, now: float) -> float | None:
    """Seconds from ``now`` (UNIX seconds) until an RFC 3339 time; None if unreadable."""
    try:
        # RFC 3339 allows a lower-case "t" and "z"; fromisoformat reads only upper case.
        when = datetime.fromisoformat(text.strip().upper().replace("Z", "+00:00"))
    except ValueError:
        return None
    if when.tzinfo is None:
        return None
    return when.timestamp() - now


def _server_time(headers: Mapping[str, str]) -> float | None:
    """The answer's ``Date`` (UNIX seconds); None when absent or unreadable."""
    text = headers.get("date")
    if text is None:
        return None
    try:
        when = parsedate_to_datetime(text)
    except (TypeError, ValueError):
        return None
    return when.timestamp() if when.tzinfo is not None else None


def dating_clock(headers: Mapping[str, str], now: float) -> float:
    """``now``, or the answer's ``Date`` where this machine's clock is off the server's: the
    clock to date any time the server wrote on its own clock against (an Anthropic reset, a
    ``retry-after`` HTTP date). ``headers``' names are lower-cased."""
    server_now = _server_time(headers)
    if server_now is not None and abs(server_now - now) > CLOCK_SKEW_TOLERANCE_S:
        return server_now
    return now


def read_budgets(headers: Mapping[str, str], *, now: float) -> dict[str, Budget]:
    """The budgets an answer's headers (names lower-cased) describe, by dimension; empty when
    it carries none. ``now`` (UNIX seconds, this machine's clock) dates Anthropic's resets,
    unless the answer's ``Date`` shows that clock off the server's (module docstring)."""
    found: dict[str, Budget] = {}
    for name in ("requests", "tokens"):
        remaining = finite_number(headers.get(f"x-ratelimit-remaining-{name}"))
        if remaining is not None:
            reset = headers.get(f"x-ratelimit-reset-{name}")
            found[name] = Budget(
                limit=finite_number(headers.get(f"x-ratelimit-limit-{name}")),
                remaining=remaining,
                reset_s=None if reset is None else parse_duration_s(reset),
            )
    anthropic = {}
    dated = False  # only an Anthropic reset is dated: the Date is read for it, once
    for name in DIMENSIONS:
        prefix = f"anthropic-ratelimit-{name}"
        remaining = finite_number(headers.get(f"{prefix}-remaining"))
        if remaining is not None:
            reset = headers.get(f"{prefix}-reset")
            if reset is not None and not dated:
                dated, now = True, dating_clock(headers, now)
            anthropic[name] = Budget(
                limit=finite_number(headers.get(f"{prefix}-limit")),
                remaining=remaining,
                reset_s=None if reset is None else rfc3339_in_s(reset, now),
            )
    if "input-tokens" in anthropic or "output-tokens" in anthropic:
        anthropic.pop("tokens", None)
    for name, budget in anthropic.items():
        known = found.get(name)
        if known is None or budget.used_fraction > known.used_fraction:
            found[name] = budget
    return found
