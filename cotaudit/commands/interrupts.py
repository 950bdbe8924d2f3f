"""Ctrl-C and SIGTERM in the commands that sweep and then evaluate (``demo``, ``reproduce``).

They take each signal as the command whose work they are doing takes it. During the sweep,
as ``cotaudit run``: the engine stops gracefully (:func:`runner.engine.stop_on_signals`), the
command says what is pending and that rerunning resumes, and exits 130. During the
evaluation, as ``cotaudit evaluate``: SIGTERM exits 143 and Ctrl-C 130, cleanup runs
(:func:`evaluator.parallel.stop_on_sigterm`; ``evaluate`` removes its partial directory), and
the command says that the stream is complete and that rerunning evaluates it.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from runner.engine import RunSummary


def sweep_interrupted(command: str, summary: RunSummary) -> int | None:
    """The exit status of a sweep stopped by a signal, after saying so; None otherwise."""
    from runner.commands.run import exit_status

    if not summary.interrupted:
        return None
    print(f"cotaudit {command}: {summary.interrupted_line()}", file=sys.stderr, flush=True)
    return exit_status(summary)


@contextmanager
def evaluation_interrupts(command: str) -> Iterator[None]:
    """Within the block (the evaluation after a finished sweep), SIGTERM ends the command as
    it ends ``cotaudit evaluate``; on it or Ctrl-C, one line says that rerunning evaluates."""
    from evaluator.parallel import Terminated, stop_on_sigterm

    try:
        with stop_on_sigterm():
            yield
    except (KeyboardInterrupt, Terminated):
        print(
            f"cotaudit {command}: interrupted during the evaluation; the sweep is complete "
            "(nothing pending): rerun the same command to evaluate the stream",
            file=sys.stderr,
            flush=True,
        )
        raise
