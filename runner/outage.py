"""An endpoint that is down: paused, probed at growing intervals, stopped after a budget.

After ``OUTAGE_FAILURES`` attempts in a row failed with a connection failure, a timeout or a
5xx (and nothing else answered in between: a 429 or a 400 proves the server is there), the
endpoint is *down*: its requests wait (their time budgets and attempts untouched) instead of
being spent into error records in seconds, and one small probe (the preflight's
``max_tokens=1`` request, not written anywhere) goes out after ``OUTAGE_FIRST_PROBE_S``, then
at doubling intervals up to ``OUTAGE_MAX_PROBE_INTERVAL_S``. The first answer but a 5xx,
a probe's or one to a request that was already past the gate, brings the endpoint back. An
endpoint down for ``outage_budget_s`` in all during a run is stopped: what it has not sent
stays pending, and a later run resumes it. Each change is said on the terminal. Clock and
sleep are injected, so tests never sleep.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
from collections.abc import Awaitable, Callable

from cotaudit.constants import (
    OUTAGE_FAILURES,
    OUTAGE_FIRST_PROBE_S,
    OUTAGE_MAX_PROBE_INTERVAL_S,
)
from cotaudit.terminal import duration
from runner.providers.base import ConnectionReset, ProviderError, ServerError, Timeout

Probe = Callable[[], Awaitable[ProviderError | None]]  # None: answered; else what failed


class EndpointStopped(Exception):
    """The endpoint was stopped (down past its outage budget): the request stays pending."""


def is_down_sign(error: ProviderError | None) -> bool:
    """A failure that says the server is not there or not working (no connection, no answer
    in time, a 5xx); ``None`` (an answer) and every other error say it is."""
    return isinstance(error, ConnectionReset | Timeout | ServerError)


class EndpointHealth:
    """Whether one endpoint is up, and the probing while it is not."""

    def __init__(
        self,
        name: str,
        *,
        budget_s: float,
        probe: Probe,
        clock: Callable[[], float],
        sleep: Callable[[float], Awaitable[None]],
        say: Callable[[str], None] | None = None,
        failures: int = OUTAGE_FAILURES,
    ) -> None:
        self.name = name
        self.budget_s = budget_s
        self.probe = probe
        self.clock = clock
        self.sleep = sleep
        self.say = say or _to_stderr
        self.failures = failures
        self.consecutive = 0
        self.down_since: float | None = None
        self.down_total_s = 0.0  # completed outages of this run
        self.probes = 0
        self.stopped = False
        self.next_probe_at: float | None = None
        self._up = asyncio.Event()
        self._up.set()
        self._prober: asyncio.Task[None] | None = None
        self._probe_out = False

    @property
    def down(self) -> bool:
        return self.down_since is not None

    def observe(self, error: ProviderError | None) -> None:
        """Count one attempt's outcome (``None``: it succeeded).

        An answer while the endpoint is down brings it back at once, as a probe's would: the
        requests that were already past the gate (waiting out a backoff) go on sending, and
        the first of them that the server answers proves it is there. Waiting for the next
        probe instead held every other request back for up to ``OUTAGE_MAX_PROBE_INTERVAL_S``
        while answers were being written, and the terminal said "down" all along.
        """
        if not is_down_sign(error):
            self.consecutive = 0
            if self.down and not self.stopped:
                self._come_back()
            return
        self.consecutive += 1
        if self.consecutive >= self.failures and not self.down and not self.stopped:
            assert error is not None
            self._go_down(error)

    async def wait_up(self) -> float:
        """Wait while the endpoint is down; the seconds waited. Raises ``EndpointStopped``."""
        if self._up.is_set() and not self.stopped:
            return 0.0
        start = self.clock()
        await self._up.wait()
        if self.stopped:
            raise EndpointStopped(self.name)
        return self.clock() - start

    def _go_down(self, error: ProviderError) -> None:
        self.down_since = self.clock()
        self.next_probe_at = self.down_since + OUTAGE_FIRST_PROBE_S  # as the prober will set it
        self._up.clear()
        left = self.budget_s - self.down_total_s
        # When the probes go out says how long a server that is back can go unnoticed.
        self.say(
            f"cotaudit: endpoint {self.name!r} is down ({self.consecutive} failures in a row, "
            f"last: {error.message}); its requests wait, no attempt spent, while one small "
            f"request probes it, in {OUTAGE_FIRST_PROBE_S:.0f} s, then at doubling intervals "
            f"up to {OUTAGE_MAX_PROBE_INTERVAL_S:.0f} s, for up to {duration(left)} more of "
            "outage"
        )
        self._prober = asyncio.create_task(
            self._probe_until_up(), name=f"cotaudit-probe-{self.name}"
        )

    async def _probe_until_up(self) -> None:
        assert self.down_since is not None
        interval = OUTAGE_FIRST_PROBE_S
        while True:
            left = self.budget_s - self.down_total_s - (self.clock() - self.down_since)
            if left <= 0:
                self._stop()
                return
            wait = min(interval, left)
            self.next_probe_at = self.clock() + wait
            await self.sleep(wait)
            self.probes += 1
            self.next_probe_at = None
            self._probe_out = True  # for up to the endpoint's timeout
            try:
                error = await self.probe()
            finally:
                self._probe_out = False
            if not is_down_sign(error):
                self._come_back()
                return
            interval = min(2 * interval, OUTAGE_MAX_PROBE_INTERVAL_S)

    def _come_back(self) -> None:
        assert self.down_since is not None
        prober, self._prober = self._prober, None
        if prober is not None and prober is not asyncio.current_task():
            prober.cancel()  # an answer came first: no more probes of this outage
        lasted = self.clock() - self.down_since
        self.down_total_s += lasted
        self.down_since = None
        self.next_probe_at = None
        self.consecutive = 0
        self.say(f"cotaudit: endpoint {self.name!r} is back after {duration(lasted)}; resuming")
        self._up.set()

    def _stop(self) -> None:
        assert self.down_since is not None
        self.down_total_s += self.clock() - self.down_since
        self.stopped = True
        self.next_probe_at = None
        self.say(
            f"cotaudit: endpoint {self.name!r} was down for {duration(self.down_total_s)} in "
            f"all (its outage budget is {duration(self.budget_s)}); stopped sending to it. Its "
            "unsent requests are pending: rerun the same command to resume."
        )
        self._up.set()  # release the waiting requests: they see the stop and stay pending

    def describe(self) -> str:
        """The endpoint's state for the progress line (empty when up)."""
        if self.stopped:
            return "stopped (down)"
        if self.down_since is None:
            return ""
        text = f"down {duration(self.clock() - self.down_since)}"
        if self.next_probe_at is not None:
            return f"{text}, probe in {duration(self.next_probe_at - self.clock())}"
        return f"{text}, probing" if self._probe_out else text

    async def close(self) -> None:
        """Stop probing (the run is over)."""
        if self._prober is not None and not self._prober.done():
            self._prober.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._prober


def _to_stderr(text: str) -> None:
    print(text, file=sys.stderr, flush=True)
