"""``cotaudit compare``'s model table shows each figure with the interval its report computed,
as report.md does, and shows none where the report has none (``evaluate --n-boot 0``)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest

from cotaudit.cli import main
from evaluator.commands.compare import model_rows


def _report(run: Path) -> dict[str, Any]:
    report: dict[str, Any] = orjson.loads((run / "eval" / "report.json").read_bytes())
    return report


def _md_cells(page: str, label: str) -> dict[str, str]:
    """The first table's cells of the model ``label``, by column."""
    lines = [ln for ln in page.splitlines() if ln.startswith("| ")]
    header = [c.strip() for c in lines[0].strip("|").split("|")]
    (row,) = [ln for ln in lines if ln.startswith(f"| {label} |")][:1]
    return dict(zip(header, (c.strip() for c in row.strip("|").split("|")), strict=True))


def test_the_grounded_share_is_shown_with_its_reports_interval(
    swept_run: Callable[..., Path], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # The model table printed "98.3%" where report.md prints "98.3% [94.4, 100.0]": a reader
    # comparing two models' shares could not tell a difference from noise.
    run = swept_run(4)
    assert main(["evaluate", str(run), "--n-boot", "50", "--no-figures", "--quiet"]) == 0
    capsys.readouterr()
    out = tmp_path / "cmp"
    assert main(["compare", str(run), str(run), "--n-boot", "20", "--out", str(out)]) == 0
    terminal = capsys.readouterr().out
    page = (out / "comparison.md").read_text(encoding="utf-8")
    for name, section in _report(run)["models"].items():
        share = section["headline"]["found"]["A+A'"]["grounded_share"]
        low, high = section["rows"]["A_Ap_combined_full"]["ci_recall"]
        expected = f"{100 * share:.1f}% [{100 * low:.1f}, {100 * high:.1f}]"
        assert _md_cells(page, f"A {name}")["grounded"] == expected
        # The first of the model's lines: the table of what the audit found.
        line = next(ln for ln in terminal.splitlines() if ln.startswith(f"A {name} "))
        assert expected in line
    assert "(the A+A' row's recall interval)" in " ".join(page.split())


def test_without_intervals_no_grounded_cell_pretends_to_have_one(
    swept_run: Callable[..., Path], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    run = swept_run(2)
    assert main(["evaluate", str(run), "--n-boot", "0", "--no-figures", "--quiet"]) == 0
    capsys.readouterr()
    out = tmp_path / "cmp"
    assert main(["compare", str(run), str(run), "--n-boot", "0", "--out", str(out)]) == 0
    terminal = capsys.readouterr().out
    page = (out / "comparison.md").read_text(encoding="utf-8")
    for name in _report(run)["models"]:
        assert "[" not in _md_cells(page, f"A {name}")["grounded"]
        # The first of the model's lines: the table of what the audit found.
        line = next(ln for ln in terminal.splitlines() if ln.startswith(f"A {name} "))
        assert "[" not in line
    legend = " ".join(page.split())
    assert "*grounded*: share of the judged uses whose step changed (GROUNDED or " in legend
    assert "INPUT-SENSITIVE), without intervals (its run evaluated with" in legend
    assert "recall interval" not in legend


@pytest.mark.parametrize("ci", [None, [], [0.5], [None, None], "ab", [True, False]])
def test_a_malformed_or_missing_interval_is_shown_as_none(ci: Any) -> None:
    entry = {"f1": 0.5, "ci": ci}
    model = {
        "label": "A m",
        "problems": 3,
        "correct": 2,
        "ignored": 1,
        "judged": 4,
        "grounded_share": 0.75,
        "grounded_ci": ci,
        "rawr": 1,
        **{f: entry for f in ("f1_A_Ap_cascade_full", "f1_A_Ap_combined_full")},
        "f1_A_consistent_full": entry,
    }
    (_, row) = model_rows({"models": [model]})
    assert row[4] == "75.0%"
    assert row[6:] == ["0.500", "0.500", "0.500"]


def test_reports_bootstrapped_differently_are_said_to_be(
    swept_run: Callable[..., Path], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # One column of intervals, some from 50 resamples and some from 20: the page gave one
    # bootstrap line (this comparison's, for the differences) and nothing told the reader the
    # reports' own were of different precision.
    run = swept_run(4)
    evals = []
    for n_boot in ("50", "20"):
        out = tmp_path / f"eval-{n_boot}"
        argv = ["evaluate", str(run), "--out", str(out), "--n-boot", n_boot]
        assert main([*argv, "--no-figures", "--quiet"]) == 0
        evals.append(str(out))
    capsys.readouterr()
    cmp = tmp_path / "cmp"
    assert main(["compare", *evals, "--n-boot", "10", "--out", str(cmp)]) == 0
    terminal = " ".join(capsys.readouterr().out.split())
    page = (cmp / "comparison.md").read_text(encoding="utf-8")
    said = "the reports' own intervals come from different bootstraps: run A: 50 resamples"
    assert said in terminal and said in page
    assert "run B: 20 resamples" in page
    data = orjson.loads((cmp / "comparison.json").read_bytes())
    assert {m["bootstrap"]["n_boot"] for m in data["models"]} == {50, 20}
    # The same bootstrap on both sides: nothing to say.
    capsys.readouterr()
    assert main(["compare", evals[0], evals[0], "--n-boot", "0"]) == 0
    assert "different bootstraps" not in capsys.readouterr().out
