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
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

from runner.constants import FSYNC_INTERVAL_S

WRITER_QUEUE_RECORDS = 4096  # records buffered between workers and the writer (backpressure)
WRITER_BATCH_RECORDS = 512  # records joined into one write() at most
_STOP = object()


class RecordWriter:
    """Append JSON records to ``path``; ``start()``, ``await put(record)``, ``await close()``."""

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
        self._queue: asyncio.Queue[Any] = asyncio.Queue(maxsize=WRITER_QUEUE_RECORDS)
        self._fd: int | None = None
        self._task: asyncio.Task[None] | None = None
        self._last_fsync = 0.0

    def start(self) -> None:
        # O_APPEND: every write lands at the end even if another tool appended meanwhile.
        self._fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        self._last_fsync = self.clock()
        self._task = asyncio.create_task(self._run(), name="cotaudit-writer")

    async def put(self, record: dict[str, Any]) -> None:
        """Queue a record (waits when the writer is behind)."""
        if self._task is not None and self._task.done():
            self._task.result()  # surface the writer's error instead of blocking forever
        await self._queue.put(record)

    async def _run(self) -> None:
        queue = self._queue
        dumps = orjson.dumps
        stop = False
        while not stop:
            item = await queue.get()
            lines: list[bytes] = []
            while True:
                if item is _STOP:
                    stop = True
                    break
                lines.append(dumps(item))
                if len(lines) >= WRITER_BATCH_RECORDS or queue.empty():
                    break
                item = queue.get_nowait()
            if lines:
                lines.append(b"")
                self._write_all(b"\n".join(lines))
                self.written += len(lines) - 1
            if self.clock() - self._last_fsync >= self.fsync_interval_s:
                await self._fsync()

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
        if not self._task.done():
            await self._queue.put(_STOP)
        try:
            await self._task
        finally:
            if self._fd is not None:
                os.fsync(self._fd)
                os.close(self._fd)
                self._fd = None
