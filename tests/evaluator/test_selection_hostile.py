"""``cotaudit selection`` on input an expert plausibly gives by mistake: one message, exit 2,
never a traceback, nothing written (and nothing already written touched)."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from cotaudit.cli import main
from tests.stream_records import response_record

COUNTS = "deployment,a,b,c,d\nx,10,20,30,40\ny,5,6,7,8\n"


def test_a_counts_file_that_is_not_utf8_names_its_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    csv = tmp_path / "latin1.csv"
    csv.write_bytes(b"deployment,a,b,c,d\ncaf\xe9,1,2,3,4\n")
    out = tmp_path / "out"
    assert main(["selection", "--counts", str(csv), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert f"{csv}: line 2: not UTF-8 text" in err and "Traceback" not in err
    assert not out.exists()


@pytest.mark.parametrize("digit", ["²", "١٢", "１"])
def test_a_count_in_digits_other_than_ascii_is_refused_naming_line_and_column(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], digit: str
) -> None:
    # str.isdigit() takes these; int() raised on '²' (a traceback) and read the others.
    csv = tmp_path / "c.csv"
    csv.write_text(f"deployment,a,b,c,d\nx,{digit},2,3,4\n", encoding="utf-8")
    assert main(["selection", "--counts", str(csv)]) == 2
    assert "line 2, column 'a': expected a non-negative integer" in capsys.readouterr().err


def test_a_spreadsheets_byte_order_mark_is_not_part_of_the_header(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    csv = tmp_path / "excel.csv"
    csv.write_bytes(b"\xef\xbb\xbf" + COUNTS.encode())
    out = tmp_path / "out"
    assert main(["selection", "--counts", str(csv), "--out", str(out), "--no-figures"]) == 0
    data = orjson.loads((out / "selection.json").read_bytes())
    assert set(data["deployments"]) == {"x", "y"}


def test_a_directory_given_as_counts_is_named_as_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["selection", "--counts", str(tmp_path)]) == 2
    assert f"--counts {tmp_path}: a directory, not a counts file" in capsys.readouterr().err


def test_a_column_named_twice_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    csv = tmp_path / "c.csv"
    csv.write_text("deployment,a,b,c,d,a\nx,1,2,3,4,5\n", encoding="utf-8")
    assert main(["selection", "--counts", str(csv)]) == 2
    assert "line 1: column 'a' is named twice" in capsys.readouterr().err


def _evaluation(tmp_path: Path) -> tuple[Path, dict[str, bytes]]:
    """A directory laid out as `cotaudit evaluate` leaves one (its manifest is enough)."""
    eval_dir = tmp_path / "run" / "eval"
    eval_dir.mkdir(parents=True)
    (eval_dir / "evaluation.json").write_bytes(b'{"kind": "evaluation"}\n')
    (eval_dir / "report.json").write_bytes(b"{}\n")
    return eval_dir, {p.name: p.read_bytes() for p in eval_dir.iterdir()}


@pytest.mark.parametrize("inside", [False, True])
def test_out_into_an_evaluation_is_refused_and_leaves_it_as_it_was(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], inside: bool
) -> None:
    # Files added to an evaluation fail `cotaudit verify` and are deleted by the next evaluate.
    eval_dir, before = _evaluation(tmp_path)
    csv = tmp_path / "c.csv"
    csv.write_text(COUNTS, encoding="utf-8")
    out = eval_dir / "sel" if inside else eval_dir
    assert main(["selection", "--counts", str(csv), "--out", str(out), "--no-figures"]) == 2
    err = capsys.readouterr().err
    assert "--out:" in err and "evaluation" in err and "cotaudit verify" in err
    assert {p.name: p.read_bytes() for p in eval_dir.iterdir()} == before


def test_a_grounding_run_is_named_and_pointed_at_evaluate(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "results.jsonl").write_bytes(orjson.dumps(response_record()) + b"\n")
    assert main(["selection", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "this is a 'prontoqa' run, not a selection study" in err
    assert f"cotaudit evaluate {tmp_path}" in err
    assert "into this directory" not in err  # a procedural sweep there would be refused
    assert not (tmp_path / "eval").exists()


def _run_without_out(tmp_path: Path) -> Path:
    run = tmp_path / "run"
    run.mkdir()
    (run / "results.jsonl").write_bytes(b"")
    return run


def test_a_default_output_directory_that_is_a_file_names_the_run_not_out(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The user typed no --out: "--out: RUN/eval is a file" named a flag they never gave.
    run = _run_without_out(tmp_path)
    (run / "eval").write_bytes(b"a file\n")
    assert main(["selection", str(run)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"cotaudit selection: error: {run / 'eval'} is a file, not a directory")
    assert f"(the default output for RUN_DIR {run}; --out chooses another)" in err
    assert "error: --out:" not in err
    assert (run / "eval").read_bytes() == b"a file\n"


def test_a_foreign_selection_json_in_the_default_directory_names_the_run_not_out(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = _run_without_out(tmp_path)
    (run / "eval").mkdir()
    foreign = run / "eval" / "selection.json"
    foreign.write_bytes(b'{"mine": true}\n')
    assert main(["selection", str(run)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"cotaudit selection: error: {foreign} exists and is not a report")
    assert f"(the default output for RUN_DIR {run}; --out chooses another)" in err
    assert "Give --out another directory" in err and "error: --out:" not in err
    assert [p.name for p in (run / "eval").iterdir()] == ["selection.json"]
    assert foreign.read_bytes() == b'{"mine": true}\n'


def test_a_selection_md_of_another_program_in_out_is_refused_and_kept(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    csv = tmp_path / "c.csv"
    csv.write_text(COUNTS, encoding="utf-8")
    out = tmp_path / "notes"
    out.mkdir()
    mine = out / "selection.md"
    mine.write_text("# My notes on selection bias\n", encoding="utf-8")
    assert main(["selection", "--counts", str(csv), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert f"--out: {mine} exists and is not a page written by cotaudit selection" in err, err
    assert [p.name for p in out.iterdir()] == ["selection.md"]
    assert mine.read_text(encoding="utf-8") == "# My notes on selection bias\n"
    # Its own page from an earlier run is written over, in one step.
    other = tmp_path / "out"
    assert main(["selection", "--counts", str(csv), "--out", str(other)]) == 0
    assert main(["selection", "--counts", str(csv), "--out", str(other)]) == 0
    page = (other / "selection.md").read_text(encoding="utf-8")
    assert page.startswith("# Selection study: correctness conditioning\n")
    assert not list(other.glob(".*.tmp"))


def test_a_directory_where_out_writes_selection_json_is_named_as_such(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # It used to say "--out is one file" and suggest --out DIR/selection.json/selection.json.
    csv = tmp_path / "c.csv"
    csv.write_text(COUNTS, encoding="utf-8")
    out = tmp_path / "out"
    (out / "selection.json").mkdir(parents=True)
    assert main(["selection", "--counts", str(csv), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert f"--out: {out / 'selection.json'} is a directory, not a file" in err
    assert "is one file" not in err and "selection.json/selection.json" not in err


@pytest.mark.parametrize("name", ["selection.md", "selection_forest.png"])
def test_json_naming_a_file_out_writes_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str
) -> None:
    # The JSON used to be written there and then the page (or a figure) over it: exit 0, and
    # no selection.json anywhere.
    csv = tmp_path / "c.csv"
    csv.write_text(COUNTS, encoding="utf-8")
    out = tmp_path / "out"
    out.mkdir()
    clash = out / ".." / "out" / name
    assert main(["selection", "--counts", str(csv), "--out", str(out), "--json", str(clash)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"cotaudit selection: error: --json: {clash} is the {name} that ")
    assert f"leave it out: {out / 'selection.json'} is written" in err and err.count("\n") == 1
    assert list(out.iterdir()) == []


def test_the_json_and_page_are_kept_whole_when_the_page_cannot_be_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # selection.json was replaced before the page was rendered: a failure there left the new
    # JSON beside the earlier page, which disagree.
    from evaluator.commands import selection as selection_command

    csv = tmp_path / "c.csv"
    csv.write_text(COUNTS, encoding="utf-8")
    out = tmp_path / "out"
    args = ["selection", "--counts", str(csv), "--out", str(out), "--no-figures"]
    assert main(args) == 0
    earlier = {p.name: p.read_bytes() for p in out.iterdir()}
    assert sorted(earlier) == ["selection.json", "selection.md"]
    csv.write_text(COUNTS.replace("x,10,", "x,11,"), encoding="utf-8")  # other counts

    def failing(*_args: object) -> str:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(selection_command, "render_markdown", failing)
    capsys.readouterr()
    assert main(args) == 1
    assert "No space left on device" in capsys.readouterr().err
    assert {p.name: p.read_bytes() for p in out.iterdir()} == earlier
