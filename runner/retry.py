"""When to retry a failed attempt and how long to wait: one tenacity ``AsyncRetrying`` per request.

Decision (one flat order, as in openai-python): a ``RetryableError`` is retried, anything
else is not. Delay: the server's hint when it gave one (capped at ``max_delay_s``), otherwise
full jitter over ``min(base * 2**(n-1), max_delay_s)`` after the n-th failed attempt. We stop
after ``max_attempts`` attempts, or when the next sleep would overrun the request's total time
budget. The budget is a hard cap: an attempt's timeout is shortened to what the budget has
left (:func:`attempt_timeout_s`), so the last attempt ends when the budget does. tenacity
runs every attempt, the first included. Sleep, clock and randomness are injected so tests
never sleep.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

from tenacity import AsyncRetrying, RetryCallState, retry_if_exception, stop_after_attempt
from tenacity.stop import stop_base
from tenacity.wait import wait_base

from runner.config import RetrySettings
from runner.providers.base import ProviderError, RetryableError

T = TypeVar("T")
_MAX_DOUBLINGS = 1000  # 2.0 ** 1000 is still a float
Sleep = Callable[[float], Awaitable[None]]
Clock = Callable[[], float]


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    max_attempts: int  # attempts per request, the first included
    base_delay_s: float  # seconds: ceiling of the first backoff
    max_delay_s: float  # seconds: ceiling of any one sleep, server hints included
    time_budget_s: float  # seconds: all attempts and sleeps of one request

    @classmethod
    def from_settings(cls, settings: RetrySettings) -> RetryPolicy:
        return cls(
            max_attempts=settings.max_attempts,
            base_delay_s=settings.base_delay_s,
            max_delay_s=settings.max_delay_s,
            time_budget_s=settings.time_budget_s,
        )


def should_retry(exc: BaseException) -> bool:
    """True for the retryable families (429, 5xx/408/409, timeout, reset, malformed)."""
    return isinstance(exc, RetryableError)


def backoff_delay(
    policy: RetryPolicy, failed_attempts: int, hint_s: float | None, uniform: float
) -> float:
    """Seconds to sleep after ``failed_attempts`` failures; ``uniform`` is in [0, 1).

    A server hint wins over the backoff (it knows when capacity returns), but never exceeds
    ``max_delay_s``: a wrong or hostile hint must not park a worker for an hour.
    """
    if hint_s is not None:
        return min(max(0.0, hint_s), policy.max_delay_s)
    # 2.0 ** n raises past n = 1023 (a config may allow thousands of attempts); long before
    # that the product is above any max_delay_s, and a product past the float range is inf.
    doublings = min(max(0, failed_attempts - 1), _MAX_DOUBLINGS)
    ceiling = min(policy.base_delay_s * 2.0**doublings, policy.max_delay_s)
    return uniform * ceiling


class wait_hint_or_backoff(wait_base):
    """The server's hint when the failure carried one, else full-jitter exponential backoff."""

    def __init__(self, policy: RetryPolicy, rng: random.Random) -> None:
        self.policy = policy
        self.rng = rng

    def __call__(self, retry_state: RetryCallState) -> float:
        exc = retry_state.outcome.exception() if retry_state.outcome else None
        hint: float | None = exc.retry_after_s if isinstance(exc, ProviderError) else None
        return backoff_delay(self.policy, retry_state.attempt_number, hint, self.rng.random())


class stop_past_budget(stop_base):
    """Stop when the coming sleep would end past the request's time budget.

    The request's ``elapsed()`` (how much of its budget is spent, in seconds on the injected
    clock) is the first argument tenacity calls the attempt with (``RetryCallState.args``),
    so one strategy serves every request and holds nothing of any of them. Reads tenacity's
    ``upcoming_sleep``, which tenacity (>= 8.3) sets before it asks the stop strategy.
    """

    def __init__(self, budget_s: float) -> None:
        self.budget_s = budget_s

    def __call__(self, retry_state: RetryCallState) -> bool:
        elapsed: Callable[[], float] = retry_state.args[0]
        return elapsed() + retry_state.upcoming_sleep >= self.budget_s


def attempt_timeout_s(policy: RetryPolicy, spent_s: float, timeout_s: float) -> float | None:
    """The timeout of the next attempt when the budget has less left than ``timeout_s`` (the
    endpoint's per-attempt timeout), else None (keep it). ``spent_s``: the budget used so far.
    At most 0 means the budget is spent: send nothing."""
    left = policy.time_budget_s - spent_s
    return None if left >= timeout_s else left


class Retrier:
    """A policy's retry strategies, made once and shared by the requests that use it.

    Each request in flight has an ``AsyncRetrying`` of its own, which runs every attempt.
    tenacity's state of an ``AsyncRetrying`` refers back to it (a reference cycle), so one
    dropped after its request would be freed only by the cyclic garbage collector: it and
    what it holds would stay alive until a collection found them, and every object left
    that way brings the next collection nearer (each one walks all the young objects of the
    requests in flight). So a finished request's ``AsyncRetrying`` is kept for the next
    request (tenacity starts each call afresh: ``begin`` and the first ``iter`` reset its
    statistics and its iteration state), and there are never more of them than requests
    that were once in flight at the same time. The strategies are shared, and the request's
    own state (its attempt, its outcomes, its budget clock) is passed to tenacity as the
    call's arguments, which it does not keep beyond the call.
    """

    def __init__(
        self,
        policy: RetryPolicy,
        *,
        sleep: Sleep = asyncio.sleep,
        clock: Clock = time.monotonic,
        rng: random.Random | None = None,
    ) -> None:
        self.policy = policy
        self.sleep = sleep
        self.clock = clock
        self.retry = retry_if_exception(should_retry)
        self.wait = wait_hint_or_backoff(policy, rng or random.Random())
        self.stop = stop_after_attempt(policy.max_attempts) | stop_past_budget(policy.time_budget_s)
        self.idle: list[AsyncRetrying] = []  # of requests that ended, for the next ones

    async def call(
        self,
        attempt: Callable[[], Awaitable[T]],
        *,
        outcomes: list[str],
        elapsed: Callable[[], float] | None = None,
    ) -> T:
        """Run ``attempt`` until it succeeds or the policy stops; re-raise the last error.

        Every attempt's outcome label is appended to ``outcomes`` (``"429"``, ``"timeout"``,
        ``"ok"``, ...), so the record can show the whole history. ``elapsed()`` is the part
        of the request's time budget spent so far; by default the clock's time since this
        call.
        """
        started, clock = self.clock(), self.clock
        spent = elapsed or (lambda: clock() - started)
        retrying = self.idle.pop() if self.idle else self.new_retrying()
        try:
            result: T = await retrying(_recorded, spent, attempt, outcomes)
        finally:
            self.idle.append(retrying)
        return result

    def new_retrying(self) -> AsyncRetrying:
        """An ``AsyncRetrying`` with the shared strategies, re-raising the last error."""
        return AsyncRetrying(
            retry=self.retry, wait=self.wait, stop=self.stop, sleep=self.sleep, reraise=True
        )


async def _recorded(
    elapsed: Callable[[], float], attempt: Callable[[], Awaitable[T]], outcomes: list[str]
) -> T:
    """One attempt, its outcome appended to ``outcomes``. ``elapsed`` is for the stop
    strategy (``stop_past_budget``), which reads it off the call's arguments."""
    try:
        result = await attempt()
    except ProviderError as exc:
        outcomes.append(exc.outcome)
        raise
    outcomes.append("ok")
    return result


async def call_with_retries(
    attempt: Callable[[], Awaitable[T]],
    policy: RetryPolicy,
    *,
    outcomes: list[str],
    sleep: Sleep = asyncio.sleep,
    clock: Clock = time.monotonic,
    rng: random.Random | None = None,
    elapsed: Callable[[], float] | None = None,
) -> T:
    """One request's attempts under ``policy`` (see :meth:`Retrier.call`); for callers that
    run a few requests, where a shared :class:`Retrier` is not worth keeping."""
    retrier = Retrier(policy, sleep=sleep, clock=clock, rng=rng)
    return await retrier.call(attempt, outcomes=outcomes, elapsed=elapsed)
