"""An endpoint's pacing: the configured buckets, and the pace its server's headers ask for
when a budget runs low (lifted once it has recovered)."""

from __future__ import annotations

import asyncio

import pytest

from runner.pacing import LIMITER_BURST_S, Cost, Pacing
from runner.providers.rate_limits import Budget


def test_a_low_budget_paces_the_endpoint_to_its_refill_and_a_recovered_one_lifts_it() -> None:
    pacing = Pacing(requests_per_minute=1e9, tokens_per_minute=1e12)
    # 3,000 a minute: 400 missing, back in 8 s, i.e. 50 per second.
    pacing.observe({"requests": Budget(limit=3000, remaining=2600, reset_s=8.0)})
    assert pacing.server == {}  # plenty left: the server's burst may be used
    pacing.observe({"requests": Budget(limit=3000, remaining=600, reset_s=48.0)})
    assert pacing.server["requests"].per_second == pytest.approx(50.0)
    assert "requests paced to 3000/min" in pacing.describe()
    kept = pacing.server["requests"]
    pacing.observe({"requests": Budget(limit=3000, remaining=590, reset_s=48.2)})
    assert pacing.server["requests"] is kept  # a change of under 10%: the same limiter
    # Still lower (another client of the key spends it too): slower than the refill.
    pacing.observe({"requests": Budget(limit=3000, remaining=150, reset_s=57.0)})
    assert pacing.server["requests"].per_second == pytest.approx(50.0 * 0.25)
    pacing.observe({"requests": Budget(limit=3000, remaining=1200, reset_s=36.0)})
    # Between the marks the pace holds, back at the refill rate: the budget levels off.
    assert pacing.server["requests"].per_second == pytest.approx(50.0)
    pacing.observe({"requests": Budget(limit=3000, remaining=1600, reset_s=28.0)})
    assert pacing.server == {} and pacing.describe() == ""


def test_budgets_without_a_limit_or_a_reset_set_no_pace() -> None:
    pacing = Pacing(requests_per_minute=600, tokens_per_minute=1e6)
    pacing.observe(
        {
            "tokens": Budget(limit=None, remaining=0, reset_s=5.0),
            "requests": Budget(limit=100, remaining=1, reset_s=None),
        }
    )
    assert pacing.server == {}


def test_each_budget_is_charged_what_the_request_costs_in_it() -> None:
    cost = Cost(input_tokens=500, output_tokens=64)
    assert [cost.of(d) for d in ("requests", "tokens", "input-tokens", "output-tokens")] == [
        1.0,
        564.0,
        500.0,
        64.0,
    ]


async def test_a_request_above_a_bucket_waits_for_its_whole_cost() -> None:
    # 6,000 tokens a minute = 100/s in a bucket of 20: a 30-token request is charged in two
    # parts, the second after the first has drained, ~0.1 s later. (aiolimiter keeps time
    # by the event loop's clock, which a test cannot replace.)
    pacing = Pacing(requests_per_minute=1e9, tokens_per_minute=6000)
    assert pacing.tokens.capacity == pytest.approx(100 * LIMITER_BURST_S)
    loop = asyncio.get_running_loop()
    start = loop.time()
    await pacing.admit(Cost(input_tokens=26, output_tokens=4))
    assert loop.time() - start == pytest.approx(0.1, abs=0.05)


class FakeTime:
    def __init__(self) -> None:
        self.now = 100.0
        self.sleeps: list[float] = []

    def clock(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


def test_without_headers_a_pace_is_learned_from_429s() -> None:
    from runner.pacing import CUT_SPACING, FIRST_PACE, PROBE_GROWTH, RATE_CUT, RATE_GROWTH

    t = FakeTime()
    pacing = Pacing(1e9, 1e12, clock=t.clock, sleep=t.sleep)
    pacing.refused(None, 1.0)
    assert pacing.learned is None  # nothing got through yet: nothing to learn from
    for _ in range(400):  # 400 successes in the last 2 s: 200 per second (a burst)
        t.now += 0.005
        pacing.answered()
    pacing.refused(None, 1.0)
    assert pacing.learned is not None
    assert pacing.learned.per_second == pytest.approx(FIRST_PACE * 200.0)
    first = pacing.learned
    pacing.refused(None, 1.0)  # let go before the pace existed: not a second cut
    assert pacing.learned is first
    t.now += 1.0
    pacing.answered()  # a second without a cut: the first pace grows fast
    assert pacing.learned.per_second == pytest.approx(20.0 * (1 + PROBE_GROWTH))
    grown = pacing.learned
    pacing.refused(grown, 1.0)
    assert pacing.learned is grown  # too soon: grown has not let CUT_SPACING requests go
    t.now += CUT_SPACING / grown.per_second
    pacing.refused(grown, 1.0)
    assert pacing.learned.per_second == pytest.approx(25.0 * RATE_CUT)
    t.now += 1.0
    pacing.answered()  # after its first cut, it grows slowly
    assert pacing.learned.per_second == pytest.approx(25.0 * RATE_CUT * (1 + RATE_GROWTH))
    assert "paced to" in pacing.describe() and "after 429s" in pacing.describe()


async def test_the_first_bare_429_holds_the_endpoint_for_its_hint() -> None:
    t = FakeTime()
    pacing = Pacing(1e9, 1e12, clock=t.clock, sleep=t.sleep)
    pacing.answered()
    pacing.refused(None, 2.5)
    assert await pacing.admit(Cost(input_tokens=1, output_tokens=1)) is pacing.learned
    assert t.sleeps == [pytest.approx(2.5)]
