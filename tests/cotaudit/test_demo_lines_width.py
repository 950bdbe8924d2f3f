"""The lines ``cotaudit demo`` prints under its tables fit the terminal: at 80 and 60 columns
no line is longer, but for a path. The sweep's line (counts with thousands separators, as
``cotaudit run`` says them) is wrapped; the selection demo's closed-form predictions are a
table split as every table is (cotaudit.terminal), every figure kept; the files a selection
wrote are one to a line where their list does not fit. The tables themselves:
tests/evaluator/test_table_widths.py."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from cotaudit.cli import main
from cotaudit.commands.demo_selection import DEMO_DEPLOYMENTS, demo_config, predictions_table
from evaluator.commands.selection import outputs_lines
from runner.tasks.procedural.task import ProceduralTask
from tests.evaluator.test_table_widths import COUNTS, _check_split, _too_long

NUMBER = r"(\d{1,3}(?:,\d{3})*)"  # a count as the run summary prints it: 5,424


def _demo(
    out: Path, columns: int, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> list[str]:
    capsys.readouterr()
    monkeypatch.setenv("COLUMNS", str(columns))
    argv = ["demo", "--out", str(out), "--problems", "10", "--quiet", "--no-figures"]
    assert main(argv) == 0
    printed = capsys.readouterr().out.splitlines()
    legend = next(i for i, ln in enumerate(printed) if ln.startswith("†"))
    return printed[printed.index("", legend) :]  # what follows the table's legend


@pytest.mark.parametrize("columns", [80, 60])
def test_the_demos_sweep_line_is_wrapped_with_thousands_separators(
    tmp_path: Path,
    columns: int,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    out = tmp_path / "demo"
    first = _demo(out, columns, monkeypatch, capsys)
    again = _demo(out, columns, monkeypatch, capsys)  # the longest: the evaluation is kept
    for lines in (first, again):
        assert not _too_long(lines, columns, (out,)), lines
    said = " ".join(" ".join(first).split())
    m = re.search(
        rf"sweep: {NUMBER} responses written, 0 already in the stream, {NUMBER} HTTP requests "
        r"\([\d.]+ s\); evaluation [\d.]+ s report: ",
        said,
    )
    assert m, first
    written = m.group(1)
    assert written == m.group(2) and int(written.replace(",", "")) >= 1_000
    assert "," in written  # 1,0xx responses: the separator the run summary prints
    said = " ".join(" ".join(again).split())
    run = out.resolve() / "run"
    assert (
        f"sweep: 0 responses written, {written} already in the stream, 0 HTTP requests ("
    ) in said
    # On a line of its own, never broken inside "evaluation kept" whatever the path's length.
    (kept,) = [ln for ln in again if ln.startswith("evaluation")]
    assert kept.split()[:2] == ["evaluation", "kept"], again
    assert (
        f"evaluation kept ({run / 'eval'} is of this stream, unchanged; "
        f"`cotaudit evaluate {run}` redoes it) report: {run / 'eval' / 'report.md'}"
    ) in said


def _task(tmp_path: Path) -> ProceduralTask:
    task = demo_config(tmp_path / "selection").build_task()
    assert isinstance(task, ProceduralTask)
    return task


@pytest.mark.parametrize("columns", [80, 60])
def test_the_closed_form_predictions_fit_the_terminal_every_figure_kept(
    tmp_path: Path, columns: int
) -> None:
    # The table was 108 columns, each row indented under its title.
    task = _task(tmp_path)
    wide = predictions_table(task, width=1000).splitlines()
    narrow = predictions_table(task, width=columns).splitlines()
    assert narrow[0] == "Closed-form predictions on this task mix:"
    assert max(len(ln) for ln in narrow) <= columns, narrow
    _check_split(narrow[1:], wide[1:], list(DEMO_DEPLOYMENTS), "deployment", tables=2)


def test_the_closed_form_predictions_on_a_wide_terminal_are_one_table(tmp_path: Path) -> None:
    lines = predictions_table(_task(tmp_path), width=132).splitlines()
    assert lines[1].split() == ["deployment", "model", "acc", "F_pop", "F_sel", "delta_pp"]
    assert len(lines) == 2 + len(DEMO_DEPLOYMENTS) and "" not in lines
    # The measured table's names of its columns; the difference in percentage points.
    figures = r"\d+\.\d% +0\.\d{3} +0\.\d{3} +[+-]\d+\.\d"
    assert re.fullmatch(rf"sim-careful +rule_mix:p_r=0\.7\S* +{figures}", lines[2]), lines


def test_the_files_written_are_one_to_a_line_where_their_list_does_not_fit(
    tmp_path: Path,
) -> None:
    written = [tmp_path / name for name in ("selection.json", "selection.md", "forest.png")]
    removed = [tmp_path / name for name in ("fpop_fsel.png", "gap_vs_accuracy.png")]
    wide = outputs_lines(written, removed, width=1000)
    assert wide == [
        "",
        "wrote " + ", ".join(map(str, written)),
        "removed the earlier selection's figures (no figures drawn this time): "
        + ", ".join(map(str, removed)),
    ]
    narrow = outputs_lines(written, removed, width=80)
    assert narrow == [
        "",
        *(f"wrote {p}" for p in written),
        "removed the earlier selection's figures (no figures drawn this time):",
        *(f"  {p}" for p in removed),
    ]


@pytest.mark.parametrize("columns", [80, 60])
def test_selection_names_each_file_it_wrote_on_a_line_of_its_own(
    tmp_path: Path,
    columns: int,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    counts = tmp_path / "counts.csv"
    counts.write_text(COUNTS, encoding="utf-8")
    out = tmp_path / "sel"
    monkeypatch.setenv("COLUMNS", str(columns))
    assert main(["selection", "--counts", str(counts), "--out", str(out)]) == 0
    wrote = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("wrote ")]
    # The page, its JSON and the figures (each a PNG, with its SVG and PDF beside it).
    files = sorted(p for p in out.iterdir() if p.suffix in (".json", ".md", ".png"))
    assert len(files) >= 3
    # Each line names one file whole (a path longer than the line is left whole).
    assert sorted(Path(ln.removeprefix("wrote ")) for ln in wrote) == files
    assert all(len(ln) <= columns or ln.count(str(out)) == 1 for ln in wrote)


@pytest.mark.slow
@pytest.mark.parametrize("columns", [80, 60])
def test_the_selection_demo_fits_the_terminal_but_for_its_paths(
    tmp_path: Path,
    columns: int,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # Its closed-form predictions were 108 columns, its list of files written 290.
    out = tmp_path / "demo"
    monkeypatch.setenv("COLUMNS", str(columns))
    argv = ["demo", "--study", "selection", "--out", str(out), "--quiet", "--no-figures"]
    assert main(argv) == 0
    printed = capsys.readouterr().out.splitlines()
    assert not _too_long(printed, columns, (out,)), printed  # a path is left whole
    eval_dir = out.resolve() / "selection" / "run" / "eval"
    wrote = [ln for ln in printed if ln.startswith("wrote ")]
    assert wrote == [f"wrote {eval_dir / n}" for n in ("selection.json", "selection.md")]
    predictions = printed.index("Closed-form predictions on this task mix:")
    names = list(DEMO_DEPLOYMENTS)
    rows = [ln for ln in printed[predictions:] if ln.split(" ", 1)[0] in names]
    assert len(rows) == 2 * len(names)  # two tables, each naming every deployment
