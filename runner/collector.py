"""Keep Python's cyclic garbage collector out of a sweep's way, and give it back after.

A sweep allocates containers in bursts (a lookup chunk of 512 specs, then their records), so
the default first-generation threshold (700) ran ~130 collections in a 10,000-request warm
rerun, one of them a full pass over every object the process held (the task's parsed
problems, the stream's ids, every module): 25-45 ms, ~10% of that run. Nearly everything a
sweep allocates is freed by reference counting, so those passes found next to nothing.

While any sweep runs, :func:`collector_spared` raises the first-generation threshold to
``SWEEP_GC_THRESHOLD`` and freezes the objects that existed before the first sweep began
(long-lived by construction) out of the collector's passes. When the last running sweep
ends, exceptions included, the objects are unfrozen and the process's threshold is restored;
cyclic garbage made meanwhile is collected after. Sweeps that overlap (two in one event loop,
or in two threads) share one tuning: a counter, not each sweep's own save and restore, decides
when it ends, so the first to finish cannot undo it under the other, nor the last restore the
tuned threshold as if it were the process's own.
"""

from __future__ import annotations

import contextlib
import gc
import threading
from collections.abc import Iterator

# First-generation threshold during a sweep (Python's default: 700). At 10,000 a warm rerun
# of 10,000 requests ran no collection of its own; memory is bounded by the cycles made
# between two collections, which a sweep hardly makes.
SWEEP_GC_THRESHOLD = 10_000

_lock = threading.Lock()
_sweeps = 0  # sweeps running now
_saved_threshold: tuple[int, int, int] = gc.get_threshold()


@contextlib.contextmanager
def collector_spared() -> Iterator[None]:
    """Tune the collector for the duration of a sweep (see the module docstring)."""
    global _sweeps, _saved_threshold
    with _lock:
        if _sweeps == 0:
            _saved_threshold = gc.get_threshold()
            gc.set_threshold(max(_saved_threshold[0], SWEEP_GC_THRESHOLD), *_saved_threshold[1:])
            gc.freeze()
        _sweeps += 1
    try:
        yield
    finally:
        with _lock:
            _sweeps -= 1
            if _sweeps == 0:
                gc.unfreeze()
                gc.set_threshold(*_saved_threshold)
