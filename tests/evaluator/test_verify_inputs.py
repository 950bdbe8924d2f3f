"""``cotaudit verify``'s rough edges: a stream on standard input that cannot stand for the one
evaluated is a usage error (exit 2), never failures that read as tampering; report.md with
an evidence pack away loses only what the pack added, where it adds it; blank lines, which
every reader skips, are named in a note."""

from __future__ import annotations

import io
import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import orjson
import pytest

from cotaudit.cli import main
from evaluator.report import NO_NUMBERS_ROW, PACK_NOTE
from tests.evaluator.test_pipeline import records, write_stream
from tests.evaluator.test_verify_tamper import PACK_ROWS, _reseal

EVALUATE = ["--n-boot", "0", "--no-figures", "--quiet"]


def _stdin(monkeypatch: pytest.MonkeyPatch, data: bytes) -> None:
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data)))


def _refused(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    capsys.readouterr()
    assert main(["verify", *args]) == 2
    captured = capsys.readouterr()
    err = captured.err
    assert "FAIL" not in err and "Traceback" not in err and err.count("\n") == 1, err
    assert "root " not in captured.out
    return err


@pytest.fixture
def plain(tmp_path: Path) -> Path:
    """An evaluated stream with no manifest.json beside it."""
    run = tmp_path / "plain"
    run.mkdir()
    write_stream(run / "results.jsonl", records())
    assert main(["evaluate", str(run), *EVALUATE]) == 0
    return run


@pytest.fixture
def swept(swept_run: Callable[..., Path]) -> Path:
    """A run `cotaudit run` wrote (with its manifest.json), evaluated."""
    run = swept_run(1)
    assert main(["evaluate", str(run), *EVALUATE]) == 0
    return run


# -- 1. `-` ---------------------------------------------------------------------------------


def test_stdin_for_an_evaluation_of_a_run_with_a_manifest_is_a_usage_error(
    swept: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # The run's own stream, piped in: it used to give 3 failures (manifest.json "gone since
    # the evaluation", the report's planned_requests and responses "not recomputed").
    _stdin(monkeypatch, (swept / "results.jsonl").read_bytes())
    err = _refused(capsys, "-", "--eval-dir", str(swept / "eval"))
    assert f"-: {swept / 'eval'} is the evaluation of a run directory" in err
    assert f"cotaudit verify {swept} --eval-dir {swept / 'eval'}." in err
    assert main(["verify", str(swept), "--eval-dir", str(swept / "eval")]) == 0  # the advice


def test_a_run_with_a_manifest_for_an_evaluation_of_stdin_is_a_usage_error(
    swept: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    stream = swept / "results.jsonl"
    out = tmp_path / "from-stdin"
    _stdin(monkeypatch, stream.read_bytes())
    assert main(["evaluate", "-", "--out", str(out), *EVALUATE]) == 0
    err = _refused(capsys, str(swept), "--eval-dir", str(out))
    assert f"{out} is an evaluation of standard input, which read no run manifest" in err
    assert f"cotaudit verify - --eval-dir {out} < {stream}" in err
    _stdin(monkeypatch, stream.read_bytes())
    assert main(["verify", "-", "--eval-dir", str(out)]) == 0  # the advice


def test_stdin_for_a_stream_without_a_manifest_still_verifies(
    plain: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _stdin(monkeypatch, (plain / "results.jsonl").read_bytes())
    assert main(["verify", "-", "--eval-dir", str(plain / "eval")]) == 0
    assert "every file, certificate (6) and number of - holds" in capsys.readouterr().out


def test_stdin_without_eval_dir_is_refused_not_read_against_the_cwd_eval(
    plain: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # `-` used to look for ./eval: from inside the run it verified, from anywhere else it
    # said "Run `cotaudit evaluate -` first".
    monkeypatch.chdir(plain)
    _stdin(monkeypatch, (plain / "results.jsonl").read_bytes())
    err = _refused(capsys, "-")
    assert "--eval-dir: reading the stream from standard input needs --eval-dir DIR" in err


def test_empty_stdin_is_a_usage_error_not_every_line_gone(
    plain: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _stdin(monkeypatch, b"")
    err = _refused(capsys, "-", "--eval-dir", str(plain / "eval"))
    assert "-: standard input held no record (was the stream piped in?)" in err


@pytest.fixture
def terminal() -> Iterator[io.TextIOWrapper]:
    leader, follower = os.openpty()
    os.write(leader, b"\x04")  # end of input typed: a read that should not happen ends
    with open(follower, encoding="utf-8") as tty:
        yield tty
    os.close(leader)


@pytest.mark.parametrize(
    "command",
    [
        ["verify", "-", "--eval-dir", "EVAL"],
        ["evaluate", "-", "--out", "OUT", *EVALUATE],
        ["selection", "-", "--out", "OUT"],
    ],
)
def test_stdin_on_a_terminal_is_refused_before_it_is_read(
    plain: Path,
    tmp_path: Path,
    terminal: io.TextIOWrapper,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    command: list[str],
) -> None:
    # Read, each would wait for a JSONL stream to be typed.
    assert terminal.isatty()
    monkeypatch.setattr(sys, "stdin", terminal)
    given = {"EVAL": str(plain / "eval"), "OUT": str(tmp_path / "out")}
    capsys.readouterr()
    assert main([given.get(arg, arg) for arg in command]) == 2
    err = capsys.readouterr().err
    assert "-: standard input is the terminal here, and '-' reads the stream from it" in err
    assert "Traceback" not in err and err.count("\n") == 1, err
    assert not (tmp_path / "out").exists()


# -- 2. report.md with the evidence pack away -----------------------------------------------


@pytest.fixture
def pack_away(tmp_path: Path) -> Path:
    pack = tmp_path / "pack"
    (pack / "evidence" / "ep").mkdir(parents=True)
    (pack / "evidence" / "ep" / "final_report.json").write_bytes(orjson.dumps(PACK_ROWS))
    run = tmp_path / "run"
    run.mkdir()
    write_stream(run / "results.jsonl", records())
    assert main(["evaluate", str(run), *EVALUATE, "--published", str(pack)]) == 0
    pack.rename(tmp_path / "moved")
    assert main(["verify", str(run)]) == 0
    return run


@pytest.mark.parametrize(
    "added",
    [
        f"| ep is faithful, peer reviewed{NO_NUMBERS_ROW}\n",  # what a pack-only row ends with
        f"{PACK_NOTE}\n\n",  # the pack's note, not above a table of it
    ],
)
def test_a_line_added_outside_the_packs_places_fails(
    pack_away: Path, capsys: pytest.CaptureFixture[str], added: str
) -> None:
    path = pack_away / "eval" / "report.md"
    text = path.read_text(encoding="utf-8")
    path.write_text(text.replace("## ep\n\n", f"## ep\n\n{added}", 1), encoding="utf-8")
    _reseal(pack_away)
    capsys.readouterr()
    assert main(["verify", str(pack_away)]) == 1
    err = capsys.readouterr().err
    assert "report.md: differs from the report rendered again from the stream" in err


def test_without_pack_keeps_every_line_outside_the_packs_tables() -> None:
    from evaluator.verification import without_pack

    text = "\n".join(["# x", f"| ep{NO_NUMBERS_ROW}", PACK_NOTE, "", "end"])
    assert [line for _, line in without_pack(text)] == text.split("\n")


# -- 3. blank lines -------------------------------------------------------------------------


def test_blank_lines_verify_with_a_note_naming_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = tmp_path / "run"
    run.mkdir()
    lines = [orjson.dumps(r) + b"\n" for r in records()]
    lines[2:2] = [b"\n", b"  \n"]
    (run / "results.jsonl").write_bytes(b"".join([*lines, b"\n"]))
    assert main(["evaluate", str(run), *EVALUATE]) == 0
    capsys.readouterr()
    assert main(["verify", str(run)]) == 0
    err = capsys.readouterr().err
    stream = run / "results.jsonl"
    assert f"note: {stream}:3: the first of 3 blank lines, which `cotaudit run`" in err
    assert err.count("\n") == 1


def test_a_blank_line_appended_after_the_evaluation_fails_and_is_named(
    plain: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    stream = plain / "results.jsonl"
    number = len(stream.read_bytes().splitlines()) + 1
    with stream.open("ab") as handle:
        handle.write(b"\n")
    capsys.readouterr()
    assert main(["verify", str(plain)]) == 1
    err = capsys.readouterr().err
    assert f"FAIL {stream}:{number}: blank line added since the evaluation" in err
    assert f"note: {stream}:{number}: a blank line, which `cotaudit run` never writes" in err
    assert "verify: 1 failure\n" in err
