"""What the terminal shows: whether a stream can show a progress bar, and how a span of time
reads in a progress line; both halves ask it."""

from __future__ import annotations

import os
from typing import TextIO


def shows_bars(stream: TextIO) -> bool:
    """True for a terminal that reports a width; False for a file, a pipe, or a terminal
    without a size.

    A pseudo-terminal that nobody sized (``script``, some CI runners' and editors' shells)
    reports 0 columns: tqdm then draws its bars with no room for them, and the user sees
    nothing for the whole run. Such a stream gets the plain progress lines instead.
    """
    try:
        if not stream.isatty():
            return False
        return os.get_terminal_size(stream.fileno()).columns > 0
    except (OSError, ValueError):  # closed, or no file descriptor (io.UnsupportedOperation)
        return False


def duration(seconds: float) -> str:
    """A span of time as a progress line shows it: ``42 s``, ``17 min``, ``2.1 h``."""
    seconds = max(0.0, seconds)
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"
