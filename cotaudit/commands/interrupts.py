"""Ctrl-C and SIGTERM in the commands that sweep and then evaluate (``demo``, ``reproduce``).

They take each signal as the command whose work they are doing takes it. During the sweep,
as ``cotaudit run``: the engine stops gracefully (:func:`runner.engine.stop_on_signals`), the
command says what is pending and that rerunning resumes, and exits 130. During the
evaluation, as ``cotaudit evaluate``: SIGTERM exits 143 and Ctrl-C 130, cleanup runs
(:func:`evaluator.parallel.stop_on_sigterm`; ``evaluate`` removes its partial directory), and
the command says that the stream is complete and that rerunning evaluates it.

Around both, :func:`command_interrupts` holds the whole command: a Ctrl-C that neither takes
(while the pack is read and checked, the modules load, the server starts, the table prints)
is said in one line too, naming what was kept and how to go on; and an ``--out`` directory
that the command made and wrote no file into is removed however the command ends, so that
a Ctrl-C in its first second does not leave an empty directory that looks like a run.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from cotaudit.schema import EVAL_DIRNAME, RESULTS_NAME

if TYPE_CHECKING:
    from runner.engine import RunSummary


@dataclass
class _Command:
    """What a sweep-and-evaluate command has done so far, for the line a Ctrl-C prints."""

    name: str
    out: Path
    run_dir: Path
    made: Path | None  # the topmost directory of ``out`` that this command made, if any
    removed: bool = False  # ``out`` was made and is removed again
    said: bool = False  # a line about the interrupt is printed
    swept: bool = False  # the sweep ran to its end
    evaluated: bool = False  # the evaluation is written

    def tidy(self) -> bool:
        """Remove ``out`` (and the parents made with it) if this command made it and wrote no
        file into it; whether it is gone. Only empty directories are removed, one by one, so
        a file that appeared meanwhile is never lost."""
        if self.made is None or not self.out.is_dir() or self.out.is_symlink():
            return self.removed
        if not _holds_no_files(self.out):
            return False
        with contextlib.suppress(OSError):
            for root, dirs, _ in os.walk(self.out, topdown=False):
                for name in dirs:
                    os.rmdir(os.path.join(root, name))
            for directory in (self.out, *self.out.parents):
                os.rmdir(directory)
                self.removed = True
                if directory == self.made:
                    break
        return self.removed

    def kept(self) -> str:
        """What became of ``out``, for a line said when no result was written."""
        if self.tidy():
            return f"{self.out}, which it had made, is removed"
        if self.made is None:
            return f"{self.out} is left as it was"
        return f"{self.out} is kept" if self.out.exists() else f"no {self.out} was made"

    def rerun(self) -> str:
        stream = self.run_dir / RESULTS_NAME
        if stream.is_file() and stream.stat().st_size > 0:
            return "rerun the same command to resume"
        return "rerun the same command to start"

    def line(self) -> str:
        """The line for a Ctrl-C that neither the sweep nor the evaluation took."""
        if self.evaluated:
            return (
                f"interrupted after the evaluation, which is complete in "
                f"{self.run_dir / EVAL_DIRNAME}: rerun the same command to print the table "
                "again (nothing is sent again)"
            )
        if self.swept:
            return EVALUATION_INTERRUPTED
        stream = self.run_dir / RESULTS_NAME
        if stream.is_file() and stream.stat().st_size > 0:
            return (
                f"interrupted; the stream so far is kept in {stream}: rerun the same command "
                "to resume"
            )
        return f"interrupted before any result was written; {self.kept()}: {self.rerun()}"


def _holds_no_files(directory: Path) -> bool:
    """Whether ``directory`` holds nothing but directories (a symlink counts as a file)."""
    for root, dirs, files in os.walk(directory):
        if files or any(os.path.islink(os.path.join(root, name)) for name in dirs):
            return False
    return True


def _made_by_mkdir(out: Path) -> Path | None:
    """The topmost of ``out`` and its parents that does not exist yet: what ``mkdir(parents=
    True)`` makes. None when ``out`` exists (or is not there to make: a dangling symlink)."""
    if out.exists() or out.is_symlink():
        return None
    made = out
    for parent in out.parents:
        if parent.exists() or parent.is_symlink():
            break
        made = parent
    return made


_current: ContextVar[_Command | None] = ContextVar("cotaudit_sweep_command", default=None)

EVALUATION_INTERRUPTED = (
    "interrupted during the evaluation; the sweep is complete (nothing pending): rerun the "
    "same command to evaluate the stream"
)


@contextmanager
def command_interrupts(command: str, out: Path, run_dir: Path) -> Iterator[None]:
    """Hold the whole of ``cotaudit COMMAND`` writing into ``--out out`` (the sweep's run in
    ``run_dir``): enter it before anything is checked or made.

    A Ctrl-C that the sweep (:func:`sweep_interrupted`) and the evaluation
    (:func:`evaluation_interrupts`) do not say themselves is said in one line on standard
    error: what was kept and how to go on. However the command ends (a Ctrl-C, a refusal, an
    error), ``out`` is removed where this command made it and wrote no file into it, with the
    parents it made for it; an ``out`` that was there before is left as it is."""
    state = _Command(command, out, run_dir, made=_made_by_mkdir(out))
    token = _current.set(state)
    try:
        yield
    except KeyboardInterrupt:
        if not state.said:
            _say(state.name, state.line())
        raise
    finally:
        _current.reset(token)
        state.tidy()


def _say(command: str, line: str) -> None:
    print(f"cotaudit {command}: {line}", file=sys.stderr, flush=True)


def sweep_interrupted(command: str, summary: RunSummary) -> int | None:
    """The exit status of a sweep stopped by a signal, after saying so; None otherwise."""
    from runner.commands.run import exit_status

    state = _current.get()
    if not summary.interrupted:
        if state is not None:
            state.swept = True
        return None
    line = summary.interrupted_line()
    if not summary.started:  # nothing was sent or written: say what became of --out
        more = f"{state.kept()}: {state.rerun()}" if state else "rerun the same command to start"
        line += f"; {more}"
    if state is not None:
        state.said = True
    _say(command, line)
    return exit_status(summary)


@contextmanager
def evaluation_interrupts(command: str) -> Iterator[None]:
    """Within the block (the evaluation after a finished sweep), SIGTERM ends the command as
    it ends ``cotaudit evaluate``; on it or Ctrl-C, one line says that rerunning evaluates."""
    from evaluator.parallel import Terminated, stop_on_sigterm

    state = _current.get()
    try:
        with stop_on_sigterm():
            yield
    except (KeyboardInterrupt, Terminated):
        if state is not None:
            state.said = True
        _say(command, EVALUATION_INTERRUPTED)
        raise
    if state is not None:
        state.evaluated = True
