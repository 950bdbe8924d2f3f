"""Cache keys are stable and cover exactly the output-affecting inputs; the store round-trips."""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from runner.cache import CachedResponse, ResponseCache
from runner.config import EndpointConfig
from runner.request_spec import EndpointIdentity, cache_key_for, make_spec, request_id_for

MSGS = [{"role": "user", "content": "Is Alex a bimpus?"}]


def _key(ep: EndpointConfig, *, temperature: float = 0.0, sample: int = 0) -> str:
    spec = make_spec(
        ep.identity(),
        task="t",
        problem_id="p",
        condition="original",
        messages=MSGS,
        temperature=temperature,
        sample_index=sample,
    )
    return spec.cache_key


BASE = EndpointConfig("a", "openai", "m", base_url="https://x.test/v1", api_key_env="K")


def test_key_is_stable_across_processes() -> None:
    code = (
        "from runner.config import EndpointConfig\n"
        "from runner.request_spec import make_spec\n"
        "ep = EndpointConfig('a', 'openai', 'm', base_url='https://x.test/v1', api_key_env='K')\n"
        "s = make_spec(ep.identity(), task='t', problem_id='p', condition='original',\n"
        "    messages=[{'role': 'user', 'content': 'Is Alex a bimpus?'}], temperature=0.0)\n"
        "print(s.cache_key)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert out == _key(BASE)
    assert len(out) == 64


def test_operational_settings_do_not_change_the_key() -> None:
    ops = EndpointConfig(
        "renamed",
        "openai",
        "m",
        base_url="https://x.test/v1",
        api_key_env="OTHER_KEY",
        requests_per_minute=1,
        tokens_per_minute=5,
        max_concurrency=1,
        timeout_s=1,
        price_input_per_mtok=3.0,
        headers=(("X-Trace", "1"),),
    )
    assert _key(ops) == _key(BASE)


def test_output_affecting_inputs_change_the_key() -> None:
    base = _key(BASE)
    variants = [
        _key(BASE, temperature=0.7),
        _key(BASE, sample=1),
        _key(EndpointConfig("a", "openai", "m2", base_url="https://x.test/v1", api_key_env="K")),
        _key(EndpointConfig("a", "openai", "m", base_url="https://y.test/v1", api_key_env="K")),
        _key(EndpointConfig("a", "anthropic", "m", base_url="https://x.test/v1", api_key_env="K")),
        _key(EndpointConfig("a", "openai", "m", base_url="https://x.test/v1", max_tokens=7)),
        _key(EndpointConfig("a", "openai", "m", base_url="https://x.test/v1", seed=1)),
        _key(EndpointConfig("a", "openai", "m", base_url="https://x.test/v1", stop=("x",))),
        _key(EndpointConfig("a", "openai", "m", base_url="https://x.test/v1", top_p=0.5)),
    ]
    assert len({base, *variants}) == len(variants) + 1


async def _open(directory: Path) -> ResponseCache:
    return await ResponseCache.open(directory)


async def test_store_round_trips_in_batches(tmp_path: Path) -> None:
    cache = await _open(tmp_path / "c")
    for i in range(300):  # more than one write batch
        cache.put(f"k{i}", CachedResponse(f"text {i}", "stop", {"input_tokens": i}))
    await cache.flush()
    got = await cache.get_many(["k0", "k299", "missing"])
    assert got[0] == CachedResponse("text 0", "stop", {"input_tokens": 0})
    assert got[1] is not None and got[1].text == "text 299"
    assert got[2] is None
    await cache.close()
    reopened = await ResponseCache.open(tmp_path / "c")
    assert (await reopened.get("k42")) == CachedResponse("text 42", "stop", {"input_tokens": 42})
    await reopened.close()


async def test_a_store_is_committed_soon_without_a_full_batch_or_a_close(tmp_path: Path) -> None:
    # At a provider's pace a batch takes long to fill: a store is committed within
    # flush_after_s anyway, so another process (here another connection) sees it, and a crash
    # of this run would not lose it from the cache.
    import asyncio

    import diskcache

    cache = await ResponseCache.open(tmp_path / "c", flush_after_s=0.01)
    cache.put("slow", CachedResponse("late answer", "stop", {}))
    with diskcache.Cache(str(tmp_path / "c")) as other:
        for _ in range(500):  # polled, not timed: up to 5 s on a loaded machine
            if other.get("slow") is not None:
                break
            await asyncio.sleep(0.01)
        assert other.get("slow") is not None
    await cache.close()


async def test_lookups_keep_the_callers_order_with_repeats_and_misses(tmp_path: Path) -> None:
    # Two planned requests can share a cache key (the same prompt in two problems): each
    # position gets its answer, whatever order the statement returns rows in.
    cache = await _open(tmp_path / "c")
    for key in ("a", "b", "c"):
        cache.put(key, CachedResponse(f"text {key}", "stop", {}))
    await cache.flush()
    got = await cache.get_many(["c", "x", "a", "c", "b", "a", "y"])
    assert [r.text if r is not None else None for r in got] == [
        "text c",
        None,
        "text a",
        "text c",
        "text b",
        "text a",
        None,
    ]
    await cache.close()


async def test_undecodable_entry_is_a_miss(tmp_path: Path) -> None:
    import diskcache

    with diskcache.Cache(str(tmp_path / "c")) as raw:
        raw.set("bad", b"not json")
    cache = await ResponseCache.open(tmp_path / "c")
    assert await cache.get("bad") is None
    await cache.close()


async def test_stored_bytes_are_exactly_the_response(tmp_path: Path) -> None:
    import diskcache

    texts = [
        'quotes " and \\ backslashes \\" and \\u0041 written out',
        "control \x00 \x01 \t\n\r characters",
        "unicode: Ωμέγα, 漢字, emoji \U0001f9e0, combining e\u0301",
        "",
    ]
    cache = await _open(tmp_path / "c")
    responses = {
        f"k{i}": CachedResponse(t, "stop", {"output_tokens": i}) for i, t in enumerate(texts)
    }
    for key, response in responses.items():
        cache.put(key, response)
    await cache.flush()
    assert await cache.get_many(list(responses)) == list(responses.values())
    await cache.close()
    with diskcache.Cache(str(tmp_path / "c")) as raw:
        assert raw.check() == []
        for key, response in responses.items():
            assert raw[key] == response.to_bytes()  # byte for byte, through diskcache's reader


async def test_batched_store_keeps_diskcache_consistent(tmp_path: Path) -> None:
    import diskcache

    cache = await _open(tmp_path / "c")
    big = "x" * 40_000  # above diskcache's inline limit: stored as a file
    cache.put("small", CachedResponse("a", "stop", {}))
    cache.put("big", CachedResponse(big, "length", {"output_tokens": 10_000}))
    cache.put("small", CachedResponse("a", "stop", {}))  # same key again: no error
    await cache.flush()
    small, large, missing = await cache.get_many(["small", "big", "nope"])
    assert small == CachedResponse("a", "stop", {}) and missing is None
    assert large is not None and large.text == big and large.finish_reason == "length"
    await cache.close()
    with diskcache.Cache(str(tmp_path / "c")) as raw:
        assert raw.check() == []  # diskcache's own consistency check: counts, sizes, files
        assert len(raw) == 2
        # Research results are kept: nothing evicted, nothing culled (the settings persist).
        assert raw.eviction_policy == "none" and raw.cull_limit == 0
        assert CachedResponse.from_bytes(raw["small"]) == CachedResponse("a", "stop", {})
        got = CachedResponse.from_bytes(raw["big"])
        assert got is not None and got.text == big


@pytest.mark.parametrize(
    ("params", "target", "sample"),
    [
        ({}, None, 0),
        ({"max_tokens": 64, "seed": 7, "stop": ["END"], "top_p": 0.9}, "P3", 4),
    ],
)
def test_make_spec_keys_equal_the_reference_functions(
    params: dict[str, Any], target: str | None, sample: int
) -> None:
    endpoint = EndpointIdentity("ep", "local", "faithful", "127.0.0.1:1", "local", params)
    messages = [{"role": "system", "content": "S"}, {"role": "user", "content": "Q é?"}]
    spec = make_spec(
        endpoint,
        task="t",
        problem_id="p1",
        condition="sample",
        messages=messages,
        temperature=0.7,
        target_premise=target,
        sample_index=sample,
    )
    assert spec.request_id == request_id_for("ep", "p1", "sample", target, sample)
    assert spec.cache_key == cache_key_for(endpoint, messages, spec.params, sample)
    other = make_spec(
        endpoint,
        task="t",
        problem_id="p1",
        condition="sample",
        messages=messages,
        temperature=0.7,
        target_premise=target,
        sample_index=sample + 1,
    )
    assert other.cache_key != spec.cache_key  # the replicate index is part of the key


async def test_an_unreadable_cache_is_a_cache_error_naming_the_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import sqlite3

    from cotaudit.errors import CacheError, UsageError

    # One that cannot be opened is refused as bad input (the engine opens it before it sends
    # or writes anything).
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "cache.db").write_bytes(b"not a database, just bytes\n" * 100)
    with pytest.raises(UsageError, match=r"bad: the response cache cannot be opened \(file is"):
        await ResponseCache.open(tmp_path / "bad")

    # A lookup that fails (a database locked past its timeout) raises rather than reading as
    # a miss: a miss would send, and pay for, a request that may be cached.
    cache = await ResponseCache.open(tmp_path / "good")

    def locked(self: ResponseCache, keys: list[str]) -> Any:
        raise sqlite3.OperationalError("database is locked")

    monkeypatch.setattr(ResponseCache, "_get_many_sync", locked)
    with pytest.raises(CacheError, match=r"good cannot be used \(database is locked\)"):
        await cache.get_many(["k"])
    await cache.close()


async def test_a_failing_close_warns_and_still_stops_the_cache_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import sqlite3

    import diskcache

    cache = await ResponseCache.open(tmp_path / "c")
    real_close = diskcache.Cache.close

    def failing_close(self: diskcache.Cache) -> None:
        real_close(self)  # the connection is closed all the same; only the error is simulated
        raise sqlite3.OperationalError("disk I/O error")

    monkeypatch.setattr(diskcache.Cache, "close", failing_close)
    await cache.close()  # does not raise: the stream, not the cache, holds the results
    assert "closing the cache" in capsys.readouterr().err
    # The cache thread was stopped all the same.
    assert not [t for t in threading.enumerate() if t.name.startswith("cotaudit-cache")]


async def test_room_waits_while_the_cache_thread_is_behind_with_its_stores(tmp_path: Path) -> None:
    # A batch's results arrive faster than SQLite commits them: a producer that awaits room()
    # holds the stores of the answers since, not of every answer.
    import asyncio

    import diskcache

    from runner.cache import CACHE_PUT_BATCH

    cache = await _open(tmp_path / "c")
    batches = 3
    with diskcache.Cache(str(tmp_path / "c")) as other:
        with other.transact():  # another process holds the write lock: no commit can go
            for i in range(batches * CACHE_PUT_BATCH):
                cache.put(f"k{i}", CachedResponse(f"text {i}", "stop", {}))
            waiting = asyncio.ensure_future(cache.room())
            for _ in range(20):
                await asyncio.sleep(0)
            assert not waiting.done() and cache.stored == 0
        await waiting  # the lock released: it returns once the batches are committed
        assert cache.stored == batches * CACHE_PUT_BATCH
    await cache.close()
