"""``cotaudit merge OUT ...`` holds OUT's run lock (``runner.run_lock``) as ``cotaudit run``
does: a merge into a directory that a run (or another merge) is writing is refused, exit 2,
naming the directory and the holder's pid, and writes nothing there; a merge leaves its own
pid in ``OUT/.lock`` and the lock free. Real shard runs through the embedded local model."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from cotaudit.cli import main
from cotaudit.errors import UsageError
from runner.manifest import merge_shards
from runner.run_lock import LOCK_NAME, run_dir_lock

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


@pytest.fixture
def holder(tmp_path: Path) -> Iterator[tuple[Path, int]]:
    """``tmp_path/out``, its lock held by another process (a run, as far as a merge can tell)
    that waits on its stdin (no sleeping) until killed."""
    out = tmp_path / "out"
    out.mkdir()
    code = (
        "import sys; from pathlib import Path; from runner.run_lock import run_dir_lock\n"
        "with run_dir_lock(Path(sys.argv[1])):\n"
        "    print('locked', flush=True); sys.stdin.read()\n"
    )
    with subprocess.Popen(
        [sys.executable, "-c", code, str(out)],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    ) as process:
        try:
            assert process.stdout is not None and process.stdout.readline() == "locked\n"
            yield out, process.pid
        finally:
            process.send_signal(signal.SIGKILL)
            process.wait()


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
