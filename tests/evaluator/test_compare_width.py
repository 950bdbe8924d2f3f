"""``cotaudit compare``'s terminal table fits the terminal: 80 columns where the width is
unknown (a pipe, a file, an unsized pseudo-terminal) or 80, the terminal's own width otherwise
(``$COLUMNS`` first), every figure kept; the files ``--out`` writes do not depend on it. How
the width is read, on real pseudo-terminals: tests/cotaudit/test_terminal.py."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import orjson
import pytest

from cotaudit.cli import main
from evaluator.commands.compare import model_rows

N_BOOT = "50"


@pytest.fixture(scope="module")
def runs(swept_run: Callable[..., Path]) -> tuple[Path, Path]:
    a, b = swept_run(4, 0), swept_run(3, 0)
    for run in (a, b):
        assert main(["evaluate", str(run), "--n-boot", "50", "--no-figures", "--quiet"]) == 0
    return a, b


def _compare(
    runs: tuple[Path, Path],
    out: Path,
    columns: int,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> list[str]:
    capsys.readouterr()
    monkeypatch.setenv("COLUMNS", str(columns))
    args = ["compare", *map(str, runs), "--n-boot", N_BOOT, "--out", str(out)]
    assert main(args) == 0
    return capsys.readouterr().out.splitlines()


def _model_lines(lines: list[str], label: str) -> list[str]:
    return [ln for ln in lines if ln.startswith(f"{label} ")]


@pytest.mark.parametrize("columns", [80, 60])
def test_every_line_fits_and_no_figure_is_lost(
    runs: tuple[Path, Path],
    tmp_path: Path,
    columns: int,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # The one table was 120 columns: an 80-column terminal wrapped every line into the next.
    lines = _compare(runs, tmp_path / "cmp", columns, monkeypatch, capsys)
    # But for a path longer than the line, said whole (a run's, an output file's).
    paths = [str(tmp_path), *map(str, runs)]
    too_long = [ln for ln in lines if len(ln) > columns and not any(p in ln for p in paths)]
    assert not too_long, too_long
    assert f"wrote {tmp_path / 'cmp' / 'comparison.json'}" in lines
    result = orjson.loads((tmp_path / "cmp" / "comparison.json").read_bytes())
    header, *rows = model_rows(result, ("f1_A_Ap_cascade_full", "f1_A_consistent_full"))
    text = "\n".join(lines)
    for name in header:  # every column keeps its name over its figures
        assert name in text
    for row in rows:
        label, *cells = row
        found = _model_lines(lines, label)
        assert len(found) >= 2  # split into tables one under another, each naming the model
        for cell in cells:
            assert any(cell in line for line in found), (label, cell, found)
    # Each table is whole columns: the grounded share beside its interval, on the line of
    # what the audit found; the F1s together, by themselves.
    heads = [ln.split() for ln in lines if ln.startswith("model ")]
    assert heads[0][:2] == ["model", "problems"]
    assert any(h[1:] == ["F1", "A+A'+cascade", "F1", "A", "†"] for h in heads), heads
    for d in result["differences"]:  # each figure's difference, on a line of its own
        head = f"{d['model'].split(' ', 1)[0]} − {d['baseline']}, on the "
        (at,) = [i for i, ln in enumerate(lines) if ln.startswith(head)]
        for line, figure in zip(lines[at + 1 : at + 6], d["figures"].values(), strict=True):
            assert (figure["diff"] is None) == line.endswith("n/a"), line
    for run in result["runs"]:
        assert f"{run['letter']} = {run['label']}" in text


def test_a_wide_terminal_gets_one_table_and_the_files_do_not_change(
    runs: tuple[Path, Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    narrow = _compare(runs, tmp_path / "narrow", 80, monkeypatch, capsys)
    wide = _compare(runs, tmp_path / "wide", 200, monkeypatch, capsys)
    assert narrow != wide
    (head,) = [ln for ln in wide if ln.startswith("model ")]
    assert "problems" in head and "grounded" in head and "F1 A †" in head
    result = orjson.loads((tmp_path / "wide" / "comparison.json").read_bytes())
    for model in result["models"]:
        assert len(_model_lines(wide, model["label"])) == 1
    # The legend's prose stays in lines of the reports' legends (100), however wide.
    start = next(i for i, ln in enumerate(wide) if ln.startswith("ignored "))
    legend = wide[start : wide.index("", start)]
    assert len(legend) > 6 and max(map(len, legend)) <= 100
    for name in ("comparison.json", "comparison.md"):
        assert (tmp_path / "narrow" / name).read_bytes() == (tmp_path / "wide" / name).read_bytes()
