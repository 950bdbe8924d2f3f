"""``run_sweep``'s setup and teardown: a cache that cannot be opened, the advice after an
OSError, and removing a run directory the run made and did not use, against a second run."""

from __future__ import annotations

import argparse
import contextlib
import errno
import io
import os
import sqlite3
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from cotaudit import cli
from cotaudit.errors import UsageError
from cotaudit.schema import read_records
from runner.commands.run import report
from runner.config import SweepConfig, config_from_mapping, with_overrides
from runner.engine import NOTHING_TO_RESUME, RunSummary, run_sweep
from runner.run_lock import LOCK_NAME, run_dir_lock
from runner.server.lifecycle import ServerThread, running_server

posix_only = pytest.mark.skipif(sys.platform == "win32", reason="flock is POSIX only")

TOML = """\
run_dir = "run"
cache_dir = "cache"
[task]
kind = "prompts"
path = "prompts.jsonl"
[[endpoints]]
name = "echo"
provider = "local"
model = "echo"
base_url = "{base_url}"
requests_per_minute = 1e7
tokens_per_minute = 1e9
max_concurrency = 4
"""


def write_prompts(tmp_path: Path, n: int) -> None:
    with (tmp_path / "prompts.jsonl").open("wb") as f:
        for i in range(n):
            f.write(orjson.dumps({"id": f"q{i}", "prompt": f"Say {i}."}) + b"\n")


def make_config(tmp_path: Path, base_url: str, *, prompts: int = 6) -> SweepConfig:
    write_prompts(tmp_path, prompts)
    return config_from_mapping(
        {
            "run_dir": "run",
            "cache_dir": "cache",
            "task": {"kind": "prompts", "path": "prompts.jsonl"},
            "endpoints": [
                {
                    "name": "echo",
                    "provider": "local",
                    "model": "echo",
                    "base_url": base_url,
                    "requests_per_minute": 1e7,
                    "tokens_per_minute": 1e9,
                    "max_concurrency": 4,
                }
            ],
        },
        config_dir=tmp_path,
    )


def damage(cache_dir: Path) -> bytes:
    """Make the cache unopenable (a database SQLite refuses), as a read-only or full one is."""
    for path in cache_dir.iterdir():
        path.unlink()
    garbage = b"not a database\n" * 100
    (cache_dir / "cache.db").write_bytes(garbage)
    return garbage


@pytest.mark.parametrize("progress", [False, True], ids=["quiet", "counted"])
async def test_a_cache_that_cannot_be_opened_refuses_only_a_run_with_requests_left(
    tmp_path: Path, progress: bool
) -> None:
    """A finished run rerun reads and stores nothing, so an unopenable cache does not stop it;
    a run with requests left is refused before it sends or writes anything, naming the cache
    and the ways out (exit 2). ``quiet`` decides without the planning pass's counts."""
    out = io.StringIO()
    async with running_server() as server:
        config = make_config(tmp_path, server.base_url)
        await run_sweep(config, progress=False)
        stream = config.run_dir / "results.jsonl"
        before = stream.read_bytes()
        garbage = damage(config.cache_dir)

        again = await run_sweep(config, progress=progress, progress_stream=out)
        assert (again.planned, again.skipped, again.written) == (6, 6, 0)
        assert stream.read_bytes() == before
        assert (config.cache_dir / "cache.db").read_bytes() == garbage  # never opened

        sent = server.stats()["requests_total"]
        fresh = with_overrides(config, run_dir=tmp_path / "fresh")
        with pytest.raises(UsageError) as refused:
            await run_sweep(fresh, progress=progress, progress_stream=out, preflight=progress)
        lines = before.splitlines(keepends=True)
        stopped = b"".join(lines[: len(lines) // 2])  # as a run stopped half-way left it
        stream.write_bytes(stopped)
        with pytest.raises(UsageError, match="cannot be opened"):
            await run_sweep(config, progress=progress, progress_stream=out, preflight=progress)
        assert server.stats()["requests_total"] == sent  # not even a preflight
    message = str(refused.value)
    assert message.startswith(f"{config.cache_dir}: the response cache cannot be opened (")
    assert "file is not a database" in message and "--no-cache" in message
    assert "Nothing was sent or written." in message
    assert not (tmp_path / "fresh").exists()
    assert stream.read_bytes() == stopped


async def test_a_read_only_cache_is_refused_naming_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What SQLite and the file system say of a read-only cache (root writes anyway, so the
    errors are raised where diskcache would meet them) becomes the same refusal."""
    import diskcache

    from runner.cache import ResponseCache

    readonly = "attempt to write a readonly database"
    denied = "Permission denied"
    for cause, said in [
        (sqlite3.OperationalError(readonly), readonly),
        (PermissionError(errno.EACCES, denied, str(tmp_path)), denied),
    ]:

        def refuse(*args: Any, cause: Exception = cause, **kwargs: Any) -> Any:
            raise cause

        monkeypatch.setattr(diskcache, "Cache", refuse)
        with pytest.raises(UsageError, match=f"cannot be opened \\({said}\\)") as refused:
            await ResponseCache.open(tmp_path / "c")
        assert refused.value.where == str(tmp_path / "c")
        assert refused.value.fix is not None and "Make it writable" in refused.value.fix


def test_answers_the_cache_could_not_store_are_said_again_at_the_end() -> None:
    args = argparse.Namespace(
        config="sweep.toml", model=None, run_dir=None, limit=None, max_concurrency=None,
        shard=None, no_cache=False, no_preflight=False, quiet=True,
    )  # fmt: skip
    summary = RunSummary(
        run_dir=Path("run"), planned=5, written=5, skipped=0, cache_hits=0, http_requests=5,
        retries=0, errors=0, elapsed_s=1.0, uncached=3,
    )  # fmt: skip
    lines = report(summary, args)
    assert any("3 answers could not be stored in the response cache" in li for li in lines)
    assert any("they are in the stream" in li for li in lines)


@pytest.fixture
def full_disk(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """The stream's disk fills once ``limit[0]`` records are written."""
    from runner.writer import RecordWriter

    real_write = RecordWriter._write_buffered
    limit = [0]

    def write(self: RecordWriter) -> None:
        if self.written >= limit[0]:
            raise OSError(errno.ENOSPC, "No space left on device")
        real_write(self)

    monkeypatch.setattr(RecordWriter, "_write_buffered", write)
    yield limit


def test_a_full_disk_advises_resuming_only_a_run_that_has_results(
    tmp_path: Path,
    local_server: ServerThread,
    full_disk: list[int],
    capsys: pytest.CaptureFixture[str],
) -> None:
    write_prompts(tmp_path, 10)
    config = tmp_path / "sweep.toml"
    config.write_text(TOML.format(base_url=local_server.base_url))
    stream = tmp_path / "run" / "results.jsonl"

    assert cli.main(["run", str(config), "--no-progress"]) == 1  # nothing could be written
    err = capsys.readouterr().err
    assert f"No space left on device: {stream}. {NOTHING_TO_RESUME}\n" in err, err
    assert "resumes where it stopped" not in err
    assert not list(read_records(stream))

    full_disk[0] = 5  # now the disk fills after a few records
    assert cli.main(["run", str(config), "--no-progress"]) == 1
    err = capsys.readouterr().err
    assert "Lines already written are intact" in err and "resumes where it stopped" in err, err
    assert NOTHING_TO_RESUME not in err
    assert len(list(read_records(stream))) >= 5


@posix_only
async def test_a_run_refused_by_the_lock_leaves_the_holders_directory_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two runs start into a new run directory at once: both see it missing, the other one
    takes the lock first and this one is refused. It must leave the other's directory and
    lock file alone (it once removed both, on its way out, as a directory it had made)."""
    from runner import run_lock

    config = make_config(tmp_path, "http://127.0.0.1:9/v1")
    assert not config.run_dir.exists()
    with contextlib.ExitStack() as other:

        def lock_taken_first(run_dir: Path) -> contextlib.AbstractContextManager[None]:
            other.enter_context(run_dir_lock(run_dir))
            return run_dir_lock(run_dir)

        # The lock the run takes as it makes its directory (run_lock.locked_run_dir).
        monkeypatch.setattr(run_lock, "run_dir_lock", lock_taken_first)
        with pytest.raises(UsageError, match="another cotaudit run is using"):
            await run_sweep(config, progress=False)
        lock = config.run_dir / LOCK_NAME
        assert lock.read_text() == f"{os.getpid()}\n"  # the other run's, still in place


@posix_only
def test_a_lock_file_removed_between_open_and_lock_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The holder removed its unused directory's lock file between this run's open and its
    lock, and a third run made a fresh one: what this run locked guards nothing, so it is
    refused rather than running beside the third."""
    import fcntl

    real_flock = fcntl.flock
    lock = tmp_path / LOCK_NAME

    def holder_left_meanwhile(fd: int, operation: int) -> None:
        lock.unlink()
        lock.write_text("4242\n")  # the third run's file
        real_flock(fd, operation)

    monkeypatch.setattr(fcntl, "flock", holder_left_meanwhile)
    refusal = pytest.raises(UsageError, match="left this run directory")
    with refusal as refused, run_dir_lock(tmp_path):
        pass
    assert refused.value.fix == "Rerun the same command."
    assert lock.read_text() == "4242\n"  # the third run's file is left as it was
