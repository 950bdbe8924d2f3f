"""Progress display: a tqdm bar on a terminal, plain periodic lines otherwise (stderr).

The engine only bumps counters (cheap, per record); :meth:`Progress.refresh` renders them and
is called by a periodic task, so the hot path never formats text.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TextIO

from tqdm import tqdm

from cotaudit.constants import PROGRESS_INTERVAL_S

TTY_REFRESH_S = 0.5  # seconds between bar redraws


@dataclass(slots=True)
class Counts:
    """What a run has done so far: the engine counts, the display and the summary read."""

    planned: int = 0
    written: int = 0  # response records written (errors included)
    skipped: int = 0  # already in the stream
    cache_hits: int = 0
    http_requests: int = 0
    retries: int = 0
    errors: int = 0


class Progress:
    """The display of a run's :class:`Counts`; ``enabled=False`` shows nothing."""

    def __init__(
        self,
        *,
        enabled: bool,
        counts: Counts | None = None,
        total: int | None = None,
        stream: TextIO | None = None,
        clock: Callable[[], float] = time.monotonic,
        tty: bool | None = None,
    ) -> None:
        self.stream = stream or sys.stderr
        self.enabled = enabled
        self.tty = self.stream.isatty() if tty is None else tty
        self.clock = clock
        self.started = clock()
        self.total = total
        self.counts = counts or Counts()
        # The endpoints' adaptive state (concurrency, paces, outages), shown after the counts.
        self.details: Callable[[], str] = lambda: ""
        self._bar: Any = None
        if enabled and self.tty:
            self._bar = tqdm(total=total, unit="req", file=self.stream, dynamic_ncols=True)

    @property
    def interval_s(self) -> float:
        return TTY_REFRESH_S if self.tty else PROGRESS_INTERVAL_S

    def line(self) -> str:
        c = self.counts
        elapsed = max(1e-9, self.clock() - self.started)
        total = f"/{self.total}" if self.total is not None else ""
        text = (
            f"cotaudit: {c.written}{total} records, {c.written / elapsed:.1f}/s, retries "
            f"{c.retries}, errors {c.errors}, cache hits {c.cache_hits}, {elapsed:.0f} s"
        )
        details = self.details()
        return f"{text}; {details}" if details else text

    def refresh(self) -> None:
        if not self.enabled:
            return
        if self._bar is not None:
            c = self.counts
            self._bar.n = c.written
            self._bar.set_postfix_str(
                f"retries={c.retries}, errors={c.errors}, cached={c.cache_hits}"
                + (f"; {details}" if (details := self.details()) else ""),
                refresh=False,
            )
            self._bar.refresh()
        else:
            print(self.line(), file=self.stream, flush=True)

    def close(self) -> None:
        if self._bar is not None:
            self.refresh()
            self._bar.close()
            self._bar = None
