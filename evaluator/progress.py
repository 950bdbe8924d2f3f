"""Progress of an evaluation on standard error: a tqdm bar on a terminal, plain lines otherwise.

The unit is an *audit* (one model on one problem). The total is known once the problem
records have been read: problems times the run's endpoints (from the manifest beside the
stream, else the endpoints met so far). Without a terminal a line with the count, the total,
the rate and the time left is printed every ``PROGRESS_INTERVAL_S`` seconds, and one line per
stage after the audits (statistics, figures), so a log shows where a long evaluation is. The
clock is injected so tests need not wait.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import Any, TextIO

from tqdm import tqdm

from cotaudit.constants import PROGRESS_INTERVAL_S
from cotaudit.terminal import duration, shows_bars

PREFIX = "cotaudit evaluate"


class EvaluationProgress:
    """Counts audits and shows them; ``enabled=False`` shows nothing."""

    def __init__(
        self,
        *,
        enabled: bool,
        stream: TextIO | None = None,
        clock: Callable[[], float] = time.monotonic,
        tty: bool | None = None,
        interval_s: float = PROGRESS_INTERVAL_S,
    ) -> None:
        self.stream = stream or sys.stderr
        self.enabled = enabled
        self.tty = shows_bars(self.stream) if tty is None else tty
        self.clock = clock
        self.interval_s = interval_s
        self.started = clock()
        self.last_line = self.started
        self.done = 0
        self.total: int | None = None
        self._bar: Any = None
        if enabled and self.tty:
            self._bar = tqdm(
                total=None, unit="audit", file=self.stream, dynamic_ncols=True, desc=PREFIX
            )

    def set_total(self, total: int | None) -> None:
        """The audits expected (problems x endpoints); ``None`` while unknown."""
        if total == self.total or (total is not None and total < self.done):
            return
        self.total = total
        if self._bar is not None:
            self._bar.total = total
            self._bar.refresh()

    def audited(self, n: int = 1) -> None:
        """``n`` more audits are done."""
        self.done += n
        if not self.enabled:
            return
        if self._bar is not None:
            self._bar.update(n)
            return
        now = self.clock()
        if now - self.last_line >= self.interval_s:
            self.last_line = now
            self._print(self.line())

    def line(self) -> str:
        """The plain progress line: count, total, rate, time left and elapsed."""
        elapsed = max(1e-9, self.clock() - self.started)
        rate = self.done / elapsed
        if self.total:
            left = (self.total - self.done) / rate if rate > 0 else None
            eta = "unknown" if left is None else duration(left)
            head = f"{self.done:,}/{self.total:,} audits ({100 * self.done / self.total:.0f}%)"
            return f"{PREFIX}: {head}, {rate:.1f}/s, {eta} left, {duration(elapsed)} elapsed"
        return f"{PREFIX}: {self.done:,} audits, {rate:.1f}/s, {duration(elapsed)} elapsed"

    def stage(self, what: str) -> None:
        """A stage after the audits begins (e.g. "statistics: 10,000 bootstrap resamples")."""
        if not self.enabled:
            return
        if self._bar is not None:
            self._bar.set_postfix_str(what)
            return
        self._print(f"{PREFIX}: {self.done:,} audits done; {what}")

    def close(self) -> None:
        """Finish the bar (a terminal) or print nothing more."""
        if self._bar is not None:
            self._bar.close()
            self._bar = None

    def _print(self, text: str) -> None:
        print(text, file=self.stream, flush=True)
