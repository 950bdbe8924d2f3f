"""Whether a stream is a terminal that can show a progress bar; both halves ask it."""

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
