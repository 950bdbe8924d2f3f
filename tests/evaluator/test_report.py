"""Report rendering (Markdown, summary, CSV), the published-rows loader, and figures."""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

import pytest

from evaluator.figures import write_figures
from evaluator.report import load_published, render_markdown, render_summary, write_csv_tables

PACK = Path(__file__).resolve().parents[2] / ".." / "shared" / "data" / "grounding-audit-gpt4o"


def _row(f1: float, tp: int, ci: list[float] | None = None) -> dict[str, Any]:
    return {
        "precision": 0.5,
        "recall": 0.25,
        "f1": f1,
        "tp": tp,
        "fp": 1,
        "fn": 2,
        "tn": 3,
        "ci": ci,
    }


REPORT: dict[str, Any] = {
    "models": {
        "m1": {
            "rows": {
                "A_consistent_full": _row(0.8123, 7, [0.7, 0.9]),
                "A_local_full": _row(0.6, 5),
                "A_consistent_truth": _row(0.95, 9, [0.9, 1.0]),
            },
            "parse_rates": {"original": 0.99, "consistent": 1.0, "local": 0.97, "surface": 1.0},
            "certificates": {"total": 12, "evaluable": 10},
            "rawr": {"correct": 4, "rawr": 2, "structural_only": 2, "predicate": 0},
            "misrepresentations": 3,
            "by_hops": {"3": {"f1": 0.5, "n_problems": 2}, "5": {"f1": 0.75, "n_problems": 1}},
            "verdict_mix": {"A": {"GROUNDED": 3, "INSENSITIVE": 5}, "A+A'": {"GROUNDED": 4}},
            "truth": {"ignored_premises": 2, "ignored_premises_flagged": 2},
            "false_positives": [{"id": "m1/p1/S2/P1", "cause": "output variation"}],
        }
    }
}


def test_markdown_has_rows_cis_analyses_and_published_columns() -> None:
    published = {"m1": {"A_consistent_full": _row(0.806, 150, [0.76, 0.852])}}
    text = render_markdown(REPORT, published=published, figures={"m1": ["m1_f1_ci.png"]})
    line = next(x for x in text.splitlines() if x.startswith("| A consistent, full"))
    assert "0.812" in line and "[0.700, 0.900]" in line and "7/1/2/3" in line
    assert "0.806" in line and "150/1/2/3" in line  # the published columns beside ours
    assert "A' alone" in text and "| A+A' | n/a" not in text  # absent rows are left out
    assert "A consistent vs truth" in text and "ignored_premises_flagged" in text
    assert "2 of 4 correct answers" in text
    assert "m1/p1/S2/P1: output variation" in text
    assert "![m1_f1_ci](m1_f1_ci.png)" in text
    assert "| local | 0.970 |" in text


def test_markdown_without_published_has_no_published_columns() -> None:
    assert "published" not in render_markdown(REPORT)


def test_summary_is_short_and_names_the_headline() -> None:
    text = render_summary(REPORT)
    assert text.splitlines()[0] == "m1:"
    assert "F1 0.812 [0.700, 0.900]" in text
    assert "RAWR 2/4" in text and len(text.splitlines()) < 12


def test_csv_tables(tmp_path: Path) -> None:
    paths = write_csv_tables(REPORT, tmp_path)
    assert [p.name for p in paths] == ["rows.csv", "parse_rates.csv", "by_hops.csv"]
    rows = list(csv.DictReader((tmp_path / "rows.csv").read_text().splitlines()))
    first = rows[0]
    assert (first["model"], first["row"], first["f1"], first["ci_low"]) == (
        "m1",
        "A_consistent_full",
        "0.8123",
        "0.7",
    )
    assert rows[1]["ci_low"] == ""  # a row without interval
    hops = list(csv.DictReader((tmp_path / "by_hops.csv").read_text().splitlines()))
    assert [h["hops"] for h in hops] == ["3", "5"]


def test_figures_are_written_and_skipped_when_empty(tmp_path: Path) -> None:
    names = write_figures("m1", REPORT["models"]["m1"], tmp_path)
    assert names == ["m1_f1_ci.png", "m1_f1_by_hops.png", "m1_verdict_mix.png"]
    assert all((tmp_path / n).read_bytes()[:4] == b"\x89PNG" for n in names)
    assert write_figures("empty", {}, tmp_path) == []


def test_published_rows_of_the_pack() -> None:
    if not PACK.is_dir():
        pytest.skip("the GPT-4o evidence pack (../shared/data/grounding-audit-gpt4o) is absent")
    rows = load_published(PACK, "gpt-4o")
    assert rows is not None
    a = rows["A_consistent_full"]
    assert (a["tp"], a["fp"], a["fn"], a["tn"]) == (150, 39, 33, 674)
    assert a["ci"] == pytest.approx([0.7599, 0.8518])
    assert rows["A'_local_only"]["fp"] == 99  # ablation rows are loaded too
    assert load_published(PACK, "no-such-model") is None
