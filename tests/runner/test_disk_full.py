"""A disk that fills while a run writes: a real failed write (the file size limit: EFBIG, as
ENOSPC would be), which tears the line it was writing. The run exits 1 naming the stream, and
a rerun cuts the torn line and completes the stream, every request once."""

from __future__ import annotations

import resource
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path

import orjson
import pytest

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="RLIMIT_FSIZE is POSIX only")

STREAM_LIMIT_BYTES = 64 * 1024  # the stream of --limit 5 is several times larger


def _limit_file_size() -> None:
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # the write then fails with EFBIG
    resource.setrlimit(resource.RLIMIT_FSIZE, (STREAM_LIMIT_BYTES, STREAM_LIMIT_BYTES))


def _run(run_dir: Path, *, limited: bool) -> subprocess.CompletedProcess[str]:
    # --no-cache: the size limit is the process's, and the cache would meet it too.
    return subprocess.run(
        [
            *(sys.executable, "-m", "cotaudit", "run", "--model", "local/faithful"),
            *("--limit", "5", "--run-dir", str(run_dir), "--no-cache", "--quiet"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        preexec_fn=_limit_file_size if limited else None,
    )


def _ids(stream: Path) -> Counter[str]:
    return Counter(
        str(r.get("request_id") or f"{r['kind']}/{r.get('endpoint')}/{r['problem_id']}")
        for r in map(orjson.loads, stream.read_bytes().splitlines())
    )


def test_a_full_disk_tears_no_line_in_the_middle_and_a_rerun_completes_the_stream(
    tmp_path: Path,
) -> None:
    stream = tmp_path / "run" / "results.jsonl"
    failed = _run(tmp_path / "run", limited=True)
    assert failed.returncode == 1, failed.stderr
    assert f"error: File too large: {stream}." in failed.stderr
    assert "the run resumes where it stopped" in failed.stderr
    assert "Traceback" not in failed.stderr
    data = stream.read_bytes()
    assert len(data) == STREAM_LIMIT_BYTES and not data.endswith(b"\n")  # a torn last line
    complete = data[: data.rfind(b"\n") + 1]
    assert all(orjson.loads(line) for line in complete.splitlines())

    resumed = _run(tmp_path / "run", limited=False)
    assert resumed.returncode == 0, resumed.stderr
    assert stream.read_bytes().startswith(complete)  # the torn line cut, nothing else
    reference = tmp_path / "reference"
    assert _run(reference, limited=False).returncode == 0
    ids = _ids(stream)
    assert ids == _ids(reference / "results.jsonl") and max(ids.values()) == 1
