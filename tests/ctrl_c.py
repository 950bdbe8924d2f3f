"""For tests that stop a child process with Ctrl-C's SIGINT."""

from __future__ import annotations

import signal


def sigint_as_a_terminal_sends_it() -> None:
    """A ``preexec_fn``: the child takes SIGINT's default action, whatever this process
    inherited. A shell that starts a job in the background without job control ignores
    SIGINT in it, and its children inherit that, so the test's Ctrl-C would do nothing."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
