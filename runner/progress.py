"""Progress display: tqdm bars on a terminal, plain periodic lines otherwise (stderr).

The engine only bumps counters (cheap, per record); :meth:`Progress.refresh` renders them and
is called by a periodic task, so the hot path never formats text. A sweep of one endpoint
shows one bar or line; a sweep of several shows one per endpoint, labelled with its name.
Plain lines carry the count, the total, the share done, the rate, the time left and the time
elapsed (``docs/command-line.md``, "Progress").

The rate, and the time left drawn from it, are those of the last ``RATE_WINDOW_S``, not of the
whole run: a server's budget lets a fresh key burst before it holds the client to its
sustained rate, and an outage stops the records for minutes; an average since the start then
promised a finish minutes too early for the rest of the run. On a terminal each endpoint's
bar has a status line under it with its adaptive state (concurrency, paces, an outage and its
next probe): on the bar's own line it was cut off by an 80-column terminal. Lines other code
prints to stderr while the bars are shown (an outage, a stopped endpoint) go above the bars
rather than through them.
"""

from __future__ import annotations

import io
import sys
import time
from collections import Counter, deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TextIO, cast

from tqdm import tqdm

from cotaudit.constants import PROGRESS_INTERVAL_S
from cotaudit.terminal import duration, shows_bars

TTY_REFRESH_S = 0.5  # seconds between bar redraws
RATE_WINDOW_S = 30.0  # seconds of progress the rate and the time left are measured over


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


# A bar: counts and elapsed time from tqdm; the rate, the time left and the counters are the
# postfix, so that a bar and a plain line say the same (tqdm's own rate is the run's average).
# A batch endpoint's has no rate or time left (see Track.batch).
BAR_FORMAT = "{l_bar}{bar}| {n_fmt}/{total_fmt} [{elapsed}{postfix}]"
# The status line under a bar: the endpoint's adaptive state, indented under its bar.
STATUS_FORMAT = "  {desc}"


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
        # Per line shown: (time, records written) at the refreshes of the last RATE_WINDOW_S,
        # from the start of the run, when this run had written nothing.
        self._samples = [deque([(self.started, 0)]) for _ in self._shown()]
        self._bars: list[Any] = []  # per line shown: its bar, then its status line
        self._stderr: _AboveBars | None = None
        if enabled and self.tty:
            for i, track in enumerate(self._shown()):
                common = {"file": self.stream, "dynamic_ncols": True, "leave": True}
                self._bars.append(
                    tqdm(
                        total=track.total,
                        unit="req",
                        desc=track.label or None,
                        position=2 * i,
                        bar_format=BAR_FORMAT,
                        **common,
                    )
                )
                self._bars.append(tqdm(bar_format=STATUS_FORMAT, position=2 * i + 1, **common))
            if self.stream is sys.stderr:
                # What the rest of the run prints to stderr (an outage, a stopped endpoint, a
                # warning) goes above the bars; printed at the cursor, it split a bar from its
                # status line and left a stale copy of the bar on the screen.
                self._stderr = _AboveBars(self.stream)
                sys.stderr = cast(TextIO, self._stderr)

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
            write_line(f"cotaudit: {text}", self.stream)

    def _rate(self, i: int, written: int, now: float) -> float:
        """Records per second of line ``i`` over the last ``RATE_WINDOW_S`` (since the start,
        in the run's first such span)."""
        samples = self._samples[i]
        samples.append((now, written))
        while len(samples) > 2 and samples[1][0] <= now - RATE_WINDOW_S:
            samples.popleft()
        then, before = samples[0]
        return (written - before) / max(1e-9, now - then)

    def _pace(self, i: int, track: Track, now: float) -> str:
        """The rate and the time left of line ``i`` (none for a batch endpoint, and no time
        left while nothing arrives: an outage, a batch in progress)."""
        if track.batch:
            return ""
        c = track.counts
        rate = self._rate(i, c.written, now)
        left = None if track.total is None else track.total - c.written
        eta = f", {duration(left / rate)} left" if left and left > 0 and rate > 0 else ""
        return f"{rate:.1f}/s{eta}"

    def lines(self) -> list[str]:
        """The plain lines a refresh prints: one, or one per endpoint."""
        now = self.clock()
        elapsed = max(1e-9, now - self.started)
        out = []
        for i, track in enumerate(self._shown()):
            c = track.counts
            head = f"cotaudit [{track.label}]: " if track.label else "cotaudit: "
            pace = self._pace(i, track, now)
            pace = f", {pace}" if pace else ""
            if track.total is not None:
                share = c.written / track.total if track.total else 1.0
                done = f"{c.written:,}/{track.total:,} records ({share:.0%}){pace}"
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

    def bar_texts(self) -> list[tuple[str, str]]:
        """Per line shown, what its bar says after the counts (its postfix), and its status
        line: what :meth:`refresh` gives the bars on a terminal."""
        now = self.clock()
        out = []
        for i, (track, named) in enumerate(zip(self._shown(), self._named(), strict=True)):
            c = track.counts
            parts = [self._pace(i, track, now), f"retries {c.retries}", f"errors {c.errors}"]
            if c.cache_hits:
                parts.append(f"cached {c.cache_hits}")
            # An endpoint's details start with its name, which its bar (or, for one
            # endpoint, the run) already says: on an 80-column terminal the name cost the
            # end of the status line, where an outage's next probe is.
            status = track.details()
            status = status.removeprefix(f"{named.label}: ") if named.label else status
            out.append((", ".join(p for p in parts if p), status))
        return out

    def _named(self) -> list[Track]:
        """The tracks as given (one per endpoint, with its name), line for line with
        :meth:`_shown`; a run shown without tracks, unnamed."""
        shown = self._shown()
        return self.tracks if len(self.tracks) == len(shown) else shown

    def refresh(self) -> None:
        if not self.enabled:
            return
        if self._bars:
            texts = self.bar_texts()
            for i, (track, (postfix, status)) in enumerate(zip(self._shown(), texts, strict=True)):
                bar, line = self._bars[2 * i], self._bars[2 * i + 1]
                bar.n = track.counts.written
                bar.set_postfix_str(postfix, refresh=False)
                line.set_description_str(status, refresh=False)
                bar.refresh()
                line.refresh()
        else:
            print(self.line(), file=self.stream, flush=True)

    def close(self) -> None:
        if self._bars:
            self.refresh()
            for bar in self._bars:
                bar.close()
            self._bars = []
        if self._stderr is not None:
            self._stderr.flush()
            if sys.stderr is self._stderr:
                sys.stderr = self._stderr.real
            self._stderr = None


def write_line(text: str, stream: TextIO) -> None:
    """Print ``text`` on ``stream`` as one line, above any progress bars shown there (which
    tqdm clears first and draws again under it)."""
    with tqdm.external_write_mode(file=stream):
        print(text, file=stream, flush=True)


class _AboveBars(io.TextIOBase):
    """Stands for stderr while bars are shown: each whole line written to it is printed above
    the bars (:func:`write_line`); what does not end a line waits for the rest of it."""

    def __init__(self, real: TextIO) -> None:
        super().__init__()
        self.real = real
        self._pending = ""

    def write(self, text: str) -> int:
        lines = (self._pending + text).split("\n")
        self._pending = lines.pop()
        for line in lines:
            write_line(line, self.real)
        return len(text)

    def flush(self) -> None:
        if self._pending:
            line, self._pending = self._pending, ""
            write_line(line, self.real)
        self.real.flush()

    def isatty(self) -> bool:
        return self.real.isatty()

    def fileno(self) -> int:
        return self.real.fileno()

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return self.real.encoding
