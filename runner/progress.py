"""Progress display: a tqdm bar on a terminal, plain periodic lines otherwise (stderr).

The engine only bumps counters (cheap, per record); :meth:`Progress.refresh` renders them and
is called by a periodic task, so the hot path never formats text.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import Any, TextIO

from tqdm import tqdm

from cotaudit.constants import PROGRESS_INTERVAL_S

TTY_REFRESH_S = 0.5  # seconds between bar redraws


class Progress:
    """Counters of a run and their display; ``enabled=False`` shows nothing."""

    def __init__(
        self,
        *,
        enabled: bool,
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
        self.done = 0
        self.retries = 0
        self.errors = 0
        self.cache_hits = 0
        # The endpoints' adaptive state (concurrency, paces, outages), shown after the counts.
        self.details: Callable[[], str] = lambda: ""
        self._bar: Any = None
        if enabled and self.tty:
            self._bar = tqdm(total=total, unit="req", file=self.stream, dynamic_ncols=True)

    @property
    def interval_s(self) -> float:
        return TTY_REFRESH_S if self.tty else PROGRESS_INTERVAL_S

    def line(self) -> str:
        elapsed = max(1e-9, self.clock() - self.started)
        rate = self.done / elapsed
        total = f"/{self.total}" if self.total is not None else ""
        text = (
            f"cotaudit: {self.done}{total} records, {rate:.1f}/s, retries {self.retries}, "
            f"errors {self.errors}, cache hits {self.cache_hits}, {elapsed:.0f} s"
        )
        details = self.details()
        return f"{text}; {details}" if details else text

    def refresh(self) -> None:
        if not self.enabled:
            return
        if self._bar is not None:
            self._bar.n = self.done
            self._bar.set_postfix_str(
                f"retries={self.retries}, errors={self.errors}, cached={self.cache_hits}"
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
