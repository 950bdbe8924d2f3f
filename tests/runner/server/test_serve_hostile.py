"""``cotaudit serve --replay`` with sources that pass the cheap start-up check but hold no
usable recording: one message and exit status 2 before the URL is printed, not a server that
answers every replay request with a 500 or a 404.

Each case runs the command as a process with a timeout: without the check the server starts
and serves, and the test fails on the timeout instead of hanging.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest


def _serve(source: Path) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "cotaudit", "serve", "--port", "0", "--replay", str(source)]
    try:
        return subprocess.run(
            command,
            capture_output=True,
            text=True,
            timeout=30,
            env={**os.environ, "PYTHONWARNINGS": "error"},
        )
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"the server started on {source} instead of refusing it: {exc.stdout!r}")


def test_a_stream_with_a_corrupt_line_is_refused_naming_the_line(tmp_path: Path) -> None:
    stream = tmp_path / "results.jsonl"
    stream.write_text('{"kind": "problem"}\nnot json\n{"kind": "response"}\n', encoding="utf-8")
    result = _serve(stream)
    assert result.returncode == 2, result.stderr
    assert result.stdout == ""  # no base URL: nobody is told to send requests to it
    assert f"{stream}:2: line is not valid JSON" in result.stderr
    assert len(result.stderr.splitlines()) == 1, result.stderr


@pytest.mark.parametrize(
    "lines",
    [
        ['{"kind": "problem", "problem_id": "p1"}', '{"kind": "request", "request_id": "r"}'],
        ['{"kind": "something-else"}'],
    ],
    ids=["a plan", "another tool's records"],
)
def test_a_stream_without_a_recording_is_refused(tmp_path: Path, lines: list[str]) -> None:
    stream = tmp_path / "plan.jsonl"
    stream.write_text("\n".join(lines) + "\n", encoding="utf-8")
    result = _serve(stream)
    assert result.returncode == 2, result.stderr
    assert result.stdout == ""
    assert f"--replay {stream}: no recordings" in result.stderr
    assert "evidence pack" in result.stderr and "Traceback" not in result.stderr


def test_a_corrupt_pack_output_is_refused_by_the_process(tmp_path: Path) -> None:
    output = tmp_path / "pack" / "evidence" / "m" / "p001" / "original_cot.json"
    output.parent.mkdir(parents=True)
    output.write_text("{", encoding="utf-8")
    result = _serve(tmp_path)
    assert result.returncode == 2, result.stderr
    assert result.stdout == ""
    assert f"{output}: not valid JSON" in result.stderr
    assert "Traceback" not in result.stderr
