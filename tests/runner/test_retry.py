"""Retry decisions and delays, table-driven; sleep and clock are injected (nothing sleeps)."""

from __future__ import annotations

import random

import pytest

from runner.providers.base import (
    AuthError,
    BadRequest,
    ConnectionReset,
    MalformedResponse,
    NotFound,
    ProviderError,
    QuotaExhausted,
    RateLimited,
    ServerError,
    Timeout,
)
from runner.retry import RetryPolicy, backoff_delay, call_with_retries, should_retry
from tests.fake_time import FakeTime

POLICY = RetryPolicy(max_attempts=5, base_delay_s=0.5, max_delay_s=8.0, time_budget_s=100.0)


@pytest.mark.parametrize(
    ("exc", "retry"),
    [
        (RateLimited("x", status=429), True),
        (ServerError("x", status=503), True),
        (Timeout("x"), True),
        (ConnectionReset("x"), True),
        (MalformedResponse("x"), True),
        (BadRequest("x", status=400), False),
        (AuthError("x", status=401), False),
        (NotFound("x", status=404), False),
        (QuotaExhausted("x", status=429), False),
        (ValueError("not ours"), False),
    ],
)
def test_should_retry(exc: BaseException, retry: bool) -> None:
    assert should_retry(exc) is retry


@pytest.mark.parametrize(
    ("failed", "hint", "uniform", "expected"),
    [
        (1, None, 1.0, 0.5),  # ceiling base * 2**0
        (2, None, 1.0, 1.0),
        (3, None, 0.5, 1.0),  # full jitter: half of the 2.0 ceiling
        (5, None, 1.0, 8.0),  # 0.5 * 16 = 8: at the cap
        (9, None, 1.0, 8.0),  # capped
        (5000, None, 1.0, 8.0),  # 2.0 ** 4999 is past the float range: still the cap
        (3, None, 0.0, 0.0),  # full jitter may not wait at all
        (1, 3.0, 0.9, 3.0),  # the server's hint wins, jitter ignored
        (1, 600.0, 0.1, 8.0),  # a hint is capped at max_delay_s
        (1, 0.0, 0.7, 0.0),
    ],
)
def test_backoff_delay(failed: int, hint: float | None, uniform: float, expected: float) -> None:
    assert backoff_delay(POLICY, failed, hint, uniform) == pytest.approx(expected)


def _script(*steps: ProviderError | str) -> tuple[list[int], object]:
    calls = [0]

    async def attempt() -> str:
        step = steps[calls[0]]
        calls[0] += 1
        if isinstance(step, ProviderError):
            raise step
        return step

    return calls, attempt


async def test_retries_until_success_and_records_every_outcome() -> None:
    t = FakeTime()
    calls, attempt = _script(
        RateLimited("slow down", status=429, retry_after_s=2.0),
        ServerError("boom", status=503),
        ConnectionReset("reset"),
        "done",
    )
    outcomes: list[str] = []
    result = await call_with_retries(
        attempt,  # type: ignore[arg-type]
        POLICY,
        outcomes=outcomes,
        sleep=t.sleep,
        clock=t.clock,
        rng=random.Random(0),
    )
    assert result == "done"
    assert outcomes == ["429", "503", "reset", "ok"]
    assert calls[0] == 4
    assert t.sleeps[0] == 2.0  # the retry-after hint, exactly
    assert 0.0 <= t.sleeps[1] <= 1.0 and 0.0 <= t.sleeps[2] <= 2.0  # jittered backoff ceilings


async def test_permanent_error_is_not_retried() -> None:
    t = FakeTime()
    calls, attempt = _script(NotFound("no model", status=404), "never")
    outcomes: list[str] = []
    with pytest.raises(NotFound):
        await call_with_retries(
            attempt,  # type: ignore[arg-type]
            POLICY,
            outcomes=outcomes,
            sleep=t.sleep,
            clock=t.clock,
        )
    assert calls[0] == 1 and outcomes == ["404"] and t.sleeps == []


async def test_gives_up_after_max_attempts_with_the_last_error() -> None:
    t = FakeTime()
    errors = [ServerError(f"e{i}", status=500 + i) for i in range(POLICY.max_attempts)]
    calls, attempt = _script(*errors)
    outcomes: list[str] = []
    with pytest.raises(ServerError, match=f"e{POLICY.max_attempts - 1}"):
        await call_with_retries(
            attempt,  # type: ignore[arg-type]
            POLICY,
            outcomes=outcomes,
            sleep=t.sleep,
            clock=t.clock,
        )
    assert calls[0] == POLICY.max_attempts
    assert len(outcomes) == POLICY.max_attempts and len(t.sleeps) == POLICY.max_attempts - 1


async def test_time_budget_stops_before_a_sleep_that_would_overrun_it() -> None:
    t = FakeTime()
    policy = RetryPolicy(max_attempts=50, base_delay_s=1.0, max_delay_s=30.0, time_budget_s=45.0)
    hinted = [RateLimited("x", status=429, retry_after_s=20.0) for _ in range(10)]
    calls, attempt = _script(*hinted)
    outcomes: list[str] = []
    with pytest.raises(RateLimited):
        await call_with_retries(
            attempt,  # type: ignore[arg-type]
            policy,
            outcomes=outcomes,
            sleep=t.sleep,
            clock=t.clock,
        )
    # 20 + 20 = 40 <= 45; a third sleep would end at 60 > 45.
    assert t.sleeps == [20.0, 20.0] and calls[0] == 3 and t.now == 40.0


async def test_time_the_caller_does_not_count_is_left_out_of_the_budget() -> None:
    # The engine counts a request's budget from its first send, without the time it waited
    # while its endpoint was down: ``elapsed`` says what is spent.
    t = FakeTime()
    policy = RetryPolicy(max_attempts=50, base_delay_s=1.0, max_delay_s=30.0, time_budget_s=45.0)
    calls, attempt = _script(*[RateLimited("x", status=429, retry_after_s=20.0)] * 4, "done")
    held = 100.0  # as if it had waited 100 s before the first send

    result = await call_with_retries(
        attempt,  # type: ignore[arg-type]
        policy,
        outcomes=[],
        sleep=t.sleep,
        clock=t.clock,
        elapsed=lambda: max(0.0, t.now - held),
    )
    # Counted from 0 the budget would stop after two sleeps (40 s of 45); the first 100 s
    # are not counted, so four 20 s waits fit (the last ends at 80 s: 0 s spent).
    assert result == "done" and calls[0] == 5 and t.sleeps == [20.0] * 4


async def test_the_first_attempt_runs_inside_tenacity_like_every_other(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # One code path: tenacity starts every attempt, the first included.
    import runner.retry

    started: list[int] = []
    real = runner.retry.AsyncRetrying

    class Counting(real):  # type: ignore[misc, valid-type]
        async def __call__(self, fn, *args, **kwargs):  # type: ignore[no-untyped-def]
            async def counted(*args, **kwargs):  # type: ignore[no-untyped-def]
                started.append(self.statistics.get("attempt_number", 0))
                return await fn(*args, **kwargs)

            return await super().__call__(counted, *args, **kwargs)

    monkeypatch.setattr(runner.retry, "AsyncRetrying", Counting)
    t = FakeTime()
    calls, attempt = _script("done")
    outcomes: list[str] = []
    await call_with_retries(
        attempt,  # type: ignore[arg-type]
        POLICY,
        outcomes=outcomes,
        sleep=t.sleep,
        clock=t.clock,
    )
    assert started == [1] and outcomes == ["ok"] and calls[0] == 1


async def test_a_request_leaves_nothing_of_its_own_to_the_cyclic_collector() -> None:
    # tenacity's state of a finished AsyncRetrying refers back to it, so that object waits
    # for the cyclic garbage collector. The request's own state (its attempt, its outcomes,
    # its budget clock and what they hold) must not wait with it: it is freed as soon as the
    # request is done, without a collection.
    import gc
    import weakref

    class Held:
        pass

    t = FakeTime()
    held = Held()
    probes = [weakref.ref(held)]

    async def attempt(state: Held = held) -> str:
        return "done"

    def elapsed(state: Held = held) -> float:
        return t.now

    outcomes: list[str] = []
    probes += [weakref.ref(attempt), weakref.ref(elapsed)]
    gc.collect()
    gc.disable()
    try:
        result = await call_with_retries(
            attempt, POLICY, outcomes=outcomes, sleep=t.sleep, clock=t.clock, elapsed=elapsed
        )
        del attempt, elapsed, held
        alive = [probe() is not None for probe in probes]
    finally:
        gc.enable()
    assert result == "done" and outcomes == ["ok"]
    assert alive == [False, False, False]


async def test_requests_of_one_retrier_keep_their_own_budgets() -> None:
    # One set of strategies serves every request; each request's budget is its own.
    from runner.retry import Retrier

    t = FakeTime()
    policy = RetryPolicy(max_attempts=50, base_delay_s=1.0, max_delay_s=30.0, time_budget_s=45.0)
    retrier = Retrier(policy, sleep=t.sleep, clock=t.clock, rng=random.Random(0))
    _, fresh = _script(*[RateLimited("x", status=429, retry_after_s=20.0)] * 2, "done")
    _, spent = _script(*[RateLimited("x", status=429, retry_after_s=20.0)] * 2, "done")
    assert await retrier.call(fresh, outcomes=[], elapsed=lambda: 0.0) == "done"  # type: ignore[arg-type]
    with pytest.raises(RateLimited):
        await retrier.call(spent, outcomes=[], elapsed=lambda: 30.0)  # type: ignore[arg-type]


async def test_finished_requests_leave_no_retrying_state_to_the_cyclic_collector() -> None:
    # tenacity's state of an AsyncRetrying refers back to it; one dropped after each
    # request would leave a cycle per request for the collector (and, in a sweep, set off
    # most of its collections). A finished request's AsyncRetrying serves the next one,
    # so there are at most as many as requests were once in flight together.
    import asyncio
    import gc

    from runner.retry import Retrier

    t = FakeTime()
    retrier = Retrier(POLICY, sleep=t.sleep, clock=t.clock, rng=random.Random(0))

    async def attempt() -> str:
        await asyncio.sleep(0)  # lets the gathered requests be in flight together
        return "done"

    async def one() -> str:
        return await retrier.call(attempt, outcomes=[])

    await one()  # asyncio's and tenacity's own first-use state is not the requests'
    gc.collect()
    gc.disable()
    try:
        results = [await one() for _ in range(20)]
        results += await asyncio.gather(*(one() for _ in range(20)))
        unreachable = gc.collect()
    finally:
        gc.enable()
    assert results == ["done"] * 40
    assert unreachable == 0
    assert len(retrier.idle) == 20


async def test_a_retrying_reused_after_a_failed_request_starts_afresh() -> None:
    # The next request on a reused AsyncRetrying counts its own attempts and budget from
    # zero, whatever the one before it did.
    from runner.retry import Retrier

    t = FakeTime()
    policy = RetryPolicy(max_attempts=3, base_delay_s=1.0, max_delay_s=30.0, time_budget_s=1e6)
    retrier = Retrier(policy, sleep=t.sleep, clock=t.clock, rng=random.Random(0))
    _, failing = _script(*[ServerError("x", status=503)] * 3)
    with pytest.raises(ServerError):
        await retrier.call(failing, outcomes=[])  # type: ignore[arg-type]
    assert len(retrier.idle) == 1
    outcomes: list[str] = []
    calls, recovering = _script(ServerError("x", status=503), ServerError("x", status=503), "ok")
    assert await retrier.call(recovering, outcomes=outcomes) == "ok"  # type: ignore[arg-type]
    assert calls[0] == 3 and outcomes == ["503", "503", "ok"] and len(retrier.idle) == 1
