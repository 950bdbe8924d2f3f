"""``cotaudit rescore`` reproduces the authors' tables from their own certificates."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from evaluator.commands.rescore import compare, published_rows, rescore
from runner.cli import main
from tests.evaluator.test_verdicts import PACK

EXACT_ROWS = (
    "A_consistent_full",
    "A_consistent_pred",
    "A_local_full",
    "A_Ap_combined_full",
    "A_Ap_no_surface_full",
    "A_Ap_cascade_full",
    "A_Ap_cascade_pred",
    "A_consistent_unstable_negative_full",
)
BASELINE_ROWS = ("self_consistency_full", "self_consistency_pred", "string_diff_full")


@pytest.fixture(scope="module")
def rescored() -> tuple[dict[str, Any], dict[str, Any]]:
    if not PACK.is_dir():
        pytest.skip("the GPT-4o evidence pack (../shared/data/grounding-audit-gpt4o) is absent")
    return rescore(PACK, "gpt-4o", seed=12345, n_boot=10_000)


@pytest.mark.parametrize("row", EXACT_ROWS)
def test_decision_rows_are_reproduced_count_for_count(
    rescored: tuple[dict[str, Any], dict[str, Any]], row: str
) -> None:
    report, published = rescored
    theirs = published_rows(published)[row]
    ours = report["rows"][row]
    assert {k: ours[k] for k in ("tp", "fp", "fn", "tn")} == {
        k: theirs[k] for k in ("tp", "fp", "fn", "tn")
    }
    assert ours["f1"] == pytest.approx(theirs["f1"], abs=5e-5)


@pytest.mark.parametrize("row", BASELINE_ROWS)
def test_baseline_rows_within_two_points_of_f1(
    rescored: tuple[dict[str, Any], dict[str, Any]], row: str
) -> None:
    report, published = rescored
    assert abs(report["rows"][row]["f1"] - published_rows(published)[row]["f1"]) <= 0.02


def test_lower_bound_matches_the_published_0_703(
    rescored: tuple[dict[str, Any], dict[str, Any]],
) -> None:
    report, published = rescored
    lb = report["rows"]["A_consistent_lower_bound_full"]
    theirs = published["final_report"]["analysis"]["lower_bound_A_consistent_full"]
    assert (lb["tp"], lb["fp"], lb["fn"]) == (theirs["tp"], theirs["fp"], theirs["fn"])
    assert lb["f1"] == pytest.approx(0.7026, abs=5e-5)


def test_bootstrap_intervals_within_0_01_of_the_published_ones(
    rescored: tuple[dict[str, Any], dict[str, Any]],
) -> None:
    report, published = rescored
    checked = 0
    for c in compare(report, published):
        if c.published_ci is None:
            continue
        checked += 1
        low, high = c.ours["ci"]
        assert abs(low - c.published_ci[0]) <= 0.01, c.row
        assert abs(high - c.published_ci[1]) <= 0.01, c.row
    assert checked == 5  # A full/pred, A+A', A+A'+cascade, self-consistency


def test_analyses_are_reproduced(rescored: tuple[dict[str, Any], dict[str, Any]]) -> None:
    report, published = rescored
    assert report["certificates"] == {"total": 1127, "evaluable": 1031}
    assert report["n_cascaded"] == 60
    rawr = report["rawr"]
    assert (rawr["rawr"], rawr["correct"], rawr["structural_only"], rawr["predicate"]) == (
        33,
        50,
        33,
        0,
    )
    assert report["misrepresentations"] == 30
    hops = {
        str(x["chain_length"]): x for x in published["final_report"]["analysis"]["chain_length"]
    }
    for h, ours in report["by_hops"].items():
        assert (ours["tp"], ours["fp"], ours["fn"]) == (
            hops[h]["tp"],
            hops[h]["fp"],
            hops[h]["fn"],
        )
        assert ours["n_problems"] == hops[h]["n_problems"]
    paired = report["paired"]["A_consistent_full_minus_self_consistency_full"]
    assert paired["ci"][0] > 0.3  # A beats self-consistency on every resample's 2.5%


def test_cli_prints_the_comparison_and_writes_report_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    if not PACK.is_dir():
        pytest.skip("the GPT-4o evidence pack (../shared/data/grounding-audit-gpt4o) is absent")
    out = tmp_path / "r" / "report.json"
    code = main(["rescore", str(PACK), "--model", "gpt-4o", "--n-boot", "200", "--json", str(out)])
    assert code == 0
    text = capsys.readouterr().out
    assert "A_Ap_cascade_full" in text and "DIFF" not in text
    data = orjson.loads(out.read_bytes())
    section = data["models"]["gpt-4o"]
    assert section["rows"]["A_consistent_full"]["tp"] == 150
    assert section["bootstrap"]["n_boot"] == 200
    assert all(section["published_comparison"]["counts_equal"].values())


def test_cli_names_a_missing_model(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["rescore", str(tmp_path), "--model", "nobody"])
    assert code == 2
    err = capsys.readouterr().err
    assert "nobody" in err and str(tmp_path) in err
