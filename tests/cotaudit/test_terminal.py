"""Progress bars only where a terminal has room for them: real pseudo-terminals, sized and not."""

from __future__ import annotations

import fcntl
import io
import os
import struct
import termios
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TextIO

from cotaudit.terminal import shows_bars
from evaluator.progress import EvaluationProgress
from runner.progress import Progress


@contextmanager
def terminal(columns: int | None) -> Iterator[TextIO]:
    """The program's end of a new pseudo-terminal, ``columns`` wide (None: never sized)."""
    leader, follower = os.openpty()
    if columns is not None:
        fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 24, columns, 0, 0))
    stream = open(follower, "w", encoding="utf-8")  # noqa: SIM115 (closed below)
    try:
        yield stream
    finally:
        stream.close()
        os.close(leader)


def test_a_sized_terminal_shows_bars_an_unsized_one_and_files_do_not(tmp_path: Path) -> None:
    with terminal(80) as sized:
        assert shows_bars(sized)
    with terminal(None) as unsized:  # a new pseudo-terminal reports 0 columns
        assert unsized.isatty() and os.get_terminal_size(unsized.fileno()).columns == 0
        assert not shows_bars(unsized)
    with (tmp_path / "log").open("w") as file:
        assert not shows_bars(file)
    assert not shows_bars(io.StringIO())  # no file descriptor at all
    with terminal(80) as closed:
        pass
    assert not shows_bars(closed)


def test_both_progress_displays_print_lines_on_an_unsized_terminal() -> None:
    with terminal(None) as unsized:
        assert not Progress(enabled=True, stream=unsized).tty
        assert not EvaluationProgress(enabled=True, stream=unsized).tty
    with terminal(100) as sized:
        runner_progress = Progress(enabled=True, stream=sized)
        evaluation_progress = EvaluationProgress(enabled=True, stream=sized)
        assert runner_progress.tty and evaluation_progress.tty
        runner_progress.close()
        evaluation_progress.close()
