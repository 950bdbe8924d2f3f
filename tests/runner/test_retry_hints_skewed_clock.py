"""Retry hints written on the server's clock (Anthropic's RFC 3339 resets, a ``retry-after``
HTTP date) are dated against the answer's ``Date`` where this machine's clock is off the
server's, as the budgets' resets are (``runner.providers.rate_limits``). With the local clock
minutes fast, every such reset read as past: a hint of 0, and the 429 retried at once until
the attempts ran out."""

from __future__ import annotations

from datetime import UTC, datetime
from email.utils import formatdate

import pytest

from runner.providers.base import explicit_retry_after_s, retry_hint_s
from runner.providers.rate_limits import read_budgets

SERVER_NOW = 1_800_000_000.0  # the server's clock (its Date header)


def _rfc3339(unix: float) -> str:
    return datetime.fromtimestamp(unix, UTC).isoformat().replace("+00:00", "Z")


def _anthropic_429(reset_in_s: float) -> dict[str, str]:
    return {
        "date": formatdate(SERVER_NOW, usegmt=True),
        "anthropic-ratelimit-requests-limit": "50",
        "anthropic-ratelimit-requests-remaining": "0",
        "anthropic-ratelimit-requests-reset": _rfc3339(SERVER_NOW + reset_in_s),
    }


@pytest.mark.parametrize("skew_s", [-300.0, 0.0, 1.0, 300.0])
def test_an_anthropic_reset_hint_is_dated_by_the_servers_clock(skew_s: float) -> None:
    headers = _anthropic_429(54.0)
    ours = SERVER_NOW + skew_s  # this machine's clock, fast (+) or slow (-)
    hint = retry_hint_s(headers, now=ours)
    # Within the tolerance the local clock is kept (a Date has whole seconds only).
    expected = 54.0 - skew_s if abs(skew_s) <= 2.0 else 54.0
    assert hint == pytest.approx(expected, abs=1e-3)
    # The same reading as the budgets' (which pace the endpoint).
    budget = read_budgets(headers, now=ours)["requests"]
    assert budget.reset_s == pytest.approx(hint, abs=1e-3)


def test_a_retry_after_date_is_dated_by_the_servers_clock() -> None:
    headers = {
        "date": formatdate(SERVER_NOW, usegmt=True),
        "retry-after": formatdate(SERVER_NOW + 30, usegmt=True),
    }
    assert explicit_retry_after_s(headers, now=SERVER_NOW + 300) == pytest.approx(30.0)
    assert explicit_retry_after_s(headers, now=SERVER_NOW - 300) == pytest.approx(30.0)
    # Without a Date, the local clock is all there is.
    del headers["date"]
    assert explicit_retry_after_s(headers, now=SERVER_NOW + 10) == pytest.approx(20.0)
