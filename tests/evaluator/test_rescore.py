"""``cotaudit rescore`` reproduces the authors' tables from their own certificates."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from cotaudit.cli import main
from evaluator.commands.rescore import (
    compare,
    our_scalars,
    published_rows,
    published_scalars,
    rescore,
)
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


def published_like(published: dict[str, Any]) -> dict[str, Any]:
    """The published analyses as our values would equal them: rates to 4 decimals."""
    return {
        k: pytest.approx(v, abs=5e-5) if k in ("parse_rates", "by_hops_f1") else v
        for k, v in published.items()
    }


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
    assert our_scalars(report) == published_like(published_scalars(published))
    paired = report["paired"]["A_consistent_full_minus_self_consistency_full"]
    assert paired["ci"][0] > 0.3  # A beats self-consistency on every resample's 2.5%


def test_cli_prints_the_comparison_and_writes_report_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    if not PACK.is_dir():
        pytest.skip("the GPT-4o evidence pack (../shared/data/grounding-audit-gpt4o) is absent")
    out = tmp_path / "report.json"
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
    write_pack(tmp_path, certificate())
    code = main(["rescore", str(tmp_path), "--model", "nobody"])
    assert code == 2
    err = capsys.readouterr().err
    assert "--model nobody: the pack has no evidence for model 'nobody'" in err
    assert "Name one of the pack's models: m." in err


def write_pack(root: Path, cert: dict[str, Any]) -> Path:
    """A one-problem, one-certificate pack in the evidence layout."""
    pdir = root / "evidence" / "m" / "p001"
    (pdir / "certificates").mkdir(parents=True)
    problem = {
        "problem_id": "p001",
        "premises": [
            {"id": "P1", "text": "Bempuses are bimpuses"},
            {"id": "P2", "text": "Alex is a bempus"},
        ],
        "question": "Is Alex a bimpus?",
        "answer": True,
        "proof_tree": [{"step": 1, "conclusion": "is(alex, bimpus)", "depends_on": ["P2", "P1"]}],
    }
    (pdir / "problem_meta.json").write_bytes(orjson.dumps(problem))
    (pdir / "original_cot.json").write_bytes(
        orjson.dumps({"raw_response": "Step 1: Alex is a bimpus.\n\nAnswer: True"})
    )
    (pdir / "certificates" / "cert_S1_P1.json").write_bytes(orjson.dumps(cert))
    return root


def certificate(**overrides: Any) -> dict[str, Any]:
    cert: dict[str, Any] = {
        "problem_id": "p001",
        "step_id": 1,
        "premise_id": "P1",
        "phi_original": "is(alex, bimpus)",
        "phi_semantic": "is(alex, zqbimpus)",
        "phi_local": None,
        "phi_surface": "is(alex, bimpus)",
        "semantic_delta": True,
        "local_delta": None,
        "surface_delta": False,
        "verdict": "GROUNDED",
        "decision_rule": "R_GROUNDED_PRED_CHANGE",
        "verdict_consistent": "GROUNDED",
        "alignment_sem": "MATCHED",
        "alignment_local": "MISSING_IN_PROBED",
        "alignment_sur": "MATCHED",
        "parse_ok_orig": True,
        "parse_ok_sem": True,
        "parse_ok_local": False,
        "parse_ok_sur": True,
        "citation_detected": False,
        "citation_type": "none",
        "citation_evidence": None,
        "cot_step_id": 1,
        "matched_proof_step_id": 1,
        "evaluation_excluded": False,
        "exclusion_reason": None,
        "primary_metric_excluded_problem": False,
        "primary_metric_exclusion_reason": None,
    }
    cert.update(overrides)
    return cert


def test_a_synthetic_pack_is_loaded_field_by_field(tmp_path: Path) -> None:
    from evaluator.authors import load_pack

    pack = load_pack(write_pack(tmp_path, certificate()), "m")
    (pair,) = pack.pairs
    assert pair.key == ("p001", 1, "P1")
    assert pair.is_direct_parent and not pair.is_entity_premise
    assert (
        pair.missing_local
        and not pair.missing_consistent
        and pair.align_consistent == "step_number"
    )
    assert pair.text_changed is True and pair.delta("consistent") is True
    assert pack.entity_premises["p001"] == frozenset({"P2"})
    (outcome,) = pack.outcomes
    assert outcome.answer_correct and outcome.unscored_deps_full == 0
    assert pack.self_consistency is None and pack.published == {}
    report, _ = rescore(tmp_path, "m", n_boot=20)
    assert report["rows"]["A_consistent_full"]["tp"] == 1
    assert "self_consistency_full" not in report["rows"]


def test_a_malformed_certificate_is_named_with_its_field(tmp_path: Path) -> None:
    from cotaudit.errors import UsageError
    from evaluator.authors import load_pack

    write_pack(tmp_path, certificate(parse_ok_sem="yes"))
    with pytest.raises(UsageError, match=r"cert_S1_P1\.json.*parse_ok_sem"):
        load_pack(tmp_path, "m")


def test_a_pack_without_published_tables_is_rescored_beside_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # No final_report.json: the published analyses are all missing, which is no difference
    # (it used to end in a TypeError comparing a rate with nothing).
    write_pack(tmp_path, certificate())
    assert main(["rescore", str(tmp_path), "--model", "m", "--n-boot", "0"]) == 0
    out = capsys.readouterr().out
    parse_rates = next(line for line in out.splitlines() if line.startswith("parse_rates"))
    assert "DIFF" not in parse_rates
