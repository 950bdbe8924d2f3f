"""``cotaudit reproduce`` fits the terminal: at 80 and 60 columns (80 for a pipe) no line of
its header, table or legend is longer, but for a path; the table is split into tables one
under another, each naming its rows under its side's title (ours, paper), every figure kept;
on a wide terminal it is one table. The mechanism: tests/cotaudit/test_terminal.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from cotaudit.cli import main
from cotaudit.commands.reproduce import COMPARED_ROWS
from tests.evaluator.test_table_widths import _check_split, _tables, _too_long

WIDE = 1000  # a terminal where the table is one


@pytest.fixture(scope="module")
def replayed(pack_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An --out the pack was replayed into once: each run of a test sends nothing, so that
    every run's header is the same."""
    out = tmp_path_factory.mktemp("reproduce") / "repro"
    assert main(["reproduce", str(pack_dir), "--out", str(out), "--quiet", "--no-figures"]) == 0
    return out


def _printed(
    pack: Path,
    out: Path,
    columns: int,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> list[str]:
    capsys.readouterr()
    monkeypatch.setenv("COLUMNS", str(columns))
    assert main(["reproduce", str(pack), "--out", str(out), "--quiet", "--no-figures"]) == 0
    return capsys.readouterr().out.splitlines()


def _words(lines: list[str]) -> list[str]:
    return " ".join(lines).split()


@pytest.mark.parametrize("columns", [80, 60])
def test_reproduce_fits_the_terminal_every_figure_under_its_sides_title(
    pack_dir: Path,
    replayed: Path,
    columns: int,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # The table was 122 columns, its header lines 190 and its legend lines 100.
    wide = _printed(pack_dir, replayed, WIDE, monkeypatch, capsys)
    narrow = _printed(pack_dir, replayed, columns, monkeypatch, capsys)
    assert not _too_long(narrow, columns, (replayed,)), narrow
    labels = [label for _, label in COMPARED_ROWS]
    table_at, wide_table_at = narrow.index(""), wide.index("")  # the header above it
    assert _words(narrow[:table_at]) == _words(wide[:wide_table_at])
    _check_split(narrow, wide, labels, "row", tables=2)
    for table in _tables(narrow, "row"):  # each side under its title, the difference the paper's
        title, header = table[0].strip(), table[1].split()[1:]
        assert title in ("ours", "paper"), table
        side = "F1 [95% CI] tp/fp/fn/tn" + ("" if title == "ours" else " dF1")
        assert set(header) <= set(side.split()), table
    # The legend: the same words in lines no longer than the width.
    legend = narrow[next(i for i, ln in enumerate(narrow) if ln.startswith("tp/fp/fn/tn ")) :]
    wide_legend = wide[next(i for i, ln in enumerate(wide) if ln.startswith("tp/fp/fn/tn ")) :]
    assert _words(legend) == _words(wide_legend)
    assert "B=10,000, seed 20260710" in " ".join(_words(legend))


def test_reproduce_on_a_wide_terminal_is_one_table_ours_beside_the_papers(
    pack_dir: Path,
    replayed: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    lines = _printed(pack_dir, replayed, 132, monkeypatch, capsys)
    (table,) = _tables(lines, "row")
    assert table[0].split() == ["ours", "paper"]
    side = ["F1", "[95%", "CI]", "tp/fp/fn/tn"]
    assert table[1].split() == ["row", *side, *side, "dF1"]
    legend = lines[next(i for i, ln in enumerate(lines) if ln.startswith("tp/fp/fn/tn ")) :]
    assert max(len(ln) for ln in legend if str(replayed) not in ln) <= 100  # prose: 100 at most
