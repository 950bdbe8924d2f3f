"""A response cache directory deleted while a run uses it (a clean-up, a tmp reaper): diskcache
goes on into its unlinked database, so without a check the run would end silently and the
next run would send every request again. The run warns once, naming the directory, stores
nothing more, counts the answers as not cached, and keeps its exit status."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from runner.cache import CachedResponse, ResponseCache
from runner.commands.run import exit_status
from runner.config import with_overrides
from runner.engine import run_sweep
from runner.server.lifecycle import running_server
from runner.transport import Transport, default_transport
from tests.runner.test_disk_moved import DeletesDirectory
from tests.runner.test_engine import make_config, responses

WARNING = "was deleted or replaced while this run used it"


async def test_a_cache_deleted_mid_run_is_told_once_and_the_run_still_succeeds(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    async with running_server() as server:
        config = make_config(tmp_path, server.base_url, prompts=200, samples=1)

        def factory(pool: int) -> Transport:
            return DeletesDirectory(default_transport(pool), config.cache_dir, after=20)

        summary = await run_sweep(config, progress=False, transport_factory=factory)
        err = capsys.readouterr().err
        assert summary.pending == 0 and summary.errors == 0
        assert exit_status(summary) == 0  # the stream holds every answer
        assert err.count(WARNING) == 1, err
        assert f"the response cache {config.cache_dir} {WARNING}" in err
        assert "another run (a new run directory) sends those requests again" in err
        # Every answer of this run is lost to the cache: those stored before the deletion
        # went with its database, the others were not stored.
        assert summary.uncached == len(responses(config)) == 200
        assert not config.cache_dir.exists()  # not recreated behind the user's back

        # A rerun of the same run directory has nothing to send (the stream has it all); a new
        # run directory finds nothing cached, and the cache works again from there.
        fresh = with_overrides(config, run_dir=tmp_path / "again")
        again = await run_sweep(fresh, progress=False)
        assert again.cache_hits == 0 and again.http_requests == 200 and again.uncached == 0
        assert WARNING not in capsys.readouterr().err


async def _stored(cache: ResponseCache, *keys: str) -> None:
    for key in keys:
        cache.put(key, CachedResponse(text=key, finish_reason="stop", usage={}))
    await cache.flush()


async def test_a_deleted_cache_counts_what_was_stored_and_stores_nothing_more(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    directory = tmp_path / "cache"
    cache = await ResponseCache.open(directory)
    await _stored(cache, "a", "b")
    assert cache.stored == 2 and not cache.gone
    shutil.rmtree(directory)
    await _stored(cache, "c")  # found at this batch: nothing of it is stored
    assert cache.gone and cache.failed_stores == 3
    assert not directory.exists()
    await _stored(cache, "d", "e")  # not sent to the cache thread at all
    await cache.close()
    assert cache.failed_stores == 5
    assert capsys.readouterr().err.count(WARNING) == 1


async def test_a_cache_deleted_after_its_last_store_is_told_at_close(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    directory = tmp_path / "cache"
    cache = await ResponseCache.open(directory)
    await _stored(cache, "a")
    shutil.rmtree(directory)
    await cache.close()
    assert cache.gone and cache.failed_stores == 1
    assert f"the response cache {directory} {WARNING}" in capsys.readouterr().err


async def test_a_cache_replaced_by_another_is_told_too(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Deleted, and a new one made at its path (by another run): this run's stores would go
    # to the database it still holds open, which no later run reads.
    directory = tmp_path / "cache"
    cache = await ResponseCache.open(directory)
    await _stored(cache, "a")
    shutil.rmtree(directory)
    other = await ResponseCache.open(directory)
    await other.close()
    await _stored(cache, "b")
    await cache.close()
    assert cache.gone and cache.failed_stores == 2
    assert capsys.readouterr().err.count(WARNING) == 1


async def test_a_cache_left_in_place_is_not_warned_about(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    directory = tmp_path / "cache"
    cache = await ResponseCache.open(directory)
    await _stored(cache, "a", "b")
    await cache.close()
    assert not cache.gone and cache.failed_stores == 0 and cache.stored == 2
    assert WARNING not in capsys.readouterr().err
    again = await ResponseCache.open(directory)
    assert [r.text if r else None for r in await again.get_many(["a", "b"])] == ["a", "b"]
    await again.close()
