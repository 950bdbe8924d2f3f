"""A down endpoint, unit by unit: when it counts as down, the probes at doubling intervals,
coming back, and the outage budget; clock and sleep are injected, nothing sleeps."""

from __future__ import annotations

import pytest

from runner.outage import EndpointHealth, EndpointStopped, is_down_sign
from runner.providers.base import (
    BadRequest,
    ConnectionReset,
    ProviderError,
    RateLimited,
    ServerError,
    Timeout,
)
from tests.fake_time import FakeTime


def _health(
    t: FakeTime, answers: list[ProviderError | None], budget_s: float = 1800.0
) -> tuple[EndpointHealth, list[str]]:
    said: list[str] = []

    async def probe() -> ProviderError | None:
        return answers.pop(0)

    health = EndpointHealth(
        "ep", budget_s=budget_s, probe=probe, clock=t.clock, sleep=t.sleep, say=said.append
    )
    return health, said


def test_what_says_a_server_is_down() -> None:
    assert is_down_sign(ConnectionReset("refused", maybe_sent=False))
    assert is_down_sign(Timeout("no answer"))
    assert is_down_sign(ServerError("HTTP 503", status=503))
    assert not is_down_sign(RateLimited("HTTP 429", status=429))  # it answered
    assert not is_down_sign(BadRequest("HTTP 400", status=400))
    assert not is_down_sign(None)


async def test_ten_failures_in_a_row_make_it_down_and_an_answer_in_between_resets() -> None:
    t = FakeTime()
    health, said = _health(t, [None])
    for _ in range(9):
        health.observe(ServerError("HTTP 503", status=503))
    health.observe(RateLimited("HTTP 429", status=429))  # the server is there
    for _ in range(9):
        health.observe(ConnectionReset("refused"))
    assert not health.down and said == []
    health.observe(ConnectionReset("refused"))
    assert health.down and "is down (10 failures in a row, last: refused)" in said[0]
    await health.close()


async def test_probes_at_doubling_intervals_until_an_answer_brings_it_back() -> None:
    t = FakeTime()
    down = ServerError("HTTP 503", status=503)
    health, said = _health(t, [down, down, RateLimited("429", status=429)])
    for _ in range(10):
        health.observe(down)
    held = await health.wait_up()  # waits from now until the probe that gets an answer
    assert t.sleeps == [1.0, 2.0, 4.0] and health.probes == 3
    assert held == pytest.approx(7.0) and not health.down
    assert said[-1] == "cotaudit: endpoint 'ep' is back after 7 s; resuming"
    assert await health.wait_up() == 0.0  # up: no wait


async def test_past_its_budget_it_stops_and_its_waiting_requests_stay_pending() -> None:
    t = FakeTime()
    down = ConnectionReset("refused")
    health, said = _health(t, [down] * 20, budget_s=10.0)
    for _ in range(10):
        health.observe(down)
    assert "for up to 10 s more of outage" in said[0]
    with pytest.raises(EndpointStopped):
        await health.wait_up()
    # 1 + 2 + 4 = 7 s, then the 3 s left, then the budget is spent.
    assert t.sleeps == [1.0, 2.0, 4.0, 3.0] and health.stopped
    assert "down for 10 s in all" in said[-1] and "rerun the same command to resume" in said[-1]
    assert health.describe() == "stopped (down)"
    health.observe(down)  # a late failure after the stop changes nothing
    with pytest.raises(EndpointStopped):
        await health.wait_up()


async def test_the_budget_counts_every_outage_of_the_run() -> None:
    t = FakeTime()
    down = ServerError("HTTP 502", status=502)
    health, _ = _health(t, [down, None, down, down, down, down], budget_s=10.0)
    for _ in range(10):
        health.observe(down)
    await health.wait_up()  # back after 1 + 2 = 3 s
    assert health.down_total_s == pytest.approx(3.0)
    for _ in range(10):
        health.observe(down)
    with pytest.raises(EndpointStopped):
        await health.wait_up()
    assert health.down_total_s == pytest.approx(10.0)  # 3 s + 1 + 2 + 4 s
