"""The writer appends whole lines; a torn last line is dropped and cut away, never parsed."""

from __future__ import annotations

import asyncio
from pathlib import Path

import orjson
import pytest

from cotaudit.errors import UsageError
from cotaudit.schema import read_records
from runner.resume import torn_tail_bytes, truncate_torn_tail
from runner.writer import RecordWriter, StreamMovedError
from tests.stream_records import response_record


def _rec(i: int) -> dict[str, object]:
    """A valid record carrying ``i`` (a problem of a task no reader audits)."""
    return {"kind": "problem", "schema": 1, "task": "toy", "problem_id": f"p{i}", "i": i}


async def test_concurrent_producers_never_interleave(tmp_path: Path) -> None:
    path = tmp_path / "results.jsonl"
    writer = RecordWriter(path)
    writer.start()

    async def produce(worker: int) -> None:
        for i in range(500):
            writer.put(response_record(w=worker, i=i, text="x" * (i % 97)))
            if i % (worker + 2) == 0:
                await asyncio.sleep(0)  # producers interleave across loop turns

    await asyncio.gather(*(produce(w) for w in range(8)))
    await writer.close()
    lines = path.read_bytes().split(b"\n")
    assert lines[-1] == b""
    records = [orjson.loads(line) for line in lines[:-1]]
    assert len(records) == 4000 == writer.written
    for w in range(8):  # each producer's records in its own order
        assert [r["i"] for r in records if r["w"] == w] == list(range(500))


async def test_a_record_reaches_the_file_by_the_end_of_the_loop_turn(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    writer = RecordWriter(path)
    writer.start()
    writer.put(_rec(0))
    writer.put(_rec(1))
    assert path.read_bytes() == b""  # buffered within the turn...
    await asyncio.sleep(0)
    written = path.read_bytes()  # ...written (unbuffered) at its end
    assert [orjson.loads(line)["i"] for line in written.splitlines()] == [0, 1]
    assert written.endswith(b"\n")
    await writer.close()
    with pytest.raises(RuntimeError, match="not open"):
        writer.put(_rec(2))  # never silently dropped after close


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full to fill a disk")
async def test_a_write_error_is_raised_by_the_next_put_and_by_close() -> None:
    writer = RecordWriter(Path("/dev/full"))  # every write fails with ENOSPC
    writer.start()
    writer.put(_rec(0))
    await asyncio.sleep(0)
    with pytest.raises(OSError, match="No space"):
        writer.put(_rec(1))
    with pytest.raises(OSError, match="No space"):
        await writer.close()


async def test_fsync_is_bounded_by_the_interval(tmp_path: Path) -> None:
    now = [0.0]
    writer = RecordWriter(tmp_path / "r.jsonl", fsync_interval_s=10.0, clock=lambda: now[0])
    writer.start()
    for i in range(50):
        writer.put(_rec(i))
        await asyncio.sleep(0)
    await asyncio.sleep(0.01)
    assert writer.fsyncs == 0  # the clock has not moved: no fsync yet
    now[0] = 11.0
    writer.put(_rec(50))
    for _ in range(2000):  # the fsync runs on a thread: wait for it, however loaded the box
        if writer.fsyncs:
            break
        await asyncio.sleep(0.005)
    assert writer.fsyncs == 1
    await writer.close()


async def _until_fsync_done(writer: RecordWriter) -> None:
    """Let the writer's fsync thread finish (however loaded the box), without a clock."""
    for _ in range(2000):
        if writer._fsync is None:
            return
        await asyncio.sleep(0.005)
    raise AssertionError("the fsync thread did not finish")


async def test_a_stream_moved_away_while_written_stops_the_writer_at_its_next_fsync(
    tmp_path: Path,
) -> None:
    # A run directory moved while the run writes: the writer's descriptor follows the file,
    # so the run would go on writing under the other name and report the old one.
    now = [0.0]
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    path = run_dir / "r.jsonl"
    writer = RecordWriter(path, fsync_interval_s=10.0, clock=lambda: now[0])
    writer.start()
    writer.put(_rec(0))
    await asyncio.sleep(0)
    run_dir.rename(tmp_path / "moved")
    now[0] = 11.0
    writer.put(_rec(1))  # its drain starts the fsync, which finds the path gone
    await asyncio.sleep(0)
    await _until_fsync_done(writer)
    with pytest.raises(StreamMovedError, match="Deleted or moved") as raised:
        writer.put(_rec(2))
    assert raised.value.filename == str(path)
    with pytest.raises(StreamMovedError):
        await writer.close()
    moved = tmp_path / "moved" / "r.jsonl"
    assert [r["i"] for r in read_records(moved)] == [0, 1]  # whole lines, nothing after
    assert moved.read_bytes().endswith(b"\n")


@pytest.mark.parametrize("replaced", [False, True], ids=["deleted", "replaced"])
async def test_a_stream_deleted_or_replaced_before_close_is_an_error_at_close(
    tmp_path: Path, replaced: bool
) -> None:
    # No fsync falls within the run (a short one): the close checks all the same. A file
    # made anew at the path (another run into a recreated directory) is not this one.
    path = tmp_path / "r.jsonl"
    writer = RecordWriter(path, fsync_interval_s=1e9, clock=lambda: 0.0)
    writer.start()
    writer.put(_rec(0))
    await asyncio.sleep(0)
    path.unlink()
    if replaced:
        path.write_bytes(b"")
    writer.put(_rec(1))
    with pytest.raises(StreamMovedError, match="Deleted or moved") as raised:
        await writer.close()
    assert raised.value.filename == str(path)
    assert raised.value.errno is not None  # a plain OSError to the command line: exit 1


async def test_a_failing_fsync_is_raised_naming_the_stream_and_what_is_not_known(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After a failed fsync the lines written since the last good one may not be on the disk
    (the kernel may have dropped their pages): the error must not let them pass as intact."""
    import errno
    import os

    real_fsync = os.fsync
    failing = [False]

    def fsync(fd: int) -> None:
        if failing[0]:
            raise OSError(errno.EIO, os.strerror(errno.EIO))
        real_fsync(fd)

    path = tmp_path / "r.jsonl"
    now = [0.0]
    writer = RecordWriter(path, fsync_interval_s=1.0, clock=lambda: now[0])
    writer.start()
    monkeypatch.setattr(os, "fsync", fsync)
    writer.put(_rec(0))
    writer.put(_rec(1))
    now[0] = 2.0
    await asyncio.sleep(0)  # written, and an fsync that succeeds: 2 records on the disk
    await _until_fsync_done(writer)
    assert writer.synced == 2
    failing[0] = True
    writer.put(_rec(2))
    now[0] = 4.0
    await asyncio.sleep(0)  # the next fsync fails
    await _until_fsync_done(writer)
    with pytest.raises(OSError, match="Input/output error") as raised:
        writer.put(_rec(3))
    assert raised.value.filename == str(path)
    note = " ".join(getattr(raised.value, "__notes__", []))
    assert "Flushing the stream to the disk (fsync) failed" in note, note
    assert "Of the 3 records this run wrote to it, the first 2 were on the disk" in note, note
    assert "whether the 1 after them are is not known" in note, note
    assert "intact" not in note
    assert "Check the disk" in note and "rerun the same command" in note
    with pytest.raises(OSError, match="Input/output error") as closed:
        await writer.close()
    assert closed.value is raised.value  # one error, one note
    assert len(closed.value.__notes__) == 1
    assert [r["i"] for r in read_records(path)] == [0, 1, 2]


async def test_a_failing_fsync_at_close_says_no_record_is_known_to_be_on_the_disk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import errno
    import os

    def failing_fsync(fd: int) -> None:
        raise OSError(errno.EIO, os.strerror(errno.EIO))

    path = tmp_path / "r.jsonl"
    writer = RecordWriter(path, fsync_interval_s=1e9, clock=lambda: 0.0)
    writer.start()
    monkeypatch.setattr(os, "fsync", failing_fsync)
    writer.put(_rec(0))
    with pytest.raises(OSError, match="Input/output error") as raised:
        await writer.close()
    assert raised.value.filename == str(path)
    note = " ".join(raised.value.__notes__)
    assert "None of the 1 records this run wrote to it is known to be on the disk" in note


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full to fill a disk")
async def test_a_failing_fsync_after_a_write_error_is_added_to_its_message(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import errno
    import os

    def failing_fsync(fd: int) -> None:
        raise OSError(errno.EIO, os.strerror(errno.EIO))

    writer = RecordWriter(Path("/dev/full"))  # every write fails with ENOSPC
    writer.start()
    monkeypatch.setattr(os, "fsync", failing_fsync)
    writer.put(_rec(0))
    await asyncio.sleep(0)
    with pytest.raises(OSError, match="No space") as raised:
        await writer.close()
    note = " ".join(raised.value.__notes__)
    assert "fsync) then failed too (Input/output error)" in note, note


async def test_appends_to_an_existing_stream(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    path.write_bytes(orjson.dumps(_rec(1)) + b"\n")
    writer = RecordWriter(path)
    writer.start()
    writer.put(_rec(2))
    await writer.close()
    assert [r["i"] for r in read_records(path)] == [1, 2]


async def test_a_malformed_record_is_refused_and_nothing_of_it_is_written(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    writer = RecordWriter(path)
    writer.start()
    writer.put(_rec(1))
    with pytest.raises(UsageError, match=r"request ep/p1/original/-/0: 'text' must be a string"):
        writer.put(response_record(text=17))
    await writer.close()
    assert [r["i"] for r in read_records(path)] == [1]


def test_torn_last_line_is_dropped_and_cut(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    path.write_bytes(b'{"a":1}\n{"a":2}\n{"a":3, "tex')
    assert [r["a"] for r in read_records(path)] == [1, 2]
    assert torn_tail_bytes(path) == len(b'{"a":3, "tex')
    assert truncate_torn_tail(path) == len(b'{"a":3, "tex')
    assert path.read_bytes() == b'{"a":1}\n{"a":2}\n'
    assert truncate_torn_tail(path) == 0


def test_a_torn_line_that_happens_to_parse_is_still_dropped(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    path.write_bytes(b'{"a":1}\n{"a":2}')  # valid JSON, but no newline: not known complete
    assert [r["a"] for r in read_records(path)] == [1]
    assert truncate_torn_tail(path) == len(b'{"a":2}')


def test_file_of_only_a_torn_line(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    path.write_bytes(b'{"a"')
    assert list(read_records(path)) == []
    assert truncate_torn_tail(path) == 4 and path.read_bytes() == b""


def test_corrupt_complete_line_is_reported_with_its_number(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    path.write_bytes(b'{"a":1}\nnot json\n{"a":3}\n')
    with pytest.raises(UsageError, match=r"r\.jsonl:2: line is not valid JSON"):
        list(read_records(path))
