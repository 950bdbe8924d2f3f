"""The tables ``cotaudit evaluate``, ``selection`` and ``rescore`` print fit the terminal: at 80
and 60 columns (80 for a pipe or a file) no line is longer, but for a path; the table is split
into tables one under another, each naming its rows and keeping every cell and its group's
title; on a wide terminal it is one table. The width is read from the terminal the table goes
to, a real pseudo-terminal here (``$COLUMNS`` unset). ``cotaudit compare``:
test_compare_width.py; the mechanism: tests/cotaudit/test_terminal.py."""

from __future__ import annotations

import fcntl
import os
import re
import struct
import sys
import termios
from collections.abc import Callable, Iterator
from pathlib import Path

import orjson
import pytest

from cotaudit.cli import main
from tests.evaluator.test_rescore_output import _two_premise_pack

WIDE = 1000  # a terminal where every table is one
FOUND = "what the audit found (A+A')"
VALIDITY = "validity against the proof tree"
COUNTS = (
    "deployment,stratum,a,b,c,d\n"
    "a-deployment-with-a-long-name,1,10,2,3,4\n"
    "a-deployment-with-a-long-name,2,30,20,5,40\n"
    "second,,50,5,5,5\n"
    "ceiling,,10,5,0,0\n"
)


@pytest.fixture(scope="module")
def run(swept_run: Callable[..., Path]) -> Path:
    return swept_run(4, 0)


def _printed(
    argv: list[str],
    columns: int,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> list[str]:
    capsys.readouterr()
    monkeypatch.setenv("COLUMNS", str(columns))
    assert main(argv) == 0
    return capsys.readouterr().out.splitlines()


def _too_long(lines: list[str], width: int, paths: tuple[Path, ...]) -> list[str]:
    return [ln for ln in lines if len(ln) > width and not any(str(p) in ln for p in paths)]


def _cells(line: str) -> list[str]:
    """A table line's cells: what two spaces or more part."""
    return re.split(r"\s{2,}", line.strip())


def _rows(lines: list[str], names: list[str]) -> dict[str, list[str]]:
    """Each row name -> the lines of the tables that start with it (the name alone: a row of
    a table whose cells are all empty)."""
    return {
        name: [ln for ln in lines if ln == name or ln.startswith(f"{name}  ")] for name in names
    }


def _tables(lines: list[str], header: str) -> list[list[str]]:
    """The tables whose header line starts with ``header``: from the line above it (a title
    line, if any) to the blank line after."""
    out = []
    for at, line in enumerate(lines):
        if line.startswith(f"{header} "):
            end = lines.index("", at) if "" in lines[at:] else len(lines)
            out.append(lines[max(at - 1, 0) : end])
    return out


def _check_split(
    narrow: list[str], wide: list[str], names: list[str], header: str, tables: int
) -> None:
    """``narrow`` has every cell of ``wide``'s one table, in ``tables`` tables or more, each
    line of a row starting with its name, each header naming the columns it has."""
    (wide_head,) = [ln for ln in wide if ln.startswith(f"{header} ")]
    heads = [ln for ln in narrow if ln.startswith(f"{header} ")]
    assert len(heads) >= tables, narrow
    assert " ".join(wide_head.split()) == " ".join(" ".join(h.split()[1:]) for h in heads).join(
        [f"{header} ", ""]
    )
    wide_rows, narrow_rows = _rows(wide, names), _rows(narrow, names)
    for name in names:
        (line,) = wide_rows[name]
        assert len(narrow_rows[name]) == len(heads), (name, narrow)
        assert [c for ln in narrow_rows[name] for c in _cells(ln)[1:]] == _cells(line)[1:]


@pytest.mark.parametrize("columns", [80, 60])
def test_evaluate_fits_the_terminal_every_cell_under_its_groups_title(
    run: Path,
    tmp_path: Path,
    columns: int,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # The table was 105 columns, with legend lines of 100: an 80-column terminal wrapped each.
    argv = ["evaluate", str(run), "--n-boot", "50", "--no-figures", "--quiet"]
    wide = _printed([*argv, "--out", str(tmp_path / "wide")], WIDE, monkeypatch, capsys)
    out = tmp_path / "narrow"
    narrow = _printed([*argv, "--out", str(out)], columns, monkeypatch, capsys)
    assert not _too_long(narrow, columns, (out,)), narrow
    models = list(orjson.loads((out / "report.json").read_bytes())["models"])
    _check_split(narrow, wide, models, "model", tables=2)
    for table in _tables(narrow, "model"):  # each part under its group's title
        title, header = table[0].strip(), table[1]
        if "correct" in header or "RAWR" in header:
            assert title == FOUND and "F1" not in header
        else:
            assert title == VALIDITY and ("F1" in header or "truth" in header)
    # What each model's figures rest on: every word, within the width.
    for model in models:
        at = next(i for i, ln in enumerate(narrow) if ln.startswith(f"{model}: "))
        (said,) = [ln for ln in wide if ln.startswith(f"{model}: ")]
        assert " ".join(narrow[at : at + 3]).split()[: len(said.split())] == said.split()
    # The legend's words are the same, in lines no longer than the width.
    start = next(i for i, ln in enumerate(narrow) if ln.startswith("correct "))
    wide_start = next(i for i, ln in enumerate(wide) if ln.startswith("correct "))
    legend, wide_legend = narrow[start : narrow.index("", start)], wide[wide_start:]
    assert " ".join(legend).split() == " ".join(wide_legend[: wide_legend.index("")]).split()
    assert (tmp_path / "wide" / "report.md").read_bytes() == (out / "report.md").read_bytes()


def test_evaluate_on_a_wide_terminal_is_one_table(
    run: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["evaluate", str(run), "--n-boot", "50", "--no-figures", "--quiet"]
    lines = _printed([*argv, "--out", str(tmp_path / "e")], 132, monkeypatch, capsys)
    assert FOUND in lines[0] and VALIDITY in lines[0]
    assert lines[1].split()[:5] == ["model", "correct", "ignored", "grounded", "RAWR"]
    assert lines[1].endswith("truth") and len(_tables(lines, "model")) == 1
    legend = lines[lines.index("", 3) + 1 :]
    assert max(len(ln) for ln in legend[: legend.index("")]) <= 100  # prose: 100 at most


def _selection(
    tmp_path: Path,
    columns: int,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> list[str]:
    counts = tmp_path / "counts.csv"
    counts.write_text(COUNTS, encoding="utf-8")
    out = tmp_path / f"sel-{columns}"
    argv = ["selection", "--counts", str(counts), "--out", str(out), "--no-figures"]
    return _printed(argv, columns, monkeypatch, capsys)


@pytest.mark.parametrize("columns", [80, 60])
def test_selection_fits_the_terminal_every_cell_kept(
    tmp_path: Path,
    columns: int,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # The table was 97 columns with these names.
    wide = _selection(tmp_path, WIDE, monkeypatch, capsys)
    narrow = _selection(tmp_path, columns, monkeypatch, capsys)
    assert not _too_long(narrow, columns, (tmp_path,)), narrow
    names = ["a-deployment-with-a-long-name", "second"]
    main_table = narrow[: narrow.index("Ceiling controls (P(C=1)=1, filter vacuous; not pooled):")]
    _check_split(main_table, wide, names, "deployment", tables=2)
    # The ceiling control: under a header of its own where the table above was split (as its
    # columns are not those above), split itself where it does not fit.
    pooled = next(i for i, ln in enumerate(narrow) if ln.startswith("Pooled"))
    ceiling = narrow[len(main_table) + 1 : pooled - 1]
    (wide_ceiling,) = [ln for ln in wide if ln.startswith("ceiling ")]
    _check_split(ceiling, [wide[0], wide_ceiling], ["ceiling"], "deployment", tables=1)
    # The lines under the tables: every word, in order.
    wide_pooled = wide.index(next(ln for ln in wide if ln.startswith("Pooled")))
    said = [ln for ln in narrow[pooled:] if not ln.startswith("wrote ")]
    assert (
        " ".join(said).split()
        == " ".join(ln for ln in wide[wide_pooled:] if not ln.startswith("wrote ")).split()
    )


def test_selection_on_a_wide_terminal_is_one_table_the_ceilings_under_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    lines = _selection(tmp_path, 132, monkeypatch, capsys)
    assert len(_tables(lines, "deployment")) == 1
    at = lines.index("Ceiling controls (P(C=1)=1, filter vacuous; not pooled):")
    assert lines[at + 1].startswith("ceiling ") and len(_cells(lines[at + 1])) == 10


def _rescore(
    pack: Path,
    columns: int,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    *flags: str,
) -> list[str]:
    argv = ["rescore", str(pack), "--model", "m", "--n-boot", "20", *flags]
    return _printed(argv, columns, monkeypatch, capsys)


@pytest.mark.parametrize("columns", [80, 60])
def test_rescore_fits_the_terminal_every_cell_under_its_groups_title(
    tmp_path: Path,
    columns: int,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # The table was 168 columns: every one of its lines wrapped into two or three.
    pack = _two_premise_pack(tmp_path / "pack")
    wide = _rescore(pack, WIDE, monkeypatch, capsys)
    narrow = _rescore(pack, columns, monkeypatch, capsys)
    assert not _too_long(narrow, columns, (pack,)), narrow
    at = next(i for i, ln in enumerate(wide) if ln.startswith("row "))
    names = [ln.split()[0] for ln in wide[at + 2 : wide.index("", at)]]
    assert "A_consistent_unstable_negative_full" in names and "A_Ap_cascade_full" in names
    _check_split(narrow, wide, names, "row", tables=3)
    for table in _tables(narrow, "row"):
        assert set(_cells(table[0])) <= {"ours", "published", "ours − published"}, table
    # The analyses: each value, ours then published, every word, within the width.
    start = next(i for i, ln in enumerate(narrow) if ln.startswith("analysis "))
    wide_start = next(i for i, ln in enumerate(wide) if ln.startswith("analysis "))
    assert " ".join(narrow[start:]).split() == " ".join(wide[wide_start:]).split()
    assert " ".join(narrow).split().count("DIFF") == " ".join(wide).split().count("DIFF")


def test_rescore_on_a_wide_terminal_is_one_table(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    pack = _two_premise_pack(tmp_path / "pack")
    lines = _rescore(pack, 200, monkeypatch, capsys)
    (table,) = _tables(lines, "row")
    assert table[0].split() == ["ours", "published", "ours", "−", "published"]
    assert _cells(table[1]) == [
        *("row", "tp/fp/fn/tn", "P", "R", "F1", "F1 95% CI"),
        *("tp/fp/fn/tn", "F1", "F1 CI", "counts", "dF1", "dCI"),
    ]


@pytest.fixture
def terminal(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[str, int], None]]:
    """``terminal(name, columns)``: the process's standard ``name`` ("stdout", "stderr") is a
    real pseudo-terminal that wide, as the width is read from it; ``$COLUMNS`` unset."""
    monkeypatch.delenv("COLUMNS", raising=False)
    opened: list[int] = []

    def use(name: str, columns: int) -> None:
        leader, follower = os.openpty()
        opened.extend((leader, follower))
        fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 24, columns, 0, 0))
        monkeypatch.setattr(sys, f"__{name}__", os.fdopen(follower, "w", closefd=False))

    yield use
    for fd in opened:
        os.close(fd)


def test_each_table_takes_the_width_of_the_terminal_it_goes_to(
    run: Path,
    tmp_path: Path,
    terminal: Callable[[str, int], None],
    capsys: pytest.CaptureFixture[str],
) -> None:
    terminal("stdout", 60)
    counts = tmp_path / "counts.csv"
    counts.write_text(COUNTS, encoding="utf-8")
    pack = _two_premise_pack(tmp_path / "pack")
    for argv in (
        ["evaluate", str(run), "--n-boot", "20", "--no-figures", "--quiet"],
        ["selection", "--counts", str(counts), "--out", str(tmp_path / "s"), "--no-figures"],
        ["rescore", str(pack), "--model", "m", "--n-boot", "20"],
    ):
        assert main(argv) == 0
        lines = capsys.readouterr().out.splitlines()
        assert not _too_long(lines, 60, (run, tmp_path)), lines
        assert max(map(len, lines)) > 50  # the terminal's 60, not 80 nor 40
    # With the JSON on standard output (a pipe), the table goes to standard error: its width.
    terminal("stderr", 70)
    assert main(["rescore", str(pack), "--model", "m", "--n-boot", "20", "--json", "-"]) == 0
    captured = capsys.readouterr()
    assert orjson.loads(captured.out)["models"]["m"]
    table = captured.err.splitlines()
    assert not _too_long(table, 70, (pack,)) and max(map(len, table)) > 60
    assert main(["selection", "--counts", str(counts), "--json", "-", "--no-figures"]) == 0
    table = capsys.readouterr().err.splitlines()
    assert not _too_long(table, 70, (tmp_path,)) and max(map(len, table)) > 60
