"""When to retry a failed attempt and how long to wait: tenacity strategies over our errors.

Decision (one flat order, as in openai-python): a ``RetryableError`` is retried, anything
else is not. Delay: the server's hint when it gave one (capped at ``max_delay_s``), otherwise
full jitter over ``min(base * 2**(n-1), max_delay_s)`` after the n-th failed attempt. We stop
after ``max_attempts`` attempts, or when the next sleep would overrun the request's total time
budget. Sleep, clock and randomness are injected so tests never sleep.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

from tenacity import AsyncRetrying, RetryCallState, retry_if_exception_type
from tenacity.stop import stop_base
from tenacity.wait import wait_base

from runner.config import RetrySettings
from runner.providers.base import ProviderError, RetryableError

T = TypeVar("T")
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
            settings.max_attempts,
            settings.base_delay_s,
            settings.max_delay_s,
            settings.time_budget_s,
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
    ceiling = min(policy.base_delay_s * 2.0 ** max(0, failed_attempts - 1), policy.max_delay_s)
    return uniform * ceiling


class wait_backoff_with_hints(wait_base):
    def __init__(self, policy: RetryPolicy, rng: random.Random) -> None:
        self.policy = policy
        self.rng = rng

    def __call__(self, retry_state: RetryCallState) -> float:
        exc = retry_state.outcome.exception() if retry_state.outcome else None
        hint: float | None = exc.retry_after_s if isinstance(exc, ProviderError) else None
        return backoff_delay(self.policy, retry_state.attempt_number, hint, self.rng.random())


class stop_after_attempts_or_budget(stop_base):
    """Stop at ``max_attempts``, or when the coming sleep would end past the time budget."""

    def __init__(self, policy: RetryPolicy, clock: Clock, started: float) -> None:
        self.policy = policy
        self.clock = clock
        self.started = started

    def __call__(self, retry_state: RetryCallState) -> bool:
        if retry_state.attempt_number >= self.policy.max_attempts:
            return True
        elapsed = self.clock() - self.started
        return elapsed + retry_state.upcoming_sleep > self.policy.time_budget_s


async def call_with_retries(
    attempt: Callable[[], Awaitable[T]],
    policy: RetryPolicy,
    *,
    outcomes: list[str],
    sleep: Sleep = asyncio.sleep,
    clock: Clock = time.monotonic,
    rng: random.Random | None = None,
    first_failure: ProviderError | None = None,
    started: float | None = None,
) -> T:
    """Run ``attempt`` until it succeeds or the policy stops; re-raise the last error.

    Every attempt's outcome label is appended to ``outcomes`` (``"429"``, ``"timeout"``,
    ``"ok"``, ...), so the record can show the whole history.

    A caller that made the first attempt itself passes its failure as ``first_failure``
    (its outcome already in ``outcomes``) and the ``clock()`` reading from before it as
    ``started``; retrying then continues from attempt 2.
    """
    # Fast path: most requests succeed at once, and building tenacity's machinery costs
    # more CPU than the request itself against a fast server. The first failure is then
    # replayed as tenacity's attempt 1, so waits and stops see the true attempt numbers.
    if started is None:
        started = clock()
    if first_failure is None:
        try:
            result = await attempt()
        except ProviderError as exc:
            outcomes.append(exc.outcome)
            if not exc.retryable:
                raise
            first_failure = exc
        else:
            outcomes.append("ok")
            return result

    retrying = AsyncRetrying(
        retry=retry_if_exception_type(RetryableError),
        wait=wait_backoff_with_hints(policy, rng or random.Random()),
        stop=stop_after_attempts_or_budget(policy, clock, started),
        sleep=sleep,
        reraise=True,
    )
    replay_first: ProviderError | None = first_failure
    async for try_ in retrying:
        with try_:
            if replay_first is not None:
                replay, replay_first = replay_first, None
                raise replay
            try:
                result = await attempt()
            except ProviderError as exc:
                outcomes.append(exc.outcome)
                raise
            outcomes.append("ok")
            return result
    raise AssertionError("unreachable: tenacity either returns or re-raises")
