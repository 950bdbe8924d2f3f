"""What a user sees during a sweep against a provider-like server: a time left drawn from the
recent rate (not the run's average, which a fresh key's burst and an outage distort), the
adaptive state on a status line of its own under the bar (an 80-column terminal cut it off the
bar's line), lines printed during the sweep above the bars, and an outage that ends as soon as
any answer comes. Clocks are injected; nothing sleeps."""

from __future__ import annotations

import asyncio
import fcntl
import io
import os
import pty
import struct
import sys
import termios
from pathlib import Path
from typing import TextIO

import pytest

from runner.outage import EndpointHealth
from runner.progress import RATE_WINDOW_S, Counts, Progress, Track
from runner.providers.base import ConnectionReset, ProviderError
from tests.fake_time import FakeTime


def test_the_time_left_follows_the_recent_rate_not_the_runs_average() -> None:
    # A provider's budget lets a fresh key send a minute's allowance at once (600 records in
    # 12 s), then holds it to its sustained 10 per second.
    now = [0.0]
    counts = Counts()
    out = io.StringIO()
    progress = Progress(
        enabled=True, counts=counts, total=5400, stream=out, clock=lambda: now[0], tty=False
    )
    for second in range(1, 121):
        now[0] = float(second)
        counts.written = 50 * second if second <= 12 else 600 + 10 * (second - 12)
        if second % 10 == 0:
            progress.refresh()
    last = out.getvalue().splitlines()[-1]
    # 1,680 written at 120 s: 3,720 left at 10/s is 6 min; the average (14/s) said 4 min.
    assert last.startswith("cotaudit: 1,680/5,400 records (31%), 10.0/s, 6 min left"), last
    # Nothing written for a whole window (an outage): no rate, so no time left is promised.
    now[0] += RATE_WINDOW_S + 10
    progress.refresh()
    stalled = out.getvalue().splitlines()[-1]
    assert ", 0.0/s, retries" in stalled and "left" not in stalled, stalled


def test_the_bar_keeps_the_counts_and_the_status_line_the_state_without_the_name() -> None:
    now = [0.0]
    gpt = Counts(written=0)
    state = "concurrency 37 (auto), requests paced to 600/min, down 29 s, probe in 9 s"
    details = f"gpt-4o: {state}"
    progress = Progress(
        enabled=True,
        stream=io.StringIO(),
        clock=lambda: now[0],
        tty=False,
        tracks=[Track("gpt-4o", gpt, 1000, lambda: details)],
    )
    progress.details = lambda: details  # the engine's: every endpoint's, named
    now[0], gpt.written, gpt.retries, gpt.cache_hits = 10.0, 100, 3, 5
    ((postfix, status),) = progress.bar_texts()
    assert postfix == "10.0/s, 2 min left, retries 3, errors 0, cached 5"
    # The name is the run's (one endpoint) or its bar's: the status line fits 80 columns.
    assert status == state and len("  " + status) <= 80


def _terminal(columns: int) -> tuple[int, TextIO]:
    """A pseudo-terminal of ``columns``: its master, and its other end as a text stream."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, columns, 0, 0))
    os.set_blocking(master, False)
    return master, open(slave, "w", encoding="utf-8", closefd=True)


def _read(master: int) -> str:
    out = bytearray()
    while True:
        try:
            chunk = os.read(master, 65536)
        except (BlockingIOError, OSError):
            return out.decode("utf-8", "replace")
        if not chunk:
            return out.decode("utf-8", "replace")
        out += chunk


def test_a_line_printed_to_stderr_during_the_bars_goes_above_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    master, tty = _terminal(80)
    monkeypatch.setattr(sys, "stderr", tty)
    try:
        counts = Counts(written=10)
        progress = Progress(enabled=True, counts=counts, total=100)
        progress.details = lambda: "ep: concurrency 32 (auto)"
        assert progress.tty
        progress.refresh()
        # What the outage module, the engine and the cache print, as they print it.
        print("cotaudit: endpoint 'ep' is down (10 failures in a row)", file=sys.stderr)
        counts.written = 20
        progress.refresh()
        progress.close()
        assert sys.stderr is tty  # given back when the bars are gone
        shown = _read(master)
    finally:
        tty.close()
        os.close(master)
    screen = _screen(shown, 80)
    message = "cotaudit: endpoint 'ep' is down (10 failures in a row)"
    # The message has a line of its own, above the bar and its status line drawn again:
    # printed at the cursor, it followed the bar on the bar's line and split the bar from its
    # status line, leaving a stale copy of the bar above it.
    assert screen[0] == message, screen
    assert screen[1].startswith(" 20%|") and screen[2] == "  ep: concurrency 32 (auto)", screen
    assert len(screen) == 3, screen


def _screen(output: str, columns: int) -> list[str]:
    """The lines a terminal of ``columns`` shows after ``output``: text wraps at the edge,
    ``\r`` returns, ``\n`` goes down, ``ESC [ A`` up (all tqdm writes)."""
    rows: list[list[str]] = [[]]
    row = col = 0
    i = 0
    while i < len(output):
        if output.startswith("\x1b[A", i):
            row, i = max(0, row - 1), i + 3
            continue
        ch = output[i]
        i += 1
        if ch == "\r":
            col = 0
        elif ch == "\n":
            row += 1
        else:
            if col == columns:
                row, col = row + 1, 0
            while len(rows) <= row:
                rows.append([])
            line = rows[row]
            line.extend(" " * (col + 1 - len(line)))
            line[col] = ch
            col += 1
        while len(rows) <= row:
            rows.append([])
    return [text for text in ("".join(r).rstrip() for r in rows) if text]


async def test_an_answer_while_down_brings_the_endpoint_back_at_once() -> None:
    t = FakeTime()
    said: list[str] = []
    probes: list[float] = []

    async def probe() -> ProviderError | None:
        probes.append(t.now)
        return ConnectionReset("refused")

    health = EndpointHealth(
        "ep", budget_s=1800.0, probe=probe, clock=t.clock, sleep=t.sleep, say=said.append
    )
    for _ in range(10):
        health.observe(ConnectionReset("refused"))
    assert health.down
    waiter = asyncio.ensure_future(health.wait_up())
    for _ in range(20):  # the prober runs: probes at 1, 3, 7 s ... all refused
        await asyncio.sleep(0)
    assert probes and health.describe().startswith("down ")
    # A request that was past the gate (in its backoff) is answered: the server is there.
    health.observe(None)
    assert not health.down and said[-1].startswith("cotaudit: endpoint 'ep' is back after")
    assert await waiter >= 0.0
    sent = len(probes)
    for _ in range(20):
        await asyncio.sleep(0)
    assert len(probes) == sent  # no more probes of an outage that is over
    await health.close()


async def test_the_state_says_probing_while_a_probe_is_out() -> None:
    t = FakeTime()
    answer: asyncio.Future[ProviderError | None] = asyncio.get_running_loop().create_future()
    seen: list[str] = []

    async def probe() -> ProviderError | None:
        seen.append(health.describe())
        return await answer

    health = EndpointHealth(
        "ep", budget_s=1800.0, probe=probe, clock=t.clock, sleep=t.sleep, say=lambda _: None
    )
    for _ in range(10):
        health.observe(ConnectionReset("refused"))
    assert health.describe() == "down 0 s, probe in 1 s"
    for _ in range(5):
        await asyncio.sleep(0)
    # A probe can take the endpoint's whole timeout: "next probe in 0 s" all that while said
    # nothing true.
    assert seen == ["down 1 s, probing"]
    answer.set_result(None)
    await health.wait_up()
    assert health.describe() == ""
    await health.close()


async def test_an_outage_leads_the_endpoints_state_before_its_concurrency_and_pace() -> None:
    # Behind the concurrency and a pace, "probe in 37 s" was cut off at column 80.
    from runner.concurrency import AdaptiveConcurrency
    from runner.config import config_from_mapping
    from runner.engine import _EndpointRun
    from runner.pacing import Pacing
    from runner.providers import make_provider

    t = FakeTime()
    config = config_from_mapping(
        {
            "run_dir": "run",
            "task": {"kind": "prontoqa", "source": "generate", "n": 1},
            "endpoints": [{"name": "ep", "provider": "local", "model": "faithful"}],
        },
        config_dir=Path("."),
        where="<test>",
    )
    (ep,) = config.endpoints

    async def probe() -> ProviderError | None:
        return ConnectionReset("refused")

    health = EndpointHealth(
        "ep", budget_s=1800.0, probe=probe, clock=t.clock, sleep=t.sleep, say=lambda _: None
    )
    run = _EndpointRun(
        config=ep,
        counts=Counts(),
        identity=ep.identity(),
        provider=make_provider(ep, base_url="http://127.0.0.1:9/v1"),
        pacing=Pacing(ep.requests_per_minute, ep.tokens_per_minute, clock=t.clock, sleep=t.sleep),
        health=health,
        concurrency=AdaptiveConcurrency(clock=t.clock),
        queue=asyncio.Queue(maxsize=4),
    )
    assert run.describe().startswith("ep: concurrency ")
    for _ in range(10):
        health.observe(ConnectionReset("refused"))
    assert run.describe().startswith("ep: down 0 s, probe in 1 s, concurrency ")
    await health.close()
