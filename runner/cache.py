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
"""

from __future__ import annotations

import asyncio
import sqlite3
import sys
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, NamedTuple

import diskcache
import orjson

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
    return UsageError(
        f"the response cache cannot be opened ({why}); it must be readable and writable, with "
        "room to grow",
        where=str(directory),
        fix="Make it writable or free space on its disk (move a damaged one away), point "
        "cache_dir at another directory, or run without a cache (cotaudit run --no-cache: "
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
    ) -> None:
        self._cache = cache
        self._executor = executor
        self._pending: list[tuple[str, bytes]] = []
        self._flush_after_s = flush_after_s
        self._timer: asyncio.TimerHandle | None = None
        self._flushes: set[asyncio.Future[None]] = set()
        self.directory = directory
        self.failed_stores = 0  # responses whose store failed (they are in the stream)

    @classmethod
    async def open(
        cls, directory: Path, *, flush_after_s: float = CACHE_PUT_MAX_AGE_S
    ) -> ResponseCache:
        executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="cotaudit-cache")
        loop = asyncio.get_running_loop()

        def _open() -> diskcache.Cache:
            directory.mkdir(parents=True, exist_ok=True)
            # Entries never expire and are never evicted, so culling has nothing to find: with
            # cull_limit 0 a store skips the query for expired keys that each `set` runs.
            return diskcache.Cache(
                str(directory),
                size_limit=CACHE_SIZE_LIMIT_BYTES,
                eviction_policy="none",
                cull_limit=0,
            )

        try:
            cache = await loop.run_in_executor(executor, _open)
        except (sqlite3.Error, OSError) as exc:
            # Opening writes (diskcache records its settings): a read-only or full cache
            # fails here, as does one that is not a database. Refused like bad input, since
            # the fix is the user's and the caller opens it before it sends or writes.
            executor.shutdown(wait=False)
            raise cannot_open(directory, exc) from exc
        return cls(cache, executor, directory=directory, flush_after_s=flush_after_s)

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
        loop = asyncio.get_running_loop()
        fut = loop.run_in_executor(self._executor, self._put_many_sync, batch)
        self._flushes.add(fut)
        fut.add_done_callback(self._flushes.discard)
        fut.add_done_callback(lambda done: self._check_stored(done, len(batch)))

    def _check_stored(self, done: asyncio.Future[None], size: int) -> None:
        """A failed store (a locked database, a full disk) loses nothing but cache entries:
        their records are in the stream. Say so once and go on, rather than failing the run
        or leaving the error to a garbage-collection log line."""
        if done.cancelled() or done.exception() is None:
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

    def _put_many_sync(self, batch: list[tuple[str, bytes]]) -> None:
        # One transaction for the batch. Keys are content addresses, so whichever answer a
        # key holds is a valid answer for its request; an entry that did not decode is
        # overwritten here.
        with self._cache.transact():
            for key, value in batch:
                self._cache.set(key, value)

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
