"""Worker processes that end with the process that started them.

A worker of a ``multiprocessing`` pool or a ``ProcessPoolExecutor`` waits for its next task
on a queue whose pipe it holds both ends of, so when the process that started it is killed
(SIGKILL, the OOM killer) it never sees the end of the pipe: it waits forever, holding its
memory (matplotlib's figure process about 140 MB). :func:`exit_with_parent`, run in the
worker (as the pool's initializer), watches for the parent to go and ends the worker then.
Polling the parent's pid is what works on every POSIX system; Linux's ``PR_SET_PDEATHSIG``
would fire when the *thread* that spawned the worker ends, which for a pool that replaces
its workers is the pool's handler thread, not the process.
"""

from __future__ import annotations

import os
import threading
import time

PARENT_POLL_S = 1.0  # how soon an orphaned worker notices; the check costs one system call


def exit_with_parent(poll_s: float = PARENT_POLL_S) -> None:
    """In a worker process: end it (exit status 1, no cleanup: its parent owned the work)
    within ``poll_s`` of the process that started it ending."""
    parent = os.getppid()

    def watch() -> None:
        while True:
            time.sleep(poll_s)
            if os.getppid() != parent:  # re-parented: the parent is gone
                os._exit(1)

    threading.Thread(target=watch, name="cotaudit-parent-watch", daemon=True).start()


__all__ = ["PARENT_POLL_S", "exit_with_parent"]
