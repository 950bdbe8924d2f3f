"""An event loop whose clock is virtual: when nothing is ready, it jumps to the next timer.

aiolimiter keeps time by the running loop's ``time()``, which a ``clock=`` argument cannot
replace. This loop does, through asyncio's public API only: a ``SelectorEventLoop`` given a
selector (its constructor's argument) that never blocks while a timer is due, and an
overridden ``time()``. When the loop would wait ``timeout`` seconds for I/O, the selector
polls without waiting and, if nothing is ready, moves the clock on by ``timeout``: the loop
then runs the timer it was waiting for. A test of pacing thus runs minutes of waits in
milliseconds, and its waits are exact. (``looptime`` does the same as a pytest plugin, but by
replacing the private ``_selector`` of the loop pytest-asyncio made.)

Only for code that waits on timers: a loop waiting for a thread or a socket would see its
clock jump instead. Run a coroutine with :func:`run_in_virtual_time`.
"""

from __future__ import annotations

import asyncio
import selectors
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")
TICK_S = 1e-9  # the least a pass of the loop without I/O moves the clock on


class _FastForwardSelector(selectors.DefaultSelector):
    def __init__(self, loop_clock: VirtualClock) -> None:
        super().__init__()
        self.loop_clock = loop_clock

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        if timeout is None:  # no timer at all: only I/O can wake the loop
            return super().select(None)
        ready: list[tuple[selectors.SelectorKey, int]] = super().select(0)
        if not ready:
            # At least TICK_S, as a real clock moves on while the loop runs: a timer that float
            # rounding puts at the present (aiolimiter's waker, once a drained bucket's level
            # is a rounding error above the room a waiter needs) is due at once, finds the
            # same level, and is set again at the same instant, forever, on a frozen clock.
            self.loop_clock.now += max(timeout, TICK_S)
        return ready


class VirtualClock:
    """The virtual time, in seconds from 0."""

    def __init__(self) -> None:
        self.now = 0.0


class VirtualTimeLoop(asyncio.SelectorEventLoop):
    """A selector event loop on a :class:`VirtualClock`."""

    def __init__(self) -> None:
        self.virtual_clock = VirtualClock()
        super().__init__(_FastForwardSelector(self.virtual_clock))

    def time(self) -> float:
        return self.virtual_clock.now


def run_in_virtual_time(main: Coroutine[Any, Any, T]) -> T:
    """Run ``main`` to completion on a fresh :class:`VirtualTimeLoop`."""
    with asyncio.Runner(loop_factory=VirtualTimeLoop) as runner:
        return runner.run(main)
