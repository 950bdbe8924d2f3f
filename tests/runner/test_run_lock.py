"""One run per run directory: a second is refused naming the first; a dead holder's lock is
gone with it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from cotaudit.errors import UsageError
from runner.run_lock import LOCK_NAME, run_dir_lock

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="flock is POSIX only")


def test_a_second_holder_is_refused_naming_the_first_and_the_lock_is_released(
    tmp_path: Path,
) -> None:
    with run_dir_lock(tmp_path):
        assert (tmp_path / LOCK_NAME).read_text() == f"{os.getpid()}\n"
        refused = pytest.raises(UsageError, match=f"another cotaudit run .*pid {os.getpid()}")
        with refused, run_dir_lock(tmp_path):
            pass
    with run_dir_lock(tmp_path):  # released on exit
        pass


def test_a_killed_holder_leaves_no_stale_lock(tmp_path: Path) -> None:
    # The holder takes the lock, says so, and waits on its stdin (no sleeping) until killed.
    code = (
        "import sys; from pathlib import Path; from runner.run_lock import run_dir_lock\n"
        "with run_dir_lock(Path(sys.argv[1])):\n"
        "    print('locked', flush=True); sys.stdin.read()\n"
    )
    with subprocess.Popen(
        [sys.executable, "-c", code, str(tmp_path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    ) as holder:
        try:
            assert holder.stdout is not None and holder.stdout.readline() == "locked\n"
            with pytest.raises(UsageError, match=f"pid {holder.pid}"), run_dir_lock(tmp_path):
                pass
        finally:
            holder.send_signal(signal.SIGKILL)
            holder.wait()
    with run_dir_lock(tmp_path):  # the kernel dropped the dead holder's lock
        pass


def test_a_filesystem_without_locks_warns_and_runs_unguarded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import errno
    import fcntl

    def no_locks(fd: int, operation: int) -> None:
        raise OSError(errno.ENOLCK, "No locks available")

    monkeypatch.setattr(fcntl, "flock", no_locks)
    entered = False
    with run_dir_lock(tmp_path):
        entered = True
    assert entered
    err = capsys.readouterr().err
    assert f"cannot lock {tmp_path / LOCK_NAME} (No locks available)" in err
