"""Advice in the terms of a command that sweeps into a directory of its own.

``demo`` and ``reproduce`` run the engine and the evaluator into ``--out DIR`` (its ``run/``
and ``cache/``). What the engine and the evaluator advise is written for ``cotaudit run``: its
``run_dir`` key, its ``--run-dir``, ``--shard`` and ``--retry-errors`` flags, another run
directory of the user's choosing. Such errors say so (``UsageError.in_run_terms``), and these
commands replace that advice with their own: give ``--out`` another directory, or move the
run directory aside. What was wrong and where is kept, and advice that names none of run's
settings (a run still writing there, a damaged line) is kept whole.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from cotaudit.errors import UsageError
from cotaudit.schema import RESULTS_NAME


def in_command_terms(
    exc: UsageError, *, out: Path, run_dir: Path, written: bool, anew: str, rerun: str
) -> UsageError:
    """``exc`` with its advice in the terms of a command that writes into ``--out out``.

    ``written``: the sweep has written its stream (the evaluation refused it);
    ``anew``: what doing it again is (``"replay the pack anew"``);
    ``rerun``: how the rerun ends its advice (``"rerun (no key needed)"``).
    """
    if not exc.in_run_terms:
        return exc
    another = f"give --out a new directory (e.g. --out {out}-2) or move {run_dir} aside"
    if written:
        fix = f"The sweep's stream is kept in {run_dir}. To {anew}, {another}, and {rerun}."
    else:
        fix = f"Nothing was written; {out} is left as it is. To {anew}, {another}, and {rerun}."
    return UsageError(exc.what, where=exc.where, fix=fix)


@contextmanager
def advice_in_command_terms(*, out: Path, run_dir: Path, anew: str, rerun: str) -> Iterator[None]:
    """Within the block (a sweep into ``run_dir``, the evaluation of its stream), a
    ``UsageError`` in ``cotaudit run``'s terms is raised again in the command's
    (:func:`in_command_terms`), saying whether this command wrote to the stream."""
    stream = run_dir / RESULTS_NAME
    before = _size(stream)
    try:
        yield
    except UsageError as exc:
        written = _size(stream) != before
        raise in_command_terms(
            exc, out=out, run_dir=run_dir, written=written, anew=anew, rerun=rerun
        ) from None


def _size(path: Path) -> int | None:
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return None
