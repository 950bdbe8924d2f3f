"""``cotaudit merge OUT ...`` holds OUT's run lock (``runner.run_lock``) as ``cotaudit run``
does: a merge into a directory that a run (or another merge) is writing is refused, exit 2,
naming the directory and the holder's pid, and writes nothing there; a merge leaves its own
pid in ``OUT/.lock`` and the lock free. It holds every shard's lock from before it checks the
shards' streams to the end of its copy: a shard still being written is refused, naming it and
its holder, OUT untouched; a run into a shard is refused while the merge copies; a shard is left
as it was but for its lock file's pid (one it had to make is removed; one that cannot be made,
in a read-only directory, is done without). Real shard runs through the embedded local model,
real processes holding the locks."""

from __future__ import annotations

import contextlib
import fcntl
import os
import select
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from cotaudit.cli import main
from cotaudit.errors import UsageError
from runner.run_lock import LOCK_NAME, run_dir_lock
from runner.shard_merge import merge_shards

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="flock is POSIX only")

REPO = Path(__file__).resolve().parents[2]
CONFIG = """\
run_dir = "whole"
cache_dir = "cache"
[task]
kind = "prontoqa"
source = "generate"
n = 2
seed = 3
[[endpoints]]
name = "faithful"
provider = "local"
model = "faithful"
requests_per_minute = 600000
tokens_per_minute = 1e10
"""
SHARDS = 2


@pytest.fixture(scope="module")
def shards(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    root = tmp_path_factory.mktemp("h5_shards")
    config = root / "audit.toml"
    config.write_text(CONFIG)
    dirs = [root / f"s{i}" for i in range(SHARDS)]
    for i, d in enumerate(dirs):
        args = ["run", str(config), "--run-dir", str(d), "--quiet", "--shard", f"{i}/{SHARDS}"]
        assert main(args) == 0
    return dirs


ENV = {**os.environ, "PYTHONPATH": str(REPO)}


@contextlib.contextmanager
def holding(run_dir: Path) -> Iterator[int]:
    """``run_dir``'s lock held by another process (a run, as far as a merge can tell) that
    waits on its stdin (no sleeping) until killed; its pid."""
    code = (
        "import sys; from pathlib import Path; from runner.run_lock import run_dir_lock\n"
        "with run_dir_lock(Path(sys.argv[1])):\n"
        "    print('locked', flush=True); sys.stdin.read()\n"
    )
    with subprocess.Popen(
        [sys.executable, "-c", code, str(run_dir)],
        cwd=REPO,
        env=ENV,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    ) as process:
        try:
            assert process.stdout is not None and process.stdout.readline() == "locked\n"
            yield process.pid
        finally:
            process.send_signal(signal.SIGKILL)
            process.wait()


@pytest.fixture
def holder(tmp_path: Path) -> Iterator[tuple[Path, int]]:
    """``tmp_path/out``, its lock held by another process (:func:`holding`)."""
    out = tmp_path / "out"
    out.mkdir()
    with holding(out) as pid:
        yield out, pid


@pytest.fixture
def copies(shards: list[Path], tmp_path: Path) -> list[Path]:
    """The shards' run directories copied, each with the lock file its run left."""
    dirs = [tmp_path / "shards" / d.name for d in shards]
    for d, copy in zip(shards, dirs, strict=True):
        shutil.copytree(d, copy)
    assert all((d / LOCK_NAME).is_file() for d in dirs)
    return dirs


def contents(run_dir: Path) -> dict[str, bytes]:
    """Every file of ``run_dir`` by name, its lock file's pid left out."""
    return {p.name: b"" if p.name == LOCK_NAME else p.read_bytes() for p in run_dir.iterdir()}


@contextlib.contextmanager
def read_only(path: Path) -> Iterator[None]:
    """``path`` (a directory or a file) read-only to this process: by its mode, or for root,
    whom modes do not stop, by the immutable attribute; the test skipped where neither can."""
    if os.geteuid() != 0:
        mode = path.stat().st_mode
        path.chmod(0o555 if path.is_dir() else 0o444)
        try:
            yield
        finally:
            path.chmod(mode)
        return
    chattr = shutil.which("chattr")
    if chattr is None or subprocess.run([chattr, "+i", str(path)], capture_output=True).returncode:
        pytest.skip("running as root where no immutable attribute makes a path read-only")
    try:
        yield
    finally:
        subprocess.run([chattr, "-i", str(path)], check=True)


def test_a_merge_into_a_directory_being_written_is_refused_naming_it_and_its_holder(
    shards: list[Path], holder: tuple[Path, int], capsys: pytest.CaptureFixture[str]
) -> None:
    out, pid = holder
    # The merge used to write OUT's stream and manifest in among the holder's.
    with pytest.raises(UsageError) as caught:
        merge_shards(out, shards)
    assert caught.value.where == str(out)
    assert f"another cotaudit run is using this run directory (pid {pid})" in caught.value.what
    assert caught.value.fix is not None and "Merge into a new directory" in caught.value.fix
    capsys.readouterr()
    assert main(["merge", str(out), *map(str, shards)]) == 2
    err = capsys.readouterr().err
    assert f"{out}: another cotaudit run is using this run directory (pid {pid})" in err
    assert [p.name for p in out.iterdir()] == [LOCK_NAME]
    assert (out / LOCK_NAME).read_text() == f"{pid}\n"  # the holder's, untouched


def test_a_merge_takes_the_lock_and_lets_it_go(shards: list[Path], tmp_path: Path) -> None:
    out = tmp_path / "merged"
    merge_shards(out, shards)
    # The lock file names this merge, the last holder: a run refused while it wrote named it.
    assert (out / LOCK_NAME).read_text() == f"{os.getpid()}\n"
    assert (out / "results.jsonl").read_bytes() == b"".join(
        (d / "results.jsonl").read_bytes() for d in shards
    )
    with run_dir_lock(out):  # released: a run resumes the merged directory
        pass


def test_a_merge_of_a_shard_still_being_written_is_refused_naming_it_and_its_holder(
    copies: list[Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    (copies[0] / LOCK_NAME).unlink()  # the one the merge makes there it removes when refused
    before = [contents(d) for d in copies]
    with holding(copies[1]) as pid:
        # The merge used to go on: the merged run lacked what the shard wrote after it, and
        # lines the shard added between the check and the copy were copied unchecked.
        with pytest.raises(UsageError) as caught:
            merge_shards(out, copies)
        assert caught.value.where == str(copies[1])
        assert caught.value.what.startswith("shard 1/2 is being written: ")
        assert f"(pid {pid})" in caught.value.what
        assert caught.value.fix is not None
        assert "Wait for that run to finish, or stop it" in caught.value.fix
        assert "rerun the merge" in caught.value.fix
        assert not out.exists()
        out.mkdir()
        capsys.readouterr()
        assert main(["merge", str(out), *map(str, copies)]) == 2
        err = capsys.readouterr().err
        assert f"{copies[1]}: shard 1/2 is being written: " in err and f"(pid {pid})" in err
        assert list(out.iterdir()) == []  # OUT as it was: not even a lock file
        assert (copies[1] / LOCK_NAME).read_text() == f"{pid}\n"  # the holder's, untouched
    assert [contents(d) for d in copies] == before


@pytest.mark.skipif(not hasattr(fcntl, "F_SETPIPE_SZ"), reason="resizes a Linux pipe")
def test_a_merge_holds_every_shards_lock_from_its_check_to_the_end_of_its_copy(
    shards: list[Path], copies: list[Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    out.mkdir()
    before = [contents(d) for d in copies]
    # The merge copies into OUT/results.jsonl.tmp: made a pipe of one page, which this test
    # reads from only after trying the shards, it stops the merge in its copy (the shards'
    # streams are far larger), its check done.
    pipe = out / "results.jsonl.tmp"
    os.mkfifo(pipe)
    reader = os.open(pipe, os.O_RDONLY | os.O_NONBLOCK)
    try:
        fcntl.fcntl(reader, fcntl.F_SETPIPE_SZ, 4096)
        command = [sys.executable, "-m", "cotaudit", "merge", str(out), *map(str, copies)]
        with subprocess.Popen(
            command, cwd=REPO, env=ENV, stderr=subprocess.PIPE, text=True
        ) as merge:
            try:
                assert merge.stderr is not None
                ready, _, _ = select.select([reader, merge.stderr], [], [], 120)
                assert ready == [reader], f"the merge did not copy: {merge.stderr.read()}"
                for shard in copies:
                    refused = pytest.raises(UsageError, match=f"\\(pid {merge.pid}\\)")
                    with refused, run_dir_lock(shard):
                        pass
                # A shard's run started now would add lines the merge does not copy.
                config = shards[0].parent / "audit.toml"
                capsys.readouterr()
                run = ["run", str(config), "--run-dir", str(copies[0]), "--quiet"]
                assert main([*run, "--shard", "0/2"]) == 2
                err = capsys.readouterr().err
                assert f"another cotaudit run is using this run directory (pid {merge.pid})" in err
            finally:
                merge.send_signal(signal.SIGKILL)
                merge.wait()
    finally:
        os.close(reader)
    for shard in copies:
        with run_dir_lock(shard):  # the kernel dropped the killed merge's locks
            pass
    assert [contents(d) for d in copies] == before


def test_a_merge_leaves_no_lock_file_in_a_shard_that_had_none(
    copies: list[Path], tmp_path: Path
) -> None:
    (copies[0] / LOCK_NAME).unlink()  # a shard copied in without it
    (copies[1] / LOCK_NAME).write_text("1\n")  # the pid of the shard's run, long gone
    before = [{p.name: p.read_bytes() for p in d.iterdir()} for d in copies]
    merge_shards(tmp_path / "out", copies)
    assert {p.name: p.read_bytes() for p in copies[0].iterdir()} == before[0]
    after = {p.name: p.read_bytes() for p in copies[1].iterdir()}
    # The last holder of shard 1's lock was the merge.
    assert after == {**before[1], LOCK_NAME: f"{os.getpid()}\n".encode()}


def test_a_read_only_shard_without_a_lock_file_is_merged_unguarded_with_a_warning(
    shards: list[Path], copies: list[Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (copies[0] / LOCK_NAME).unlink()  # a copied archive, made read-only
    before = contents(copies[0])
    out = tmp_path / "out"
    with read_only(copies[0]):
        capsys.readouterr()
        merge_shards(out, copies)
        err = capsys.readouterr().err
        assert contents(copies[0]) == before
    assert f"cotaudit: warning: cannot open or make {copies[0] / LOCK_NAME} (" in err
    assert f"reading {copies[0]} without the guard against a run writing it" in err
    assert (out / "results.jsonl").read_bytes() == b"".join(
        (d / "results.jsonl").read_bytes() for d in shards
    )


def test_a_shard_whose_lock_file_cannot_be_written_is_still_locked(
    copies: list[Path], tmp_path: Path
) -> None:
    with holding(copies[1]) as pid, read_only(copies[1] / LOCK_NAME):
        # Opened read-only, the lock file still shows the holder's lock.
        refused = pytest.raises(UsageError, match=f"shard 1/2 is being written: .*\\(pid {pid}\\)")
        with refused:
            merge_shards(tmp_path / "out", copies)
    assert not (tmp_path / "out").exists()
