"""The content-addressed response cache: ``spec.cache_key`` -> a successful response.

Backed by ``diskcache`` (SQLite + files), shared by runs, safe for several processes, and
used through its public API only (``Cache.get``, ``Cache.set``, ``Cache.transact``). Every
call runs on one dedicated thread, off the event loop, and is batched: the engine looks up a
whole chunk of the plan in one hop, and stores are buffered and committed in one transaction
per batch (one SQLite commit per response would cap a cold run at the disk's commit rate).
Only successful responses are stored. Values are orjson bytes of ``{"text",
"finish_reason", "usage"}`` and, where known, ``served_model``, ``system_fingerprint``,
``reasoning``, ``reasoning_tokens``, ``reasoning_withheld``: never request headers, never
keys.

A cache directory deleted while the run uses it (a clean-up, a tmp reaper) does not fail
diskcache: its open SQLite file is unlinked, stores go on into it and vanish at close, and the
next run sends (and pays for) every request again. So each store batch, and the close, first
checks that the directory and its database are still the ones opened (two ``stat`` calls);
when they are not, the run warns once, naming the directory, stores nothing more (it would
only leave value files in a directory recreated for them), and counts every answer this run
stored as not cached. The stream holds every answer, so the run's exit status is unchanged.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import sys
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, NamedTuple

import diskcache
import orjson

from cotaudit.caller_terms import run_with
from cotaudit.errors import CacheError, UsageError
from cotaudit.schema import JSONDict

# Responses per write transaction: a transaction's commit is paid once per batch, and a
# crash loses at most the buffered stores, whose records are already in the stream.
CACHE_PUT_BATCH = 1024
# ... or once the oldest buffered store is this old: at a provider's pace (an answer every few
# seconds) a batch would take an hour to fill, and a crash would lose its stores from the
# cache (a new run directory would send those paid requests again).
CACHE_PUT_MAX_AGE_S = 1.0
CACHE_SIZE_LIMIT_BYTES = 2**40  # no eviction in practice: entries are research results

# (device, inode) of the cache directory and of its database file.
Identity = tuple[tuple[int, int], tuple[int, int]]


def identity(directory: Path) -> Identity | None:
    """Which directory and database ``directory`` names now; None where either is gone (or
    the directory is a file now). Another ``OSError`` (a permission) is raised."""
    try:
        held = os.stat(directory)
        db = os.stat(directory / diskcache.core.DBNAME)
    except (FileNotFoundError, NotADirectoryError):
        return None
    return (held.st_dev, held.st_ino), (db.st_dev, db.st_ino)


_OPTIONAL = (
    "served_model",
    "system_fingerprint",
    "reasoning",
    "reasoning_tokens",
    "reasoning_withheld",
)


class CachedResponse(NamedTuple):
    """A cached answer."""

    text: str
    finish_reason: str | None
    usage: JSONDict
    # Optional since 0.2 (absent from older entries): what the server said it served, and
    # a reasoning model's trace.
    served_model: str | None = None
    system_fingerprint: str | None = None
    reasoning: str | None = None
    reasoning_tokens: int | None = None
    reasoning_withheld: bool | None = None  # True where the server withheld the trace's text

    def to_bytes(self) -> bytes:
        value: JSONDict = {
            "text": self.text,
            "finish_reason": self.finish_reason,
            "usage": self.usage,
        }
        for name in _OPTIONAL:
            if getattr(self, name) is not None:
                value[name] = getattr(self, name)
        return orjson.dumps(value)

    @classmethod
    def from_bytes(cls, data: bytes) -> CachedResponse | None:
        """None for an entry that does not decode (treated as a miss, then overwritten)."""
        try:
            value = orjson.loads(data)
            return cls(
                text=str(value["text"]),
                finish_reason=value.get("finish_reason"),
                usage=dict(value["usage"]),
                **{name: value.get(name) for name in _OPTIONAL},
            )
        except (orjson.JSONDecodeError, KeyError, TypeError, ValueError):
            return None


def cannot_open(directory: Path, cause: BaseException) -> UsageError:
    """What a cache that cannot be opened is told as: its directory, why, and the ways out."""
    why = cause.strerror if isinstance(cause, OSError) and cause.strerror else str(cause)
    without_cache = run_with("no_cache", config=False)
    return UsageError(
        f"the response cache cannot be opened ({why}); it must be readable and writable, with "
        "room to grow",
        where=str(directory),
        fix="Make it writable or free space on its disk (move a damaged one away), point "
        f"cache_dir at another directory, or run without a cache ({without_cache}: "
        "every request is sent, no answer is stored). Nothing was sent or written.",
    )


class ResponseCache:
    """Async front of a diskcache directory; create with :meth:`open`, end with :meth:`close`."""

    def __init__(
        self,
        cache: diskcache.Cache,
        executor: ThreadPoolExecutor,
        *,
        directory: Path,
        flush_after_s: float = CACHE_PUT_MAX_AGE_S,
        opened: Identity | None = None,
    ) -> None:
        self._cache = cache
        self._executor = executor
        self._pending: list[tuple[str, bytes]] = []
        self._flush_after_s = flush_after_s
        self._timer: asyncio.TimerHandle | None = None
        self._flushes: set[asyncio.Future[bool]] = set()
        self.directory = directory
        self.failed_stores = 0  # responses whose store failed (they are in the stream)
        self.stored = 0  # responses this run committed to the cache
        # What the directory was when opened (None: unknown, not checked), and whether it has
        # since been found deleted or replaced.
        self._opened = opened
        self.gone = False

    @classmethod
    async def open(
        cls, directory: Path, *, flush_after_s: float = CACHE_PUT_MAX_AGE_S
    ) -> ResponseCache:
        executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="cotaudit-cache")
        loop = asyncio.get_running_loop()

        def _open() -> tuple[diskcache.Cache, Identity | None]:
            directory.mkdir(parents=True, exist_ok=True)
            # Entries never expire and are never evicted, so culling has nothing to find: with
            # cull_limit 0 a store skips the query for expired keys that each `set` runs.
            cache = diskcache.Cache(
                str(directory),
                size_limit=CACHE_SIZE_LIMIT_BYTES,
                eviction_policy="none",
                cull_limit=0,
            )
            return cache, identity(directory)

        try:
            cache, opened = await loop.run_in_executor(executor, _open)
        except (sqlite3.Error, OSError) as exc:
            # Opening writes (diskcache records its settings): a read-only or full cache
            # fails here, as does one that is not a database. Refused like bad input, since
            # the fix is the user's and the caller opens it before it sends or writes.
            executor.shutdown(wait=False)
            raise cannot_open(directory, exc) from exc
        return cls(cache, executor, directory=directory, flush_after_s=flush_after_s, opened=opened)

    async def get_many(self, keys: Sequence[str]) -> list[CachedResponse | None]:
        """Look up many keys in one hop to the cache thread."""
        if not keys:
            return []
        loop = asyncio.get_running_loop()
        try:
            raw = await loop.run_in_executor(self._executor, self._get_many_sync, list(keys))
        except sqlite3.Error as exc:  # a lookup that fails must not turn into paid requests
            raise CacheError(self.directory, exc) from exc
        return [None if r is None else CachedResponse.from_bytes(r) for r in raw]

    async def get(self, key: str) -> CachedResponse | None:
        return (await self.get_many([key]))[0]

    def _get_many_sync(self, keys: list[str]) -> list[Any]:
        # One transaction for the chunk: SQLite then takes its locks once, not once per key
        # (lookups cost about a third less). Other processes read the cache meanwhile; their
        # stores wait the few milliseconds that the chunk takes.
        get = self._cache.get
        with self._cache.transact():
            return [get(key) for key in keys]

    def put(self, key: str, response: CachedResponse) -> None:
        """Buffer a store; committed in batches of ``CACHE_PUT_BATCH``, or
        ``flush_after_s`` after the oldest buffered one (and by :meth:`flush`, :meth:`close`)."""
        self._pending.append((key, response.to_bytes()))
        if len(self._pending) >= CACHE_PUT_BATCH:
            self._start_flush()
        elif self._timer is None:
            loop = asyncio.get_running_loop()
            self._timer = loop.call_later(self._flush_after_s, self._start_flush)

    def _start_flush(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if not self._pending:
            return
        batch, self._pending = self._pending, []
        if self.gone:  # nothing stored now would outlive the run
            self.failed_stores += len(batch)
            return
        loop = asyncio.get_running_loop()
        fut = loop.run_in_executor(self._executor, self._put_many_sync, batch)
        self._flushes.add(fut)
        fut.add_done_callback(self._flushes.discard)
        fut.add_done_callback(lambda done: self._check_stored(done, len(batch)))

    def _check_stored(self, done: asyncio.Future[bool], size: int) -> None:
        """A failed store (a locked database, a full disk) loses nothing but cache entries:
        their records are in the stream. Say so once and go on, rather than failing the run
        or leaving the error to a garbage-collection log line."""
        if done.cancelled():
            return
        if done.exception() is None:
            if done.result():
                self.stored += size
            else:
                self._lost(size)
            return
        first = self.failed_stores == 0
        self.failed_stores += size
        if first:
            print(
                f"cotaudit: warning: could not store responses in the cache "
                f"{self.directory} ({done.exception()}); they are in the stream, but "
                "another run will send them again.",
                file=sys.stderr,
                flush=True,
            )

    def _lost(self, unstored: int) -> None:
        """The cache directory was found deleted or replaced: every answer this run stored
        went with it, and ``unstored`` more were not stored. Said once; nothing is stored
        from now on."""
        first = not self.gone
        self.gone = True
        self.failed_stores += self.stored + unstored
        self.stored = 0
        if first:
            print(
                f"cotaudit: warning: the response cache {self.directory} was deleted or "
                "replaced while this run used it; the answers it held and those this run "
                "received are not cached (no more are stored). They are in the stream, so a "
                "resume of this run directory skips them, but another run (a new run "
                "directory) sends those requests again and pays for them.",
                file=sys.stderr,
                flush=True,
            )

    def _in_place_sync(self) -> bool:
        """Whether the directory and its database are still the ones opened (True when
        that was not known at open)."""
        if self._opened is None:
            return True
        try:
            return identity(self.directory) == self._opened
        except OSError:  # not known (a permission): the open database still takes the stores
            return True

    def _put_many_sync(self, batch: list[tuple[str, bytes]]) -> bool:
        """Store ``batch``; False, storing nothing, where the directory is no longer the one
        opened (a store would go to an unlinked database, its values to a new directory)."""
        if not self._in_place_sync():
            return False
        # One transaction for the batch. Keys are content addresses, so whichever answer a
        # key holds is a valid answer for its request; an entry that did not decode is
        # overwritten here.
        with self._cache.transact():
            for key, value in batch:
                self._cache.set(key, value)
        return True

    async def room(self) -> None:
        """Wait until the stores handed to the cache thread are committed (and give the event
        loop a turn): for a producer of many answers at once. A batch's results downloaded
        over a fast link arrive faster than SQLite commits them, and their stores would
        otherwise pile up in memory (benchmarks/README.md, BA1)."""
        if self._flushes:
            await asyncio.wait(list(self._flushes))
        await asyncio.sleep(0)

    async def flush(self) -> None:
        """Commit every buffered store (a failed store is reported, not raised)."""
        self._start_flush()
        if self._flushes:
            await asyncio.gather(*list(self._flushes), return_exceptions=True)

    async def close(self) -> None:
        """Commit what is buffered and close the database (its errors are warned about, not
        raised: by now every response is in the stream)."""
        try:
            await self.flush()
            loop = asyncio.get_running_loop()
            # Checked once more at the end: a deletion after the last batch (or in a run with
            # nothing to store, whose cache's entries are gone all the same) is told too.
            if not self.gone and not await loop.run_in_executor(
                self._executor, self._in_place_sync
            ):
                self._lost(0)
            await loop.run_in_executor(self._executor, self._cache.close)
        except sqlite3.Error as exc:
            print(
                f"cotaudit: warning: closing the cache {self.directory} failed ({exc}); "
                "the run's stream is complete, the cache may lack its last entries.",
                file=sys.stderr,
                flush=True,
            )
        finally:
            self._executor.shutdown(wait=True)
