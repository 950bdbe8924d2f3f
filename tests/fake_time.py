"""A clock and sleep pair that tests inject instead of real time: the clock moves only when the
injected sleep is called, and every sleep is recorded."""

from __future__ import annotations

import asyncio


class FakeTime:
    """``clock()`` reads the fake time; ``await sleep(s)`` records ``s`` and moves the time on
    by it, then yields once to the event loop (as a real sleep would let others run)."""

    def __init__(self, start: float = 0.0) -> None:
        self.now = start
        self.sleeps: list[float] = []

    def clock(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds
        await asyncio.sleep(0)
