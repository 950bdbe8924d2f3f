"""max_concurrency = "auto": slots grow while they are the bottleneck, shrink on 429s and on
rising latency, at most once per round trip; the clock is injected."""

from __future__ import annotations

import asyncio

import pytest

from runner.concurrency import (
    LATENCY_WINDOW,
    RATE_LIMITED_FACTOR,
    SLOW_FACTOR,
    AdaptiveConcurrency,
)


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _busy(slots: AdaptiveConcurrency) -> None:
    """As if every slot were on the wire while an answer arrives."""
    slots.on_wire = slots.current - 1


def test_slow_start_doubles_per_round_trip_while_every_slot_is_busy() -> None:
    clock = Clock()
    slots = AdaptiveConcurrency(initial=8, clock=clock)
    for _ in range(8):  # one round trip: each of the 8 answers adds a slot
        _busy(slots)
        slots.succeeded(sent_at=clock.now, latency_s=1.0)
    assert slots.current == 16


def test_it_does_not_grow_while_the_rate_limiters_hold_requests_back() -> None:
    slots = AdaptiveConcurrency(initial=8, clock=Clock())
    for _ in range(100):
        slots.on_wire = 3  # most slots wait for the pacing, not for the server
        slots.succeeded(sent_at=0.0, latency_s=1.0)
    assert slots.current == 8


def test_a_429_cuts_once_per_round_trip_and_ends_slow_start() -> None:
    clock = Clock()
    slots = AdaptiveConcurrency(initial=100, clock=clock)
    clock.now = 10.0
    slots.rate_limited(sent_at=9.0)
    assert slots.current == int(100 * RATE_LIMITED_FACTOR) and not slots.slow_start
    slots.rate_limited(sent_at=9.5)  # sent before the cut: it says nothing new
    assert slots.current == int(100 * RATE_LIMITED_FACTOR)
    clock.now = 11.0
    slots.rate_limited(sent_at=10.5)  # sent after the cut: the new limit is too high too
    assert slots.current == int(100 * RATE_LIMITED_FACTOR * RATE_LIMITED_FACTOR)
    # Afterwards it grows by one per round trip (1/limit per answer), not one per answer.
    before = slots.limit
    for _ in range(slots.current):
        _busy(slots)
        slots.succeeded(sent_at=12.0, latency_s=1.0)
    assert slots.limit == pytest.approx(before + 1.0, abs=0.05)


def test_never_below_one_nor_above_the_maximum() -> None:
    clock = Clock()
    slots = AdaptiveConcurrency(initial=2, maximum=5, clock=clock)
    for i in range(10):
        clock.now = float(i + 1)
        slots.rate_limited(sent_at=float(i) + 0.5)
    assert slots.current == 1
    grow = AdaptiveConcurrency(initial=4, maximum=5, clock=clock)
    for _ in range(20):
        _busy(grow)
        grow.succeeded(sent_at=0.0, latency_s=1.0)
    assert grow.current == 5


def test_rising_latency_cuts_once_then_takes_the_new_latency_as_normal() -> None:
    clock = Clock()
    slots = AdaptiveConcurrency(initial=64, clock=clock)
    for _ in range(LATENCY_WINDOW):
        slots.succeeded(sent_at=0.0, latency_s=1.0)  # not busy: no growth either
    assert slots.current == 64
    clock.now = 100.0
    for _ in range(LATENCY_WINDOW):
        slots.succeeded(sent_at=50.0, latency_s=3.0)  # three times slower
    assert slots.current == int(64 * SLOW_FACTOR)
    clock.now = 200.0
    for _ in range(3 * LATENCY_WINDOW):
        slots.succeeded(sent_at=150.0, latency_s=3.0)  # as slow as before: no further cut
    assert slots.current == int(64 * SLOW_FACTOR)


async def test_slots_are_handed_out_in_order_and_follow_the_limit() -> None:
    slots = AdaptiveConcurrency(initial=2, clock=Clock())
    order: list[int] = []
    release = asyncio.Event()

    async def request(i: int) -> None:
        async with slots.slot():
            order.append(i)
            await release.wait()

    tasks = [asyncio.create_task(request(i)) for i in range(5)]
    await asyncio.sleep(0)
    assert order == [0, 1] and slots.held == 2
    slots.limit = 4.0  # grown: two more waiters get slots
    _busy(slots)
    slots.succeeded(sent_at=0.0, latency_s=1.0)  # growth wakes waiters
    await asyncio.sleep(0)
    assert order == [0, 1, 2, 3, 4][: slots.current] and slots.held == slots.current
    release.set()
    await asyncio.gather(*tasks)
    assert order == [0, 1, 2, 3, 4] and slots.held == 0


async def test_a_cancelled_waiter_gives_its_slot_back() -> None:
    slots = AdaptiveConcurrency(initial=1, clock=Clock())
    hold = asyncio.Event()

    async def holder() -> None:
        async with slots.slot():
            await hold.wait()

    first = asyncio.create_task(holder())
    await asyncio.sleep(0)
    waiting = asyncio.create_task(holder())
    await asyncio.sleep(0)
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    hold.set()
    await first
    assert slots.held == 0
    async with slots.slot():  # the slot is free again
        assert slots.held == 1


async def test_a_later_attempt_goes_ahead_of_the_first_attempts_waiting() -> None:
    # A retry's time budget runs from its first send: behind a thousand waiting first
    # attempts at a low limit it was spent before the retry was sent again.
    slots = AdaptiveConcurrency(initial=1, clock=Clock())
    order: list[str] = []
    release = asyncio.Event()

    async def request(name: str, *, retry: bool = False) -> None:
        async with slots.slot(retry=retry):
            order.append(name)
            await release.wait()

    holder = asyncio.create_task(request("holder"))
    await asyncio.sleep(0)
    waiting = [asyncio.create_task(request(f"new{i}")) for i in range(3)]
    await asyncio.sleep(0)
    retries = [asyncio.create_task(request(f"retry{i}", retry=True)) for i in range(2)]
    await asyncio.sleep(0)
    release.set()  # each slot, once free, goes to the next in line
    await asyncio.gather(holder, *waiting, *retries)
    assert order == ["holder", "retry0", "retry1", "new0", "new1", "new2"]
    assert slots.held == 0


async def test_a_cancelled_later_attempt_leaves_the_line() -> None:
    slots = AdaptiveConcurrency(initial=1, clock=Clock())
    hold = asyncio.Event()

    async def holder(*, retry: bool = False) -> None:
        async with slots.slot(retry=retry):
            await hold.wait()

    first = asyncio.create_task(holder())
    await asyncio.sleep(0)
    retry = asyncio.create_task(holder(retry=True))
    await asyncio.sleep(0)
    retry.cancel()
    with pytest.raises(asyncio.CancelledError):
        await retry
    hold.set()
    await first
    assert slots.held == 0
