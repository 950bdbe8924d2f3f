"""The single writer of ``results.jsonl``: one task, one file descriptor, whole lines only.

Workers hand records to an ``asyncio.Queue``; the writer serialises them with orjson and
appends them with one unbuffered ``os.write`` per drained batch, so every record reaches the
operating system as soon as the writer runs, and records never interleave (one writer, whole
lines). ``fsync`` runs at most every ``fsync_interval_s`` (and at close): a crash of the
process loses nothing that was written; a power loss loses at most that interval, and can
leave a torn last line, which the reader drops (``runner.stream``).
"""

from __future__ import annotations

import asyncio
import os
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

from runner.constants import FSYNC_INTERVAL_S

WRITER_QUEUE_RECORDS = 4096  # records buffered before producers wait (backpressure)
WRITER_BATCH_RECORDS = 512  # records joined into one write() at most


class RecordWriter:
    """Append JSON records to ``path``; ``start()``, ``await put(record)``, ``await close()``.

    The buffer is a plain deque with two events rather than an ``asyncio.Queue``: ``put`` is
    on the hot path (one or two calls per request) and only has to wait when the writer is
    ``WRITER_QUEUE_RECORDS`` behind.
    """

    def __init__(
        self,
        path: Path,
        *,
        fsync_interval_s: float = FSYNC_INTERVAL_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.path = path
        self.fsync_interval_s = fsync_interval_s
        self.clock = clock
        self.written = 0  # records written so far
        self.fsyncs = 0
        self._buffer: deque[dict[str, Any]] = deque()
        self._has_data = asyncio.Event()
        self._has_space = asyncio.Event()
        self._has_space.set()
        self._closing = False
        self._fd: int | None = None
        self._task: asyncio.Task[None] | None = None
        self._last_fsync = 0.0

    def start(self) -> None:
        # O_APPEND: every write lands at the end even if another tool appended meanwhile.
        self._fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        self._last_fsync = self.clock()
        self._task = asyncio.create_task(self._run(), name="cotaudit-writer")

    async def put(self, record: dict[str, Any]) -> None:
        """Queue a record (waits only when the writer is far behind)."""
        if self.put_nowait(record):
            await self.wait_for_space()

    def put_nowait(self, record: dict[str, Any]) -> bool:
        """Queue a record without waiting; True when the caller should now await
        :meth:`wait_for_space` (the writer is ``WRITER_QUEUE_RECORDS`` behind).

        The hot path's form of :meth:`put`: no coroutine per record.
        """
        task = self._task
        if task is not None and task.done():
            task.result()  # surface the writer's error instead of buffering forever
        buffer = self._buffer
        buffer.append(record)
        self._has_data.set()
        if len(buffer) >= WRITER_QUEUE_RECORDS:
            self._has_space.clear()
            return True
        return False

    async def wait_for_space(self) -> None:
        """Wait until the writer has drained its buffer below half of the limit."""
        await self._has_space.wait()

    async def _run(self) -> None:
        buffer = self._buffer
        dumps = orjson.dumps
        while True:
            if not buffer:
                if self._closing:
                    return
                self._has_data.clear()
                await self._has_data.wait()
                continue
            lines = [dumps(buffer.popleft()) for _ in range(min(len(buffer), WRITER_BATCH_RECORDS))]
            lines.append(b"")
            self._write_all(b"\n".join(lines))
            self.written += len(lines) - 1
            if len(buffer) < WRITER_QUEUE_RECORDS // 2:
                self._has_space.set()
            if self.clock() - self._last_fsync >= self.fsync_interval_s:
                await self._fsync()
            elif buffer:
                await asyncio.sleep(0)  # let producers run between batches
            # else: straight back to waiting; a sleep(0) there would cost a task step per
            # loop iteration that saw a record (most of them, under network latency).

    def _write_all(self, data: bytes) -> None:
        assert self._fd is not None
        view = memoryview(data)
        while view:
            n = os.write(self._fd, view)
            view = view[n:]

    async def _fsync(self) -> None:
        assert self._fd is not None
        self._last_fsync = self.clock()
        await asyncio.to_thread(os.fsync, self._fd)
        self.fsyncs += 1

    async def close(self) -> None:
        """Write everything queued, fsync and close the file."""
        if self._task is None:
            return
        self._closing = True
        self._has_data.set()
        try:
            await self._task
        finally:
            if self._fd is not None:
                os.fsync(self._fd)
                os.close(self._fd)
                self._fd = None
