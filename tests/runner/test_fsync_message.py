"""A failed fsync of the stream, as the command line tells it: the lines written since the
last good fsync are not known to be on the disk, so the message must not call them intact."""

from __future__ import annotations

import errno
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from cotaudit import cli
from cotaudit.schema import read_records
from runner.server.lifecycle import ServerThread
from tests.runner.test_run_setup import TOML, write_prompts


@pytest.fixture
def failing_stream_fsync(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Every fsync of ``run/results.jsonl`` fails with EIO (a failing disk); other files'
    fsyncs (the manifest's) succeed."""
    stream = tmp_path / "run" / "results.jsonl"
    real_fsync = os.fsync

    def fsync(fd: int) -> None:
        held = os.fstat(fd)
        try:
            there = os.stat(stream)
        except FileNotFoundError:
            there = None
        if there is not None and (held.st_dev, held.st_ino) == (there.st_dev, there.st_ino):
            raise OSError(errno.EIO, os.strerror(errno.EIO))
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    yield stream


def test_a_failed_fsync_says_what_is_not_known_and_what_to_do(
    tmp_path: Path,
    local_server: ServerThread,
    failing_stream_fsync: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    write_prompts(tmp_path, 10)
    config = tmp_path / "sweep.toml"
    config.write_text(TOML.format(base_url=local_server.base_url))
    stream = failing_stream_fsync

    assert cli.main(["run", str(config), "--no-progress"]) == 1
    err = capsys.readouterr().err
    written = len(list(read_records(stream)))
    assert written > 10  # problem records and responses
    assert f"cotaudit run: error: Input/output error: {stream}. " in err, err
    assert "Flushing the stream to the disk (fsync) failed." in err, err
    assert f"None of the {written} records this run wrote to it is known to be on the disk" in err
    assert "intact" not in err, err
    assert "Check the disk" in err and "rerun the same command" in err
    assert "Traceback" not in err
