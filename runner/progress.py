"""Progress display: tqdm bars on a terminal, plain periodic lines otherwise (stderr).

The engine only bumps counters (cheap, per record); :meth:`Progress.refresh` renders them and
is called by a periodic task, so the hot path never formats text. A sweep of one endpoint
shows one bar or line; a sweep of several shows one per endpoint, labelled with its name.
Plain lines carry the count, the total, the share done, the rate, the time left and the time
elapsed (``docs/command-line.md``, "Progress").
"""

from __future__ import annotations

import sys
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TextIO

from tqdm import tqdm

from cotaudit.constants import PROGRESS_INTERVAL_S
from cotaudit.terminal import duration, shows_bars

TTY_REFRESH_S = 0.5  # seconds between bar redraws


@dataclass(slots=True)
class Counts:
    """What a run (or one endpoint of it) has done so far: the engine counts, the display and
    the summary read."""

    planned: int = 0
    written: int = 0  # response records written (errors included)
    skipped: int = 0  # already in the stream
    cache_hits: int = 0
    http_requests: int = 0
    retries: int = 0
    errors: int = 0
    error_types: Counter[str] = field(default_factory=Counter)  # error records written, by type

    @classmethod
    def total_of(cls, parts: Sequence[Counts]) -> Counts:
        """The sum of several endpoints' counts."""
        out = cls()
        for part in parts:
            out.planned += part.planned
            out.written += part.written
            out.skipped += part.skipped
            out.cache_hits += part.cache_hits
            out.http_requests += part.http_requests
            out.retries += part.retries
            out.errors += part.errors
            out.error_types.update(part.error_types)
        return out


# A batch endpoint's bar: counts and elapsed time, no rate or time left (see Track.batch).
BATCH_BAR_FORMAT = "{l_bar}{bar}| {n_fmt}/{total_fmt} [{elapsed}{postfix}]"


@dataclass(slots=True)
class Track:
    """One labelled line (or bar) of the display: an endpoint's counts and its total."""

    label: str
    counts: Counts
    total: int | None = None  # requests this run has to send or read from the cache
    details: Callable[[], str] = lambda: ""  # adaptive state (concurrency, paces, outages)
    # A batch endpoint: its records arrive a batch at a time after minutes to hours, so a rate
    # and a time left drawn from them say nothing; its details say what it waits for.
    batch: bool = False


class Progress:
    """The display of a run's :class:`Counts`; ``enabled=False`` shows nothing.

    ``counts``/``total`` describe a run of one endpoint (or the run as a whole);
    ``tracks`` (one per endpoint) replace them when a sweep has several endpoints.
    """

    def __init__(
        self,
        *,
        enabled: bool,
        counts: Counts | None = None,
        total: int | None = None,
        stream: TextIO | None = None,
        clock: Callable[[], float] = time.monotonic,
        tty: bool | None = None,
        tracks: Sequence[Track] | None = None,
    ) -> None:
        self.stream = stream or sys.stderr
        self.enabled = enabled
        self.tty = shows_bars(self.stream) if tty is None else tty
        self.clock = clock
        self.started = clock()
        self.total = total
        self.counts = counts or Counts()
        self.tracks = list(tracks) if tracks else []
        # The endpoints' adaptive state (concurrency, paces, outages), shown after the counts
        # of a single line.
        self.details: Callable[[], str] = lambda: ""
        self._bars: list[Any] = []
        if enabled and self.tty:
            for position, track in enumerate(self._shown()):
                self._bars.append(
                    tqdm(
                        total=track.total,
                        unit="req",
                        file=self.stream,
                        dynamic_ncols=True,
                        desc=track.label or None,
                        position=position,
                        leave=True,
                        **({"bar_format": BATCH_BAR_FORMAT} if track.batch else {}),
                    )
                )

    def _shown(self) -> list[Track]:
        if len(self.tracks) > 1:
            return self.tracks
        track = Track("", self.counts, self.total, lambda: self.details())
        if self.tracks:
            only = self.tracks[0]
            track = Track(
                "",
                only.counts,
                only.total,
                lambda: self.details() or only.details(),
                batch=only.batch,
            )
        return [track]

    @property
    def interval_s(self) -> float:
        return TTY_REFRESH_S if self.tty else PROGRESS_INTERVAL_S

    def say(self, text: str) -> None:
        """One line about a stage (preflight, planning), when progress is shown."""
        if self.enabled:
            print(f"cotaudit: {text}", file=self.stream, flush=True)

    def lines(self) -> list[str]:
        """The plain lines a refresh prints: one, or one per endpoint."""
        elapsed = max(1e-9, self.clock() - self.started)
        out = []
        for track in self._shown():
            c = track.counts
            rate = c.written / elapsed
            head = f"cotaudit [{track.label}]: " if track.label else "cotaudit: "
            pace = "" if track.batch else f", {rate:.1f}/s"
            if track.total is not None:
                share = c.written / track.total if track.total else 1.0
                left = track.total - c.written
                eta = (
                    f", {duration(left / rate)} left"
                    if rate > 0 and left > 0 and not track.batch
                    else ""
                )
                done = f"{c.written:,}/{track.total:,} records ({share:.0%}){pace}{eta}"
            else:
                done = f"{c.written:,} records{pace}"
            text = (
                f"{head}{done}, retries {c.retries}, errors {c.errors}, cache hits "
                f"{c.cache_hits}, {duration(elapsed)} elapsed"
            )
            details = track.details()
            out.append(f"{text}; {details}" if details else text)
        return out

    def line(self) -> str:
        """The lines of :meth:`lines`, joined (one endpoint: the one line)."""
        return "\n".join(self.lines())

    def refresh(self) -> None:
        if not self.enabled:
            return
        if self._bars:
            for bar, track in zip(self._bars, self._shown(), strict=True):
                c = track.counts
                bar.n = c.written
                bar.set_postfix_str(
                    f"retries={c.retries}, errors={c.errors}, cached={c.cache_hits}"
                    + (f"; {details}" if (details := track.details()) else ""),
                    refresh=False,
                )
                bar.refresh()
        else:
            print(self.line(), file=self.stream, flush=True)

    def close(self) -> None:
        if self._bars:
            self.refresh()
            for bar in self._bars:
                bar.close()
            self._bars = []
