"""One run at a time per run directory.

Two processes running into the same run directory would each read the stream, each send every
pending request and each append its records: every request twice. A run therefore holds an
exclusive ``flock`` on ``RUN/.lock`` for as long as it runs; a second run is refused with the
first one's pid. The kernel drops the lock when its holder exits, however it exits (SIGKILL
included), so a crashed run never leaves a stale lock behind, and a resume just works. The
file is never deleted: unlinking a lock file lets a third process lock a fresh inode while
the second still holds the old one.

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
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode("ascii"), 0)
        yield
    finally:
        os.close(fd)  # releases the lock
