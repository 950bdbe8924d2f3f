"""Report rendering (Markdown, summary, CSV), the published-rows loader, and figures."""

from __future__ import annotations

import copy
import csv
from pathlib import Path
from typing import Any

import pytest

from evaluator.figures import FORMATS, models_side_by_side, write_figures, write_report_figures
from evaluator.report import (
    FALSE_POSITIVES_SHOWN,
    load_published,
    metric,
    render_headline_table,
    render_markdown,
    render_summary,
    write_csv_tables,
)

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
            "truth": {
                "ignored_premises": 2,
                "ignored_premises_flagged": 2,
                "ignored_premises_flagged_cascade": 1,
            },
            "false_positives": [{"id": "m1/p1/S2/P1", "cause": "output variation"}],
            "headline": {
                "evaluator": "A+A'",
                "problems": 5,
                "found": {
                    "A+A'": {
                        "judged": 9,
                        "dependent": 7,
                        "ignored": 2,
                        "grounded_share": 7 / 9,
                        "judged_rule": 6,
                        "ignored_rule": 1,
                        "judged_entity": 3,
                        "ignored_entity": 1,
                        "correct": 4,
                        "rawr": 1,
                    },
                    "A": {"judged_entity": 3, "ignored_entity": 3, "rawr": 4, "correct": 4},
                },
            },
            "by_hops_rows": {
                "A_consistent_full": {
                    "3": {"f1": 0.5, "n_problems": 2, "tp": 1, "fp": 1, "fn": 1, "ci": [0.2, 0.8]},
                    "5": {"f1": 0.75, "n_problems": 1, "tp": 3, "fp": 1, "fn": 1, "ci": None},
                }
            },
            "verdict_mix_all": {
                "A": {
                    "GROUNDED": {"evaluable": 3, "excluded": 0},
                    "UNPARSEABLE": {"evaluable": 0, "excluded": 4},
                },
            },
        }
    }
}


def test_markdown_has_rows_cis_analyses_and_published_columns() -> None:
    published = {"m1": {"A_consistent_full": _row(0.806, 150, [0.76, 0.852])}}
    text = render_markdown(REPORT, published=published)
    line = next(x for x in text.splitlines() if x.startswith("| A consistent, full"))
    assert "0.812" in line and "[0.700, 0.900]" in line and "7/1/2/3" in line
    assert "0.806" in line and "150/1/2/3" in line  # the published columns beside ours
    assert "A' alone" in text and "| A+A' | n/a" not in text  # absent rows are left out
    assert "A consistent vs truth" in text and "ignored_premises_flagged" in text
    assert "2 of 4 correct answers" in text
    assert "- 1 × output variation\n  - m1/p1/S2/P1" in text
    assert "| local | 0.970 |" in text


def test_markdown_leads_with_what_the_audit_found_then_its_validity() -> None:
    text = render_markdown(REPORT)
    found = text.index("## What the audit found")
    validity = text.index("## The audit's validity against the proof tree")
    assert found < validity < text.index("## m1")
    line = next(x for x in text.splitlines() if x.startswith("| m1 | 4 of 5"))
    assert "| 1 of 6 | 1 of 3 | 77.8% | 1 of 4 |" in line
    # A's blind spot, each figure beside the same under A+A'
    assert "m1 3 of 3 entity-introduction uses ignored (under A+A' 1 of 3), RAWR 4 of 4" in text
    assert "† carries the blind spot of consistent substitution" in text
    assert "| 1 of 2 |" in text  # truly ignored, flagged by A+A'+cascade


def test_markdown_without_published_has_no_published_columns() -> None:
    assert "published" not in render_markdown(REPORT)


def test_terminal_table_leads_with_what_was_found_and_says_what_each_column_means() -> None:
    text = render_headline_table(REPORT, width=120)  # a terminal where it is one table
    lines = text.splitlines()
    assert "what the audit found (A+A')" in lines[0] and "validity" in lines[0]
    assert lines[1].split()[:5] == ["model", "correct", "ignored", "grounded", "RAWR"]
    row = next(x for x in lines if x.startswith("m1 "))
    assert "4 of 5" in row and "2 of 9" in row and "77.8%" in row and "1 of 4" in row
    assert "0.812 [0.700,0.900]" in row and "1 of 2" in row
    legend = {x.split()[0] for x in lines[4:] if x and not x.startswith(" ")}
    assert {"correct", "ignored", "grounded", "RAWR", "F1", "†", "truth"} <= legend
    assert "entity-introduction" in text
    assert max(len(x) for x in lines) <= 110


def test_summary_is_the_table_and_what_it_rests_on() -> None:
    text = render_summary(REPORT, width=120)  # a terminal where the table is one
    assert text.startswith(render_headline_table(REPORT, width=120))
    assert "m1: 10 of 12 certificates evaluable" in text and len(text.splitlines()) < 20


def test_a_row_without_gold_dependencies_is_undefined_everywhere(tmp_path: Path) -> None:
    empty = {"precision": 0.0, "recall": 0.0, "f1": 0.0, "tp": 0, "fp": 3, "fn": 0, "tn": 4}
    assert metric(empty, "f1") is None and metric(empty, "recall") is None
    assert metric(empty, "precision") == 0.0  # three predicted, none right: a real 0
    none_predicted = {"precision": 0.0, "recall": 0.0, "f1": 0.0, "tp": 0, "fp": 0, "fn": 2}
    assert metric(none_predicted, "precision") is None and metric(none_predicted, "f1") == 0.0
    report = {
        "models": {
            "m": {
                "rows": {"A_consistent_full": {**empty, "ci": [0.0, 0.0]}},
                "headline": {"found": {"A+A'": {"judged": 0, "grounded_share": None}}},
            }
        }
    }
    assert "0.000 [0.000, 0.000]" not in render_markdown(report)
    assert "| A consistent, full † | 0.000 | n/a | n/a | n/a | 0/3/0/4 |" in render_markdown(report)
    assert "0.000" not in render_headline_table(report).splitlines()[3]
    write_csv_tables(report, tmp_path)
    row = next(csv.DictReader((tmp_path / "rows.csv").read_text().splitlines()))
    assert (row["f1"], row["recall"], row["ci_low"], row["precision"]) == (
        "n/a",
        "n/a",
        "n/a",
        "0.0",
    )


def test_false_positive_lists_are_capped_with_the_full_list_in_csv(tmp_path: Path) -> None:
    fps = [
        {"id": f"m1/p{i}/S1/P1", "verdict": "GROUNDED", "cause": f"output variation; case {i}"}
        for i in range(40)
    ]
    report = {"models": {"m1": {**REPORT["models"]["m1"], "false_positives": fps}}}
    text = render_markdown(report)
    listed = [x for x in text.splitlines() if x.startswith("  - m1/p")]
    assert len(listed) == FALSE_POSITIVES_SHOWN
    assert "- 40 × output variation" in text and "false_positives.csv" in text
    write_csv_tables(report, tmp_path)
    rows = list(csv.DictReader((tmp_path / "false_positives.csv").read_text().splitlines()))
    assert [r["id"] for r in rows] == [fp["id"] for fp in fps]


def test_csv_tables(tmp_path: Path) -> None:
    paths = write_csv_tables(REPORT, tmp_path)
    assert [p.name for p in paths] == [
        "rows.csv",
        "parse_rates.csv",
        "by_hops.csv",
        "false_positives.csv",
    ]
    rows = list(csv.DictReader((tmp_path / "rows.csv").read_text().splitlines()))
    first = rows[0]
    assert (first["model"], first["row"], first["f1"], first["ci_low"]) == (
        "m1",
        "A_consistent_full",
        "0.8123",
        "0.7",
    )
    assert rows[1]["ci_low"] == "n/a"  # a row without interval
    hops = list(csv.DictReader((tmp_path / "by_hops.csv").read_text().splitlines()))
    assert [(h["row"], h["hops"]) for h in hops] == [
        ("A_consistent_full", "3"),
        ("A_consistent_full", "5"),
    ]
    assert (hops[0]["n_problems"], hops[0]["ci_low"], hops[1]["ci_low"]) == ("2", "0.2", "n/a")


def test_figures_come_in_three_formats_with_captions(tmp_path: Path) -> None:
    figures = write_figures("m1", REPORT["models"]["m1"], tmp_path)
    assert [f.name for f in figures] == ["m1_f1_ci.png", "m1_f1_by_hops.png", "m1_verdict_mix.png"]
    assert FORMATS == ("png", "svg", "pdf")
    for figure in figures:
        png, svg, pdf = (tmp_path / f for f in figure.files)
        assert png.read_bytes()[:4] == b"\x89PNG" and pdf.read_bytes()[:5] == b"%PDF-"
        assert b"<svg" in svg.read_bytes()[:400]
        assert figure.caption and "A′" in figure.caption  # abbreviations defined
        # 300 dpi: even a one-column figure (some 3.3 inches wide) is over 900 pixels
        width = int.from_bytes(png.read_bytes()[16:20], "big")
        assert width > 3 * 300, (figure.name, width)
    # the text stays text in the SVG (searchable, editable): the axis label is there
    assert "chain length" in (tmp_path / "m1_f1_by_hops.svg").read_text()
    assert "(n = 2)" in (tmp_path / "m1_f1_by_hops.svg").read_text()
    assert write_figures("empty", {}, tmp_path) == []
    # written twice, the files are the same (no dates in them)
    again = tmp_path / "again"
    again.mkdir()
    write_figures("m1", REPORT["models"]["m1"], again)
    for ext in ("svg", "pdf"):
        name = f"m1_verdict_mix.{ext}"
        assert (again / name).read_bytes() == (tmp_path / name).read_bytes(), name


def test_the_verdict_mix_shows_every_certificate_even_when_none_is_evaluable(
    tmp_path: Path,
) -> None:
    unread = {
        "verdict_mix": {"A": {"UNPARSEABLE": 0, "GROUNDED": 0}},  # evaluable pairs only: none
        "verdict_mix_all": {
            name: {"UNPARSEABLE": {"evaluable": 0, "excluded": 704}}
            for name in ("A", "A'", "A+A'", "A+A'+cascade")
        },
    }
    (figure,) = write_figures("unread", unread, tmp_path)
    svg = (tmp_path / "unread_verdict_mix.svg").read_text()
    assert "UNPARSEABLE" in svg and "excluded from the metrics" in svg and "704" in svg
    assert "704 excluded" in figure.caption


def test_figures_drawn_in_two_processes_are_the_files_one_process_draws(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import evaluator.figures as figures_module

    models = {f"m{i}": REPORT["models"]["m1"] for i in range(1, 5)}
    shared_dir, alone_dir = tmp_path / "shared", tmp_path / "alone"
    shared_dir.mkdir()
    alone_dir.mkdir()
    shared = write_report_figures(models, shared_dir)  # four models: two drawn by a child
    monkeypatch.setattr(figures_module, "SHARED_FIGURES_MIN_MODELS", len(models) + 1)
    alone = write_report_figures(models, alone_dir)
    assert shared == alone and list(shared[0]) == list(models)
    assert shared[1] is not None and len(shared[0]["m4"]) == 3
    names = sorted(p.name for p in alone_dir.iterdir())
    assert names == sorted(p.name for p in shared_dir.iterdir()) and len(names) == 3 * 13
    for name in names:
        assert (shared_dir / name).read_bytes() == (alone_dir / name).read_bytes(), name


def test_models_side_by_side_needs_two_models(tmp_path: Path) -> None:
    assert models_side_by_side({"m1": REPORT["models"]["m1"]}, tmp_path) is None
    two = {"m1": REPORT["models"]["m1"], "m2": REPORT["models"]["m1"]}
    figure = models_side_by_side(two, tmp_path)
    assert figure is not None and (tmp_path / "models_side_by_side.pdf").is_file()
    assert "2 of 9 ignored" in (tmp_path / "models_side_by_side.svg").read_text()


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


def test_the_terminal_gives_the_grounded_share_its_interval_as_report_md_does() -> None:
    # The terminal printed "77.8%" where report.md and compare print it with its interval
    # (the A+A' row's recall interval): two models' shares could not be told from noise.
    report = copy.deepcopy(REPORT)
    for model in report["models"].values():
        model["rows"]["A_Ap_combined_full"] = {**_row(0.7, 7), "ci_recall": [0.5, 0.9]}
    share = "77.8% [50.0, 90.0]"
    assert share in render_markdown(report)
    table = render_headline_table(report, width=120)
    assert share in next(x for x in table.splitlines() if x.startswith("m1 "))
    legend = " ".join(table.split())
    assert "with its 95% bootstrap interval over problems (the A+A' row's recall" in legend
