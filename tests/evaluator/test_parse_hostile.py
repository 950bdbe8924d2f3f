"""``cotaudit parse`` on input that is not clean UTF-8 text: one message naming the line, exit
2, never a traceback; a byte-order mark is not part of the first step."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from cotaudit.cli import main


def test_stdin_that_is_not_utf8_is_one_message_naming_the_line() -> None:
    # The installed command under the C locale: Python's stdin then decodes with
    # surrogateescape, and the JSON writer used to fail on the surrogates with a traceback.
    done = subprocess.run(
        [sys.executable, "-m", "cotaudit", "parse", "-"],
        input=b"Alex is a bempus.\n\xff\xfe not text\n",
        capture_output=True,
        env={"LC_ALL": "C", "PATH": "/usr/bin:/bin"},
        check=False,
    )
    err = done.stderr.decode()
    assert done.returncode == 2, err
    assert "Traceback" not in err
    assert "standard input: line 2: not UTF-8 text" in err
    assert orjson.loads(done.stdout.splitlines()[0])["propositions"] == ["is(alex, bempus)"]


def test_a_file_that_is_not_utf8_names_its_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "latin1.txt"
    path.write_bytes(b"Fae is a galtus.\n\nSo Fae is a caf\xe9.\n")
    assert main(["parse", str(path)]) == 2
    err = capsys.readouterr().err
    assert f"{path}: line 3: not UTF-8 text" in err


def test_a_byte_order_mark_is_not_read_as_part_of_the_first_step(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "notepad.txt"
    path.write_bytes(b"\xef\xbb\xbfFae is a galtus.\r\nSo Fae is a wumpus.\r\n")
    assert main(["parse", str(path)]) == 0
    out = [orjson.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [o["text"] for o in out] == ["Fae is a galtus.", "So Fae is a wumpus."]
    assert out[0]["propositions"] == ["is(fae, galtus)"]


def test_a_directory_is_named_as_one(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["parse", str(tmp_path)]) == 2
    assert f"{tmp_path}: a directory, not a file" in capsys.readouterr().err


def test_an_empty_file_prints_nothing_and_succeeds(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # As other line filters do (`grep ... | cotaudit parse` with no match is not an error).
    path = tmp_path / "empty.txt"
    path.write_bytes(b"")
    assert main(["parse", str(path)]) == 0
    assert capsys.readouterr().out == ""
