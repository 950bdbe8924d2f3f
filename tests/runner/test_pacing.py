"""An endpoint's pacing: the configured buckets, and the pace its server's headers ask for
when a budget runs low (lifted once it has recovered)."""

from __future__ import annotations

import asyncio
import itertools

import pytest

from runner.pacing import LIMITER_BURST_S, Cost, Pacing
from runner.providers.rate_limits import Budget
from tests.fake_time import FakeTime
from tests.runner.virtual_time import run_in_virtual_time


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
    pacing.observe({"requests": Budget(limit=3000, remaining=600, reset_s=48.0)})
    # At the mark, the refill rate: the budget levels off there.
    assert pacing.server["requests"].per_second == pytest.approx(50.0)
    pacing.observe({"requests": Budget(limit=3000, remaining=1200, reset_s=36.0)})
    # Between the marks, faster in proportion, back down to the mark.
    assert pacing.server["requests"].per_second == pytest.approx(50.0 * 2)
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


def test_a_request_above_a_bucket_waits_for_its_whole_cost() -> None:
    # 6,000 tokens a minute = 100/s in a bucket of 20: a 30-token request is charged in two
    # parts, the second after the first has drained, 0.1 s later (in the loop's virtual time:
    # aiolimiter keeps time by the event loop's clock).
    async def admit() -> float:
        pacing = Pacing(requests_per_minute=1e9, tokens_per_minute=6000)
        assert pacing.tokens.capacity == pytest.approx(100 * LIMITER_BURST_S)
        loop = asyncio.get_running_loop()
        start = loop.time()
        await pacing.admit(Cost(input_tokens=26, output_tokens=4))
        return loop.time() - start

    assert run_in_virtual_time(admit()) == pytest.approx(0.1, abs=1e-3)


def test_a_new_pace_lets_no_burst_through() -> None:
    # A pace the server's headers set, or a changed one, is a new limiter: it must start as
    # if it had just let its allowance go, or every change would let LIMITER_BURST_S of
    # requests through at once, on top of the pace.
    async def admissions() -> list[float]:
        pacing = Pacing(requests_per_minute=1e9, tokens_per_minute=1e12)
        loop = asyncio.get_running_loop()
        cost = Cost(input_tokens=1, output_tokens=1)
        times = []
        pacing.observe({"requests": Budget(limit=3000, remaining=600, reset_s=48.0)})  # 50/s
        for _ in range(20):
            await pacing.admit(cost)
            times.append(loop.time())
        pacing.observe({"requests": Budget(limit=3000, remaining=720, reset_s=45.6)})  # 60/s
        for _ in range(20):
            await pacing.admit(cost)
            times.append(loop.time())
        return times

    times = run_in_virtual_time(admissions())
    gaps = [b - a for a, b in itertools.pairwise(times)]
    assert min(gaps[:19]) == pytest.approx(1 / 50, abs=1e-3)
    assert min(gaps[19:]) == pytest.approx(1 / 60, abs=1e-3)


def test_without_headers_a_pace_is_learned_from_429s() -> None:
    from runner.pacing import CUT_SPACING, FIRST_PACE, PROBE_GROWTH, RATE_CUT, RATE_GROWTH

    t = FakeTime(100.0)
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


def test_the_first_bare_429_holds_the_endpoint_for_its_hint() -> None:
    t = FakeTime(100.0)

    async def admit() -> None:
        pacing = Pacing(1e9, 1e12, clock=t.clock, sleep=t.sleep)
        pacing.answered()
        pacing.refused(None, 2.5)
        assert await pacing.admit(Cost(input_tokens=1, output_tokens=1)) is pacing.learned

    run_in_virtual_time(admit())
    assert t.sleeps == [pytest.approx(2.5)]


def test_a_pace_set_below_the_refill_is_raised_once_the_budget_is_back_at_the_mark() -> None:
    # The first answers after a burst report the budget below the mark, and the pace is set
    # below the refill so that it climbs back. It must not stay there: a pace within
    # PACE_CHANGE below the refill left the endpoint at 0.97x the server's rate for minutes.
    pacing = Pacing(requests_per_minute=1e9, tokens_per_minute=1e12)
    pacing.observe({"requests": Budget(limit=3000, remaining=523, reset_s=49.54)})
    assert pacing.server["requests"].per_second < 0.9 * 50.0  # climbing back to the mark
    pacing.observe({"requests": Budget(limit=3000, remaining=582, reset_s=48.36)})
    pacing.observe({"requests": Budget(limit=3000, remaining=600, reset_s=48.0)})
    pacing.observe({"requests": Budget(limit=3000, remaining=700, reset_s=46.0)})
    assert pacing.server["requests"].per_second > 50.0  # past the mark: spend it back down


def _paced_rate(start_remaining: float, seconds: float) -> tuple[float, float]:
    """A server budget of 3,000 a minute (50/s) that the endpoint spends at the pace in force,
    as the headers of each answer set it, in steps of 0.1 s (the answers arrive 1 s late).
    Returns (the send rate over the second half, the lowest share of the budget left).
    """
    limit, refill, step, lag = 3000.0, 50.0, 0.1, 10
    pacing = Pacing(requests_per_minute=1e9, tokens_per_minute=1e12)
    level = start_remaining
    first = Budget(limit=limit, remaining=level, reset_s=(limit - level) / refill)
    pacing.observe({"requests": first})  # the burst is over: its first low answer is in
    reports = [first] * lag  # and so are the answers still to come of what it sent
    sent_late, lowest, t = 0.0, level, 0.0
    while t < seconds:
        bucket = pacing.server.get("requests")
        rate = bucket.per_second if bucket is not None else 10 * refill  # the burst, unpaced
        level = min(limit, level + (refill - rate) * step)
        lowest = min(lowest, level)
        if t >= seconds / 2:
            sent_late += rate * step
        remaining = float(int(level))
        reports.append(
            Budget(limit=limit, remaining=remaining, reset_s=(limit - remaining) / refill)
        )
        pacing.observe({"requests": reports.pop(0)})
        t += step
    return sent_late / (seconds / 2), lowest / limit


def test_after_a_burst_the_endpoint_settles_at_the_servers_rate_without_running_dry() -> None:
    # Each start is where a burst leaves the budget when its first low answer arrives.
    for start in (580.0, 520.0, 300.0, 30.0):
        rate, lowest = _paced_rate(start, 240.0)
        assert rate >= 0.99 * 50.0, (start, rate)
        assert rate <= 1.01 * 50.0, (start, rate)
        assert lowest > 0.0, (start, lowest)


def test_requests_waiting_together_are_let_go_one_after_another() -> None:
    # 6,000 tokens a minute = 100/s in a bucket of 20: ten requests of 100 tokens each, all
    # waiting at once, go one a second from the first second on. Their parts interleaved
    # drained together: the first went after six seconds, the rest bunched behind it.
    async def admissions() -> list[float]:
        pacing = Pacing(requests_per_minute=1e9, tokens_per_minute=6000)
        loop = asyncio.get_running_loop()
        start = loop.time()

        async def one() -> float:
            await pacing.admit(Cost(input_tokens=50, output_tokens=50))
            return loop.time() - start

        return sorted(await asyncio.gather(*(one() for _ in range(10))))

    times = run_in_virtual_time(admissions())
    assert times[0] == pytest.approx(0.8, abs=1e-3)  # the bucket's first 20 tokens are free
    assert [b - a for a, b in itertools.pairwise(times)] == pytest.approx([1.0] * 9, abs=1e-3)


def test_a_pace_lifted_while_requests_wait_for_it_lets_them_go() -> None:
    # An Anthropic output-token budget runs low (requests in flight reserve their max_tokens),
    # pacing the endpoint to 33 output tokens a second: 512 each, 15 s a request. Once an
    # answer says the budget has recovered, the requests already waiting for that pace owe it
    # nothing more; they paid it to the end, and an endpoint whose waiters sent nothing got
    # no answer to lift it by (a 4,000-a-minute budget full again, and nothing sent for
    # minutes).
    async def admissions() -> list[float]:
        pacing = Pacing(requests_per_minute=1e9, tokens_per_minute=1e12)
        loop = asyncio.get_running_loop()
        start = loop.time()
        pacing.observe({"output-tokens": Budget(limit=4000, remaining=400, reset_s=54.0)})
        assert pacing.server["output-tokens"].per_second == pytest.approx(100 / 3)

        async def one() -> float:
            await pacing.admit(Cost(input_tokens=100, output_tokens=512))
            return loop.time() - start

        waiting = [asyncio.ensure_future(one()) for _ in range(8)]
        await asyncio.sleep(1.0)
        assert not any(w.done() for w in waiting)
        pacing.observe({"output-tokens": Budget(limit=4000, remaining=3900, reset_s=1.5)})
        assert pacing.server == {}
        return sorted(await asyncio.gather(*waiting))

    times = run_in_virtual_time(admissions())
    assert times[-1] < 1.5  # each owed at most the part it was waiting for (0.2 s of pace)
