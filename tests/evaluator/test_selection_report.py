"""Rendering selection reports: precision of printed figures, degenerate reports, figures."""

from __future__ import annotations

import dataclasses
import warnings
from pathlib import Path

import orjson

from evaluator.selection import JointCounts, analyse
from evaluator.selection_report import (
    FIGURES,
    fmt_ci,
    fmt_p,
    fmt_pp,
    render_markdown,
    render_table,
    write_figures,
    write_json,
)


def test_number_formats_follow_the_seed_tables() -> None:
    assert fmt_pp(0.07358) == "+7.4" and fmt_pp(-0.0251) == "-2.5" and fmt_pp(0.0) == "0.0"
    assert fmt_pp(None) == "-"
    assert fmt_ci((0.0435, 0.1037)) == "[+4.3, +10.4]" and fmt_ci(None) == "N/A"
    assert fmt_p(0.0457) == "0.046" and fmt_p(0.00031) == "0.0003" and fmt_p(2e-6) == "<0.0001"
    assert fmt_p(2.1e-7, scientific=True) == "2.1e-07" and fmt_p(None) == "N/A"


def test_degenerate_report_renders_everywhere(tmp_path: Path) -> None:
    report = analyse(
        {
            "empty": JointCounts(0, 0, 0, 0),
            "never-right": JointCounts(0, 0, 4, 6),
            "ceiling": JointCounts(5, 5, 0, 0),
        },
        strata={"ceiling": {"1": JointCounts(5, 5, 0, 0)}},
        excluded={"empty": {"error": 3}},
    )
    table = render_table(report)
    assert "Ceiling controls" in table and "Excluded traces of empty: error: 3" in table
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        names = write_figures(report, tmp_path)
    assert names == list(FIGURES) and all((tmp_path / n).is_file() for n in names)
    md = render_markdown(report, names)
    assert "`f_sel` is null - no correct traces (a+b=0)" in md
    write_json(report, tmp_path / "s.json")
    data = orjson.loads((tmp_path / "s.json").read_bytes())
    assert data["pooled"]["cmh_or"] is None and data["pooled"]["reasons"]
    assert b"NaN" not in (tmp_path / "s.json").read_bytes()


def test_a_task_familys_gap_has_its_interval() -> None:
    # The by-family table gave Δ alone: +12.0 on 100 traces read as an effect whatever its
    # interval, where the table above gives every deployment's.
    cells = {"arith": JointCounts(50, 10, 20, 20), "circuit": JointCounts(30, 30, 20, 20)}
    report = dataclasses.replace(
        analyse({"m": JointCounts(80, 40, 40, 40)}),
        extra={"families": {"m": {f: dataclasses.asdict(c) for f, c in cells.items()}}},
    )
    page = render_markdown(report)
    family = page.split("## By task family")[1]
    assert "| Δ (pp) | 95% CI (pp) |" in family
    stats = analyse(cells).deployments
    for name, s in stats.items():
        assert s.delta is not None
        assert f"| m | {name} | 100 |" in family
        assert f"| {fmt_pp(s.delta)} | {fmt_ci(s.delta_ci)} |" in family


def test_the_leave_one_out_lines_give_a_small_p_as_a_number() -> None:
    # Strong effects in each deployment: every p below 0.0001, which the leave-one-out lines
    # printed as "p = <0.0001" where the pooled line above gives it in scientific notation.
    cells = {f"d{i}": JointCounts(400, 40, 100, 400) for i in range(3)}
    table = render_table(analyse(cells), width=200)
    lines = [line for line in table.splitlines() if line.strip().startswith("without ")]
    assert len(lines) == 3, table
    assert "= <" not in table
    assert all("e-" in line.rpartition("p = ")[2] for line in lines), lines
