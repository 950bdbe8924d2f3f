"""One run at a time per run directory.

Two processes running into the same run directory would each read the stream, each send every
pending request and each append its records: every request twice. A run therefore holds an
exclusive ``flock`` on ``RUN/.lock`` for as long as it runs; a second run is refused with the
first one's pid. The kernel drops the lock when its holder exits, however it exits (SIGKILL
included), so a crashed run never leaves a stale lock behind, and a resume just works. The
file is deleted only by its lock's holder, with the directory it made and left empty (a run
refused before it wrote anything). A run that opened the file just before and locks it just
after holds a lock on a file no longer there, which would let a third run lock a fresh one
beside it: having locked, a run checks that its file is still ``RUN/.lock`` and is refused
otherwise.

Without ``fcntl`` (Windows), or on a filesystem that refuses locks (a warning says so), there
is no lock, and the rule is the user's to keep.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
from pathlib import Path

from cotaudit.errors import UsageError

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

LOCK_NAME = ".lock"


def _is_file_at(fd: int, path: Path) -> bool:
    """Whether the open file ``fd`` is still the one at ``path``."""
    try:
        there = os.stat(path)
    except FileNotFoundError:
        return False
    held = os.fstat(fd)
    return (held.st_dev, held.st_ino) == (there.st_dev, there.st_ino)


@contextlib.contextmanager
def run_dir_lock(run_dir: Path) -> Iterator[None]:
    """Hold ``run_dir``'s lock (the directory must exist); ``UsageError`` if another run has it."""
    if fcntl is None:  # pragma: no cover - Windows
        yield
        return
    path = run_dir / LOCK_NAME
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)  # not inherited by child processes
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode("ascii", "replace").strip() or "unknown"
            raise UsageError(
                f"another cotaudit run is using this run directory (pid {holder})",
                where=str(run_dir),
                fix="Wait for it to finish or stop it (Ctrl-C), then rerun to resume; two runs "
                "into one directory would send and write every pending request twice.",
            ) from None
        except OSError as exc:
            # A filesystem without locks (some network and FUSE mounts: ENOLCK, EOPNOTSUPP)
            # must not make runs impossible; the guard is lost there, and the user told so.
            print(
                f"cotaudit: warning: cannot lock {path} ({exc.strerror}); running without the "
                "guard against a second run into this directory.",
                file=sys.stderr,
                flush=True,
            )
            yield
            return
        if not _is_file_at(fd, path):
            # The lock's holder removed the file (and maybe the directory) between this
            # run's open and its lock: what is locked now guards nothing.
            raise UsageError(
                "another cotaudit run left this run directory while this one started",
                where=str(run_dir),
                fix="Rerun the same command.",
            )
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode("ascii"), 0)
        yield
    finally:
        os.close(fd)  # releases the lock


@contextlib.contextmanager
def locked_run_dir(run_dir: Path) -> Iterator[None]:
    """Make ``run_dir`` if missing and hold its lock (:func:`run_dir_lock`) for the block.

    A directory made here that holds nothing but its lock file when the block ends (a run
    refused before it wrote anything: its cache, its preflight) is removed, by the lock's
    holder and before it lets the lock go: a process refused by the lock never touches a
    directory another is using, and one refused leaves the directory to its holder."""
    made = not run_dir.exists()
    run_dir.mkdir(parents=True, exist_ok=True)
    with contextlib.ExitStack() as stack:
        try:
            stack.enter_context(run_dir_lock(run_dir))
        except OSError:
            if made:  # the lock file could not be made: leave no empty directory behind
                with contextlib.suppress(OSError):
                    run_dir.rmdir()
            raise
        if made:
            stack.callback(_remove_if_unused, run_dir)
        yield


def _remove_if_unused(run_dir: Path) -> None:
    """Remove ``run_dir`` if it holds nothing but its lock file.

    Called while the lock is held, so no other run is using the directory. A run that opens
    the lock file meanwhile is refused by the lock; one that comes after the unlink makes a
    lock file of its own, and the ``rmdir`` then fails and leaves it alone; one that locked
    the unlinked file sees it is no longer the directory's (:func:`run_dir_lock`)."""
    with contextlib.suppress(OSError):
        if {p.name for p in run_dir.iterdir()} <= {LOCK_NAME}:
            (run_dir / LOCK_NAME).unlink(missing_ok=True)
            run_dir.rmdir()
