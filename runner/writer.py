"""The single writer of ``results.jsonl``: one file descriptor, whole lines only.

Producers hand records to :meth:`RecordWriter.put`; the first record of an event-loop turn
schedules one *drain* callback, which serialises everything buffered with orjson and appends
it with unbuffered ``os.write`` calls at the end of that turn. So every record reaches the
operating system before the loop waits for the network again, and records never interleave
(one drain at a time, whole lines). ``fsync`` runs on a thread at most every
``fsync_interval_s`` (and at close): a crash of the process loses nothing that was written; a
power loss loses at most that interval, and can leave a torn last line, which the reader
drops (``runner.resume``).

Each fsync, and the close, also checks that ``path`` still names the file being written: a run
directory deleted or moved while the run writes would otherwise take every later record with
it (an unlinked file, or one under another name) while the run reports success. The writer
fails instead (:class:`StreamMovedError`), within about one fsync interval.

A failed fsync (``EIO`` from a failing disk, say) is another matter than a failed write: the
lines written since the last fsync that succeeded may never reach the disk (Linux marks their
pages clean all the same, and reading the file shows them until they leave memory). The error
then says how many of this run's records were on the disk at that last fsync, that the rest
are not known to be, and what to do (:func:`fsync_failed_note`), rather than the command
line's usual word that the lines written are intact.

A callback rather than a writer task: a task costs a wake-up, a future and a coroutine step
for every turn that produced a record, which under network latency is nearly every record.
"""

from __future__ import annotations

import asyncio
import errno
import functools
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

from cotaudit.constants import FSYNC_INTERVAL_S
from cotaudit.schema import validate_record

WRITER_BATCH_RECORDS = 512  # records joined into one write() at most


class StreamMovedError(FileNotFoundError):
    """The stream's path no longer names the file the writer appends to: it, or its run
    directory, was deleted or moved while the run wrote it."""

    def __init__(self, path: Path) -> None:
        super().__init__(
            errno.ENOENT,
            "Deleted or moved while the run wrote it (the stream or its run directory), with "
            "what the run wrote since; the run stopped",
            str(path),
        )


class RecordWriter:
    """Append JSON records to ``path``: ``start()``, ``put(record)``, ``await close()``.

    Must be started and used on one event loop. An error while writing (a full disk, say) is
    raised by the next ``put`` and by ``close``; the records written before it stay intact. A
    failed fsync is raised the same way, with a note of which records are not known to be on
    the disk.
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
        self.synced = 0  # records known to be on the disk: written before the last good fsync
        self._unsynced = False  # an fsync failed: the error says what is not known to be safe
        self._buffer: list[dict[str, Any]] = []
        self._scheduled = False
        self._error: BaseException | None = None
        self._fd: int | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._fsync: asyncio.Future[None] | None = None
        self._last_fsync = 0.0

    def start(self) -> None:
        # O_APPEND: every write lands at the end even if another tool appended meanwhile.
        self._fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        self._loop = asyncio.get_running_loop()
        self._last_fsync = self.clock()

    def put(self, record: dict[str, Any]) -> None:
        """Queue a record; it is written at the end of the current event-loop turn.

        The record is checked against its kind's type first (the same validator the evaluator
        runs on every line it reads), so a malformed record is refused before it reaches the
        stream, naming its request or problem and the field.
        """
        if self._error is not None:
            raise self._error
        if self._fd is None:
            raise RuntimeError(f"the writer of {self.path} is not open (start() it first)")
        validate_record(record, where=_describe(record))
        self._buffer.append(record)
        if not self._scheduled:
            self._scheduled = True
            self._loop.call_soon(self._drain)  # type: ignore[union-attr]  # set with _fd

    def _drain(self) -> None:
        self._scheduled = False
        if self._error is not None or self._fd is None:
            return
        try:
            self._write_buffered()
        except Exception as exc:  # surfaced by the next put() and by close()
            self._error = _naming(exc, self.path)
            return
        if self._fsync is None and self.clock() - self._last_fsync >= self.fsync_interval_s:
            self._start_fsync()

    def _write_buffered(self) -> None:
        buffer, dumps = self._buffer, orjson.dumps
        while buffer:
            batch = buffer[:WRITER_BATCH_RECORDS]
            del buffer[:WRITER_BATCH_RECORDS]
            # Each line is appended to one bytearray and freed at once, not collected in a
            # list and joined: freeing a batch of malloc'd lines together let glibc hand the
            # heap's top back to the kernel, and the next batch page-faulted it in again.
            data = bytearray()
            for record in batch:
                data += dumps(record, option=orjson.OPT_APPEND_NEWLINE)
            self._write_all(data)
            self.written += len(batch)

    def _write_all(self, data: bytes | bytearray) -> None:
        assert self._fd is not None
        view = memoryview(data)
        while view:
            n = os.write(self._fd, view)
            view = view[n:]

    def _start_fsync(self) -> None:
        assert self._loop is not None and self._fd is not None
        self._last_fsync = self.clock()
        # What this fsync covers at least: every record written before it starts (those
        # written while it runs may be covered or not, and are not counted as covered).
        covered = self.written
        self._fsync = self._loop.run_in_executor(None, self._sync, self._fd, covered)
        self._fsync.add_done_callback(functools.partial(self._fsync_done, covered=covered))

    def _sync(self, fd: int, covered: int) -> None:
        try:
            os.fsync(fd)
        except OSError as exc:
            raise self._fsync_failed(exc, self.synced, covered) from exc
        self._check_in_place(fd)

    def _fsync_failed(self, exc: OSError, synced: int, written: int) -> BaseException:
        """The error of a failed fsync: named, with a note on what is known of the lines."""
        self._unsynced = True
        named = _naming(exc, self.path)
        named.add_note(fsync_failed_note(synced, written))
        return named

    def _check_in_place(self, fd: int) -> None:
        """Raise :class:`StreamMovedError` unless ``path`` is still the file ``fd`` writes."""
        try:
            there = os.stat(self.path)
        except FileNotFoundError:
            raise StreamMovedError(self.path) from None
        held = os.fstat(fd)
        if (held.st_dev, held.st_ino) != (there.st_dev, there.st_ino):
            raise StreamMovedError(self.path)

    def _fsync_done(self, fut: asyncio.Future[None], *, covered: int) -> None:
        self._fsync = None
        if fut.cancelled():
            return
        exc = fut.exception()
        if exc is not None:
            self._error = self._error or _naming(exc, self.path)
        else:
            self.fsyncs += 1
            self.synced = max(self.synced, covered)

    async def close(self) -> None:
        """Write everything queued, fsync and close the file; raise the first write error."""
        fd = self._fd
        if fd is None:
            return
        try:
            if self._error is None:
                self._write_buffered()
            if self._fsync is not None:
                await asyncio.shield(self._fsync)
            covered = self.written
            try:
                os.fsync(fd)  # even after an error: what was written before it is kept
            except OSError as exc:
                if self._error is None:
                    raise self._fsync_failed(exc, self.synced, covered) from exc
                if not self._unsynced:
                    # A write error came first: its message must not let the lines pass as
                    # safe.
                    self._unsynced = True
                    why = exc.strerror or exc
                    lead = f"Flushing the stream to the disk (fsync) then failed too ({why})."
                    self._error.add_note(fsync_failed_note(self.synced, covered, lead=lead))
            else:
                if self._error is None:
                    self.synced = covered
                    self._check_in_place(fd)
        except Exception as exc:
            self._error = self._error or _naming(exc, self.path)
        finally:
            self._fd = None
            os.close(fd)
        if self._error is not None:
            raise self._error


def fsync_failed_note(
    synced: int, written: int, *, lead: str = "Flushing the stream to the disk (fsync) failed."
) -> str:
    """What a failed fsync leaves known of the lines, and what to do: the advice the command
    line prints instead of "lines already written are intact", which is not known now."""
    dropped = (
        "after a failed flush the system may have dropped them, while reading the file can "
        "still show them from memory"
    )
    if not written:
        known = "This run had written no record to it."
    elif not synced:
        known = (
            f"None of the {written:,} records this run wrote to it is known to be on the "
            f"disk: {dropped}."
        )
    else:
        known = (
            f"Of the {written:,} records this run wrote to it, the first {synced:,} were on "
            f"the disk at its last successful flush; whether the {written - synced:,} after "
            f"them are is not known: {dropped}."
        )
    return (
        f"{lead} {known} Check the disk (the system log, its health, its free space); once it "
        "is sound, and remounted or rebooted so that reading shows what the disk holds, rerun "
        "the same command: it reads every line of the stream again before it appends, redoes "
        "the requests of lines lost at its end, and refuses a line damaged before the end, "
        "naming it."
    )


def _naming(exc: BaseException, path: Path) -> BaseException:
    """An OSError from ``os.write``/``os.fsync`` names no file; give it the stream's path, so
    the message a user sees says which file could not be written."""
    if isinstance(exc, OSError) and exc.filename is None and exc.errno is not None:
        named = type(exc)(exc.errno, exc.strerror, str(path))
        named.__cause__ = exc
        return named
    return exc


def _describe(record: dict[str, Any]) -> str:
    """Which record this is, for an error message: its request id, else its problem id."""
    kind = record.get("kind", "record")
    if "request_id" in record:
        return f"{kind} record of request {record['request_id']}"
    return f"{kind} record of problem {record.get('problem_id')}"
