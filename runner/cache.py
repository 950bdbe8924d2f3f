"""The content-addressed response cache: ``spec.cache_key`` -> a successful response.

Backed by ``diskcache`` (SQLite + files), shared by runs, safe for several processes. All
disk access runs on one dedicated thread, off the event loop, and is batched: the engine
looks up a whole chunk of the plan in one hop, and stores are buffered and committed in one
transaction per batch (one SQLite commit per response would cap a cold run at the disk's
commit rate). Only successful responses are stored. Values are orjson bytes of
``{"text", "finish_reason", "usage"}``: never request headers, never keys.
"""

from __future__ import annotations

import asyncio
import sqlite3
import sys
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, NamedTuple

import diskcache
import orjson
from diskcache.core import MODE_RAW

from cotaudit.errors import CacheError
from cotaudit.schema import JSONDict

# Responses per write transaction. SQLite's per-transaction work is paid once per batch:
# measured per store, 256 -> ~17 us, 1024 -> ~13 us, 2048 -> ~12.5 us of CPU; but the last
# partial batch is committed at close, so larger batches lengthen the end of a run (2048 added
# ~50 ms to a 6 s run). Buffered stores lost to a crash cost nothing but a cache miss: their
# records are already in the stream.
CACHE_PUT_BATCH = 1024
CACHE_SIZE_LIMIT_BYTES = 2**40  # no eviction in practice: entries are research results
_FILE = object()  # marker: the value lives in a file; read it through diskcache
_COLUMNS = (
    "Cache(key, raw, store_time, expire_time, access_time, access_count, tag, size, mode,"
    " filename, value)"
)
_INSERT_ROW = f"INSERT OR IGNORE INTO {_COLUMNS} VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
# The whole batch as one JSON array of [key, value text] bound to one parameter: SQLite walks
# it with json_each inside a single statement step. executemany() instead takes and drops the
# GIL around every row, and on a busy client each of those hand-offs makes the event loop
# wait for this thread (measured: the loop lost ~13% of its time to a store batch with
# executemany, none with this). The values are orjson text, so CAST(... AS BLOB) gives back
# exactly the bytes that were stored; mode 1 is diskcache's MODE_RAW.
_INSERT_JSON = (
    f"INSERT OR IGNORE INTO {_COLUMNS} SELECT json_extract(j.value, '$[0]'), 1, ?1, NULL, ?1,"
    f" 0, NULL, 0, {MODE_RAW}, NULL, CAST(json_extract(j.value, '$[1]') AS BLOB)"
    " FROM json_each(?2) AS j"
)
# Lookups walk the chunk's keys (json_each) and seek each in diskcache's (key, raw) index.
# CROSS JOIN fixes that order; `key IN (SELECT value FROM json_each(?1))` instead had SQLite
# build a temporary index of the list first: 2.2 against 1.6 us of CPU per key (measured on
# 10,000 keys, 512 per statement). A key listed twice yields its row twice; the caller's dict
# keeps one.
_SELECT_JSON = (
    "SELECT c.key, c.mode, c.value FROM json_each(?1) AS j CROSS JOIN Cache AS c"
    " ON c.key = j.value AND c.raw = 1 WHERE (c.expire_time IS NULL OR c.expire_time > ?2)"
)


def _has_json1(con: sqlite3.Connection) -> bool:
    """SQLite's JSON functions are built in since 3.38 and compiled in by most older builds;
    without them the cache falls back to binding every row and key."""
    try:
        con.execute("SELECT json_extract('[1]', '$[0]'), count(*) FROM json_each('[1]')")
    except sqlite3.OperationalError:
        return False
    return True


class CachedResponse(NamedTuple):
    """A cached answer. A named tuple: one is decoded per cache hit, and a frozen
    dataclass's field-by-field ``__init__`` cost more than the decoding."""

    text: str
    finish_reason: str | None
    usage: JSONDict

    def to_bytes(self) -> bytes:
        return orjson.dumps(
            {"text": self.text, "finish_reason": self.finish_reason, "usage": self.usage}
        )

    @classmethod
    def from_bytes(cls, data: bytes) -> CachedResponse | None:
        """None for an entry that does not decode (treated as a miss, then overwritten)."""
        try:
            value = orjson.loads(data)
            return cls(str(value["text"]), value.get("finish_reason"), dict(value["usage"]))
        except (orjson.JSONDecodeError, KeyError, TypeError, ValueError):
            return None


class ResponseCache:
    """Async front of a diskcache directory; create with :meth:`open`, end with :meth:`close`."""

    def __init__(
        self,
        cache: diskcache.Cache,
        executor: ThreadPoolExecutor,
        *,
        json1: bool = True,
        directory: Path | None = None,
    ) -> None:
        self._cache = cache
        self._executor = executor
        self._json1 = json1
        self._pending: list[tuple[str, bytes]] = []
        self._flushes: set[asyncio.Future[None]] = set()
        self.directory = directory
        self.failed_stores = 0  # responses whose store failed (they are in the stream)

    @classmethod
    async def open(cls, directory: Path) -> ResponseCache:
        executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="cotaudit-cache")
        loop = asyncio.get_running_loop()

        def _open() -> tuple[diskcache.Cache, bool]:
            directory.mkdir(parents=True, exist_ok=True)
            cache = diskcache.Cache(
                str(directory), size_limit=CACHE_SIZE_LIMIT_BYTES, eviction_policy="none"
            )
            return cache, _has_json1(cache._con)  # diskcache's connections are per thread

        try:
            cache, json1 = await loop.run_in_executor(executor, _open)
        except sqlite3.Error as exc:
            executor.shutdown(wait=False)
            raise CacheError(directory, exc) from exc
        return cls(cache, executor, json1=json1, directory=directory)

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
        # One SELECT for the whole chunk (the symmetric reason to _put_many_sync: a
        # Python-level get() per key holds the GIL against the event loop). Inline raw
        # values are taken as they are; anything else (a value diskcache keeps in a file)
        # goes through the public get(). Statistics and access times are not updated: the
        # cache never evicts, so nothing reads them.
        found: dict[str, Any] = {}
        if self._json1:
            rows = self._cache._sql(_SELECT_JSON, (orjson.dumps(keys), time.time())).fetchall()
        else:
            rows = self._cache._sql(
                f"SELECT key, mode, value FROM Cache WHERE raw = 1 AND key IN "
                f"({','.join('?' * len(keys))}) AND (expire_time IS NULL OR expire_time > ?)",
                (*keys, time.time()),
            ).fetchall()
        for key, mode, value in rows:
            found[key] = bytes(value) if mode == MODE_RAW and value is not None else _FILE
        get = self._cache.get
        return [get(k) if found.get(k) is _FILE else found.get(k) for k in keys]

    def put(self, key: str, response: CachedResponse) -> None:
        """Buffer a store; committed in batches (call :meth:`flush` or :meth:`close`)."""
        self._pending.append((key, response.to_bytes()))
        if len(self._pending) >= CACHE_PUT_BATCH:
            self._start_flush()

    def _start_flush(self) -> None:
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
                f"{self.directory or ''} ({done.exception()}); they are in the stream, but "
                "another run will send them again.",
                file=sys.stderr,
                flush=True,
            )

    def _put_many_sync(self, batch: list[tuple[str, bytes]]) -> None:
        # Small entries (all of them, in practice) go in with one statement for the batch:
        # diskcache's per-entry set() runs several statements of Python-level work, which on
        # a busy client costs more CPU than the HTTP request and holds the GIL against the
        # event loop. The row is exactly what Cache.set writes for a str key and a small
        # bytes value (raw key, MODE_RAW inline value, no expiry/tag; diskcache's own
        # triggers keep its count and size). Content-addressed keys make first-writer-wins
        # correct.
        limit = self._cache.disk_min_file_size
        now = time.time()
        small = [(k, v) for k, v in batch if len(v) < limit]
        with self._cache.transact():
            if self._json1:
                payload = orjson.dumps([(k, v.decode("utf-8")) for k, v in small])
                self._cache._con.execute(_INSERT_JSON, (now, payload))
            else:
                self._cache._con.executemany(
                    _INSERT_ROW,
                    [
                        (k, True, now, None, now, 0, None, 0, MODE_RAW, None, sqlite3.Binary(v))
                        for k, v in small
                    ],
                )
            for key, value in batch:
                if len(value) >= limit:  # large values: diskcache stores them as files
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
                f"cotaudit: warning: closing the cache {self.directory or ''} failed ({exc}); "
                "the run's stream is complete, the cache may lack its last entries.",
                file=sys.stderr,
                flush=True,
            )
        finally:
            self._executor.shutdown(wait=True)
