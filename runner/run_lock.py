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

A process that reads a run directory a run may write (``cotaudit merge``, its shards) holds
the same lock, :func:`run_dir_lock_for_reading`, so that no run writes the directory while it
reads it, and leaves the directory as it found it: a lock file it had to make it removes again,
and a directory where none can be made (read-only, a copied archive) it reads unguarded, with a
warning.

Without ``fcntl`` (Windows), or on a filesystem that refuses locks (a warning says so), there
is no lock, and the rule is the user's to keep.
"""

from __future__ import annotations

import contextlib
import errno
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


# What opening a file for writing says in a directory or of a file this process may not write
# (permissions, a read-only mount, an immutable file).
_READ_ONLY = frozenset({errno.EACCES, errno.EPERM, errno.EROFS})


class RunDirBusy(UsageError):
    """``run_dir``'s lock is held by another process; ``holder`` is the pid it wrote there."""

    def __init__(self, run_dir: Path, holder: str) -> None:
        self.run_dir = run_dir
        self.holder = holder
        super().__init__(
            f"another cotaudit run is using this run directory (pid {holder})",
            where=str(run_dir),
            fix="Wait for it to finish or stop it (Ctrl-C), then rerun to resume; two runs "
            "into one directory would send and write every pending request twice.",
        )


def _lock(fd: int, path: Path, run_dir: Path, unguarded: str) -> bool:
    """Lock ``fd``, the open lock file ``path`` of ``run_dir``: ``True`` once held, ``False``
    on a filesystem that refuses locks (warned: ``unguarded`` says what goes on without the
    lock); :class:`RunDirBusy` if another process holds it."""
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.pread(fd, 32, 0).decode("ascii", "replace").strip() or "unknown"
        raise RunDirBusy(run_dir, holder) from None
    except OSError as exc:
        # A filesystem without locks (some network and FUSE mounts: ENOLCK, EOPNOTSUPP)
        # must not make runs impossible; the guard is lost there, and the user told so.
        print(
            f"cotaudit: warning: cannot lock {path} ({exc.strerror}); {unguarded}",
            file=sys.stderr,
            flush=True,
        )
        return False
    if not _is_file_at(fd, path):
        # The lock's holder removed the file (and maybe the directory) between this
        # process's open and its lock: what is locked now guards nothing.
        raise UsageError(
            "another cotaudit run left this run directory while this one started",
            where=str(run_dir),
            fix="Rerun the same command.",
        )
    return True


def _claim(fd: int) -> None:
    """Write this process's pid into the held lock file ``fd``, for a refused run to name."""
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()}\n".encode("ascii"), 0)


@contextlib.contextmanager
def run_dir_lock(run_dir: Path) -> Iterator[None]:
    """Hold ``run_dir``'s lock (the directory must exist); ``UsageError`` if another run has it
    (:class:`RunDirBusy`, naming its pid)."""
    if fcntl is None:  # pragma: no cover - Windows
        yield
        return
    path = run_dir / LOCK_NAME
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)  # not inherited by child processes
    try:
        unguarded = "running without the guard against a second run into this directory."
        if _lock(fd, path, run_dir, unguarded):
            _claim(fd)
        yield
    finally:
        os.close(fd)  # releases the lock


def _open_to_read(path: Path) -> tuple[int, bool, bool]:
    """Open the lock file ``path``: ``(fd, made here, writable)``. An ``OSError`` whose errno
    is in ``_READ_ONLY`` if it is absent and cannot be made, or can be neither written nor
    read."""
    while True:
        try:
            return os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644), True, True
        except FileExistsError:
            pass
        except OSError as exc:
            if exc.errno not in _READ_ONLY or not os.path.lexists(path):
                raise
        try:
            return os.open(path, os.O_RDWR), False, True
        except FileNotFoundError:
            continue  # its holder removed it meanwhile: make one
        except OSError as exc:
            if exc.errno not in _READ_ONLY:
                raise
        try:
            return os.open(path, os.O_RDONLY), False, False
        except FileNotFoundError:
            continue


@contextlib.contextmanager
def run_dir_lock_for_reading(run_dir: Path) -> Iterator[None]:
    """Hold the lock of ``run_dir``, a run directory this process reads and does not write, as
    :func:`run_dir_lock` does (:class:`RunDirBusy` if a run has it; a run started meanwhile
    is refused, naming this process), leaving the directory as it was but for its lock file's
    pid: a lock file made here is removed again, while still held.

    A lock file that cannot be opened for writing is locked read-only (a run's lock is still
    seen; this pid is not written, so a run refused meanwhile names the file's last pid). One
    that is absent and cannot be made (a read-only directory: a copied archive) means no run
    holds it now, since a run holds its lock file for as long as it runs; the directory is then
    read without the lock, and a warning says so, as on a filesystem without locks."""
    if fcntl is None:  # pragma: no cover - Windows
        yield
        return
    path = run_dir / LOCK_NAME
    unguarded = f"reading {run_dir} without the guard against a run writing it meanwhile."
    try:
        fd, made, writable = _open_to_read(path)
    except OSError as exc:
        if exc.errno not in _READ_ONLY:
            raise
        print(
            f"cotaudit: warning: cannot open or make {path} ({exc.strerror}); {unguarded}",
            file=sys.stderr,
            flush=True,
        )
        yield
        return
    locked: bool | None = None  # not yet: refused, the file is the holder's to keep
    try:
        locked = _lock(fd, path, run_dir, unguarded)
        if locked and writable:
            _claim(fd)
        yield
    finally:
        if made and locked is not None and (not locked or _is_file_at(fd, path)):
            # Removed while held: a run that opened it meanwhile and locks it after this
            # process lets go sees it is no longer RUN/.lock and is refused (run_dir_lock).
            with contextlib.suppress(OSError):
                path.unlink()
        os.close(fd)


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
