"""``cotaudit verify -`` names the lines that changed as ``verify RUN`` does: the record each
holds (or ``blank line``) under ``<stdin>:N``, as its blank-line note already names them,
not ``a line`` (standard input cannot be read a second time to look them up). And
``cotaudit evaluate`` treats blank lines alike from a file and from standard input: it skips
them without a word (``verify`` is what names them, docs/certificates.md "Blank lines")."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.evaluator.test_pipeline import records, write_stream

ROOT = Path(__file__).resolve().parents[2]
EVALUATE = ["--n-boot", "0", "--no-figures", "--quiet"]


def _cotaudit(*args: str, stdin: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    with open(stdin or os.devnull, "rb") as handle:
        return subprocess.run(
            [sys.executable, "-m", "cotaudit", *args],
            stdin=handle,
            capture_output=True,
            text=True,
            env=env,
            timeout=300,
        )


def _edited(stream: Path) -> bytes:
    """The stream with a record written again with other whitespace (the same JSON, other
    bytes) and a blank line added after it."""
    lines = stream.read_bytes().splitlines(keepends=True)
    lines[2] = lines[2].replace(b'{"', b'{ "', 1)
    lines.insert(3, b"\n")
    return b"".join(lines)


def test_verify_names_the_changed_lines_of_stdin_as_those_of_a_file(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    stream = write_stream(run / "results.jsonl", records())
    # One evaluation of the file, one of the same bytes on standard input.
    assert _cotaudit("evaluate", str(run), *EVALUATE).returncode == 0
    piped = tmp_path / "piped-eval"
    done = _cotaudit("evaluate", "-", "--out", str(piped), *EVALUATE, stdin=stream)
    assert done.returncode == 0, done.stderr
    stream.write_bytes(_edited(stream))

    from_file = _cotaudit("verify", str(run))
    from_stdin = _cotaudit("verify", "-", "--eval-dir", str(piped), stdin=stream)
    assert from_file.returncode == from_stdin.returncode == 1, from_stdin.stderr

    def failures(result: subprocess.CompletedProcess[str], where: str) -> list[str]:
        lines = (result.stdout + result.stderr).splitlines()
        return [line.replace(where, "STREAM") for line in lines if line.startswith("FAIL")]

    named = failures(from_file, str(stream))
    assert named == [
        "FAIL STREAM:3: response ep/q1/consistent/P1/0 changed since the evaluation",
        "FAIL STREAM:4: blank line changed since the evaluation",
        "FAIL STREAM: evaluated line 3 is no longer in the stream (changed or removed)",
    ]
    assert failures(from_stdin, "<stdin>") == named


def test_evaluate_skips_blank_lines_alike_from_a_file_and_from_stdin(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    stream = write_stream(run / "results.jsonl", records())
    stream.write_bytes(_edited(stream))
    from_file = _cotaudit("evaluate", str(stream), "--out", str(tmp_path / "a"), *EVALUATE)
    from_stdin = _cotaudit("evaluate", "-", "--out", str(tmp_path / "b"), *EVALUATE, stdin=stream)
    assert from_file.returncode == from_stdin.returncode == 0, from_stdin.stderr
    # The same notes (of the stream's incomplete audits), and none of its blank line.
    assert from_file.stderr == from_stdin.stderr and "blank" not in from_file.stderr
    summary = [line for line in from_file.stdout.splitlines() if not line.startswith("wrote ")]
    assert [line for line in from_stdin.stdout.splitlines() if not line.startswith("wrote ")] == (
        summary
    )
