"""``cotaudit parse``: one JSON object per input line, in order, with or without a vocabulary."""

from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from cotaudit.cli import main

LINES = [
    "Step 1: [Fae is a galtus].",
    "So Fae is a",
    "",
    "We cannot determine whether Fae is a gimpus.",
    "Zqgaltus seems to be a kind of galtus, so I will treat Fae as a galtus.",
    "Felines are carnivores.",
    "7 is a prime number.",
    "So Rex is a wump",
    'The answer is "True".',
]


def _run(capsys: pytest.CaptureFixture[str], *args: str) -> list[dict[str, object]]:
    assert main(["parse", *args]) == 0
    return [orjson.loads(line) for line in capsys.readouterr().out.splitlines()]


def test_one_object_per_line_in_order(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "steps.txt"
    path.write_text("\n".join(LINES) + "\n", encoding="utf-8")
    out = _run(capsys, str(path))
    assert [o["text"] for o in out] == [line for line in LINES if line]
    first = out[0]
    assert set(first) == {"text", "reading", "propositions", "assumed", "category"}
    assert (first["reading"], first["propositions"]) == ("assertion", ["is(fae, galtus)"])
    assert out[1]["reading"] == "unparseable" and out[1]["propositions"] == []
    assert (out[2]["reading"], out[2]["category"]) == ("not_a_step", "comment")
    assert out[3]["assumed"] is True and out[3]["propositions"][0] == "is(fae, galtus)"
    assert out[4]["propositions"] == ["subtype(feline, carnivore)"]
    assert out[5]["reading"] == "unparseable"  # "prime number" is a name only with a vocabulary
    assert out[6]["propositions"] == ["is(rex, wump)"]  # without a vocabulary, read as written
    assert (out[7]["reading"], out[7]["category"]) == ("not_a_step", "answer")


def test_the_vocabulary_reads_names_of_several_words_and_rejects_unknown_words(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "steps.txt"
    path.write_text("7 is a prime number.\nSo Rex is a wump\nWolves are canines.\n")
    out = _run(capsys, str(path), "--vocabulary", "7, prime numbers, rex, wumpus, wolf, canine")
    assert out[0]["propositions"] == ["is(7, prime number)"]
    assert (out[1]["reading"], out[1]["category"]) == ("not_a_step", "unknown_word")
    assert out[2]["propositions"] == ["subtype(wolf, canine)"]


def test_stdin_is_read_with_a_dash(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Real stdin is a text layer over bytes; the command reads the bytes.
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"Alex is a bempus.\n")))
    assert _run(capsys, "-")[0]["propositions"] == ["is(alex, bempus)"]


def test_bad_input_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["parse", str(tmp_path / "missing.txt")]) == 2
    assert "no such file" in capsys.readouterr().err
    path = tmp_path / "x.txt"
    path.write_text("Alex is a bempus.\n")
    assert main(["parse", str(path), "--vocabulary", " , "]) == 2
    binary = tmp_path / "b.txt"
    binary.write_bytes(b"\xff\xfe Alex\n")
    assert main(["parse", str(binary)]) == 2


def test_the_installed_command_pipes(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "cotaudit", "parse", "-"],
        input="So Max is not a wumpus.\n",
        capture_output=True,
        text=True,
        check=True,
    )
    assert orjson.loads(done.stdout)["propositions"] == ["not_is(max, wumpus)"]
