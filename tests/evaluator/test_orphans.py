"""A worker process whose parent is killed ends instead of waiting forever for work."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

PARENT = """
import multiprocessing, os, sys, time
from concurrent.futures import ProcessPoolExecutor
from evaluator.orphans import exit_with_parent

if __name__ == "__main__":
    watched = sys.argv[1] == "watched"
    pool = ProcessPoolExecutor(
        1,
        mp_context=multiprocessing.get_context("spawn"),
        initializer=exit_with_parent if watched else None,
        initargs=(0.05,) if watched else (),
    )
    print(pool.submit(os.getpid).result(), flush=True)  # the worker, now idle
    time.sleep(600)
"""


def alive(pid: int | None) -> bool:
    """Whether ``pid`` is a live process (a zombie, ended but not yet reaped, is not)."""
    if pid is None:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie (exited, not yet reaped) counts as gone; so does one reaped meanwhile
        return not Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1].startswith("Z")
    except (OSError, IndexError):
        return False


def _worker_after_parent_killed(tmp_path: Path, mode: str) -> int:
    script = tmp_path / "parent.py"
    script.write_text(PARENT)
    parent = subprocess.Popen(
        [sys.executable, str(script), mode],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,  # the killed parent's resource tracker complains on its way
        text=True,
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert parent.stdout is not None
    with parent, parent.stdout:
        worker = int(parent.stdout.readline())
        parent.send_signal(signal.SIGKILL)
    return worker


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="needs /proc to see the worker")
def test_an_idle_worker_ends_when_its_parent_is_killed(tmp_path: Path) -> None:
    worker = _worker_after_parent_killed(tmp_path, "watched")
    deadline = time.monotonic() + 30
    while alive(worker) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive(worker)


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="needs /proc to see the worker")
def test_without_the_watch_the_worker_is_left_waiting(tmp_path: Path) -> None:
    # What the watch is for: an unwatched worker outlives its killed parent.
    worker = _worker_after_parent_killed(tmp_path, "unwatched")
    try:
        time.sleep(1.0)
        assert alive(worker)
    finally:
        if alive(worker):
            os.kill(worker, signal.SIGKILL)
