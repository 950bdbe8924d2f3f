"""One function call in a spawned child process that the calling process owns.

The figures of a report are drawn half in such a child (:mod:`evaluator.figures`). Its stops
are all the parent's:

- Ctrl-C. A terminal sends SIGINT to its whole foreground process group, so the child gets it
  too; a child that took it would print a ``KeyboardInterrupt`` traceback from wherever it
  was (starting, importing matplotlib, drawing, waiting). The child ignores it from its first
  instruction: it is started with SIGINT blocked in the starting thread (a signal mask is
  inherited across fork and exec, where a Python handler is not), so it stays blocked while
  the child's interpreter starts and unpickles the call (which imports the function's
  module); the child's first act then is to ignore SIGINT and unblock it, which discards one
  that came meanwhile. The parent's own handling is untouched: a Ctrl-C that arrives while
  the child is being started stays pending in the parent and is raised as soon as the start
  returns, never lost. (``multiprocessing``'s resource tracker is started first: starting it
  unblocks SIGINT in the starting thread.)
- The parent leaving the block (an error, a Ctrl-C, SIGTERM's ``Terminated``). The child is
  killed and reaped before the exception goes on, so the stop is prompt rather than after the
  child's remaining work, and nothing the parent removes next (the partial evaluation
  directory) is written to afterwards.
- The parent killed: the child ends within :data:`evaluator.orphans.PARENT_POLL_S`.

POSIX only, as the evaluator is.
"""

from __future__ import annotations

import multiprocessing
import signal
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from multiprocessing import resource_tracker
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from typing import Any, Generic, TypeVar

from evaluator.orphans import exit_with_parent

T = TypeVar("T")


class ChildCallFailed(RuntimeError):
    """The child ended without sending its result (killed, or a result that does not pickle)."""


class _RemoteTraceback(Exception):
    """The child's traceback, as the ``__cause__`` of the error re-raised in the parent."""

    def __str__(self) -> str:
        return f'\n"""\n{self.args[0]}"""'


class ChildCall(Generic[T]):
    """The parent's side of a call made by :func:`child_call`."""

    def __init__(self, process: BaseProcess, receiver: Connection) -> None:
        self._process = process
        self._receiver = receiver

    @property
    def pid(self) -> int | None:
        """The child's process id."""
        return self._process.pid

    def result(self) -> T:
        """Wait for the call's return value; re-raise its exception (the child's traceback as
        its cause), or raise :class:`ChildCallFailed` if the child ended without either."""
        try:
            ok, value, trace = self._receiver.recv()
        except EOFError:
            self._process.join()
            raise ChildCallFailed(
                f"the child process ended (exit status {self._process.exitcode}) before "
                "it sent its result"
            ) from None
        self._process.join()
        if ok:
            result: T = value
            return result
        raise value from _RemoteTraceback(trace)


@contextmanager
def children_start_with_sigint_blocked() -> Iterator[None]:
    """Processes spawned in the block start with SIGINT blocked (the module's docstring says
    why); each must call :func:`ignore_sigint` first. A Ctrl-C that reaches this process
    meanwhile stays pending and is raised as the block ends, never lost."""
    # Started now, not by the first spawn: starting it unblocks SIGINT in this thread.
    resource_tracker.ensure_running()
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)  # a pending Ctrl-C raises here


def ignore_sigint() -> None:
    """A child's first act: ignore SIGINT, then unblock it, which drops one that came while
    it started (Ctrl-C is its parent's to handle)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})


def _run(sender: Connection, fn: Callable[..., Any], args: tuple[Any, ...]) -> None:
    """The child's side."""
    ignore_sigint()
    exit_with_parent()
    try:
        outcome: tuple[bool, Any, str] = (True, fn(*args), "")
    except Exception as exc:
        outcome = (False, exc, traceback.format_exc())
    try:
        try:
            sender.send(outcome)
        except OSError:
            raise
        except Exception as exc:  # the result or the error does not pickle
            failed = ChildCallFailed(f"the child's result could not be sent: {exc!r}")
            sender.send((False, failed, outcome[2] or traceback.format_exc()))
    except OSError:
        pass  # the parent is gone (its end of the pipe closed): there is no one to tell
    finally:
        sender.close()


@contextmanager
def child_call(fn: Callable[..., T], *args: Any) -> Iterator[ChildCall[T]]:
    """Call ``fn(*args)`` in a spawned child process (``fn`` and ``args`` must pickle) while
    the block runs; ``.result()`` waits for it. Leaving the block kills the child if it is
    still running (the normal way out is after ``result()``, when it has ended)."""
    context = multiprocessing.get_context("spawn")
    receiver, sender = context.Pipe(duplex=False)
    process = context.Process(target=_run, args=(sender, fn, args), daemon=True)
    try:
        with children_start_with_sigint_blocked():
            process.start()
        sender.close()  # the child's end: the parent's recv sees EOF when the child ends
        yield ChildCall(process, receiver)
    finally:
        if process.pid is not None:
            if process.exitcode is None:
                process.kill()
            process.join()
        sender.close()
        receiver.close()


__all__ = [
    "ChildCall",
    "ChildCallFailed",
    "child_call",
    "children_start_with_sigint_blocked",
    "ignore_sigint",
]
