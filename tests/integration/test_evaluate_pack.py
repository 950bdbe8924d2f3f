"""import-evidence -> evaluate -> verify on GPT-4o's real evidence pack, and the comparison
with the authors' certificates (skipped with a reason when the pack is absent)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import orjson
import pytest

from cotaudit.cli import main
from evaluator.authors import load_pack
from evaluator.certificates import read_certificates
from evaluator.report import reconcile

PACK = Path(__file__).resolve().parents[2] / ".." / "shared" / "data" / "grounding-audit-gpt4o"


@pytest.fixture(scope="module")
def evaluated(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if not PACK.is_dir():
        pytest.skip("the GPT-4o evidence pack (../shared/data/grounding-audit-gpt4o) is absent")
    run = tmp_path_factory.mktemp("pack") / "run"
    assert main(["import-evidence", str(PACK), "--model", "gpt-4o", "--out", str(run)]) == 0
    assert main(["evaluate", str(run)]) == 0
    return run


def _model(run: Path) -> dict[str, Any]:
    report = orjson.loads((run / "eval" / "report.json").read_bytes())
    model: dict[str, Any] = report["models"]["gpt-4o"]
    return model


def test_parse_rates_meet_the_bar(evaluated: Path) -> None:
    rates = _model(evaluated)["parse_rates"]
    for condition in ("original", "consistent", "surface"):
        assert rates[condition] >= 0.98, (condition, rates)
    assert rates["local"] >= 0.97, rates


def test_at_most_five_false_positives_each_explained(evaluated: Path) -> None:
    model = _model(evaluated)
    row = model["rows"]["A_consistent_full"]
    assert row["fp"] <= 5
    assert len(model["false_positives"]) == row["fp"]
    assert all(fp["cause"] for fp in model["false_positives"])


def test_the_local_probe_evidence_keeps_a_and_a_prime_with_cascade_precise(
    evaluated: Path,
) -> None:
    """A+A'+cascade reads vanished local conclusions and stays at most 10 false positives."""
    model = _model(evaluated)
    row = model["rows"]["A_Ap_cascade_full"]
    assert row["fp"] <= 10, row
    assert row["recall"] > model["rows"]["A_consistent_full"]["recall"]  # entity premises seen
    assert model["vanished"]["pairs"] > 0
    assert model["vanished"]["cascaded"] >= 0.8 * model["vanished"]["grounded_by_vanished"]


def test_every_row_has_a_bootstrap_interval_and_counts_are_consistent(evaluated: Path) -> None:
    model = _model(evaluated)
    assert model["bootstrap"]["n_boot"] == 10_000
    for key, row in model["rows"].items():
        assert row["ci"][0] <= row["f1"] <= row["ci"][1], key
    assert model["certificates"]["total"] == 1127  # one per (CoT step, premise), as theirs
    assert model["self_consistency_alignment"]["problems"] == 50


def test_report_md_shows_our_table_beside_the_published_one(evaluated: Path) -> None:
    text = (evaluated / "eval" / "report.md").read_text()
    assert "published F1" in text
    assert "0.806" in text  # their A consistent, full F1
    assert "150/39/33/674" in text  # their counts
    # The verdicts resting on vanished local conclusions are shown apart.
    assert re.search(r"vanished local conclusions .*: \d+ pairs; GROUNDED by them", text)
    assert "right answer, wrong reasoning under A+A'" in text
    for png in ("gpt-4o_f1_ci.png", "gpt-4o_f1_by_hops.png", "gpt-4o_verdict_mix.png"):
        assert (evaluated / "eval" / png).stat().st_size > 1000


def test_verdicts_agree_with_the_authors_where_both_read_the_same_probe_steps(
    evaluated: Path,
) -> None:
    pack = load_pack(PACK, "gpt-4o")
    certs = [c for _, c in read_certificates(evaluated / "eval" / "certificates.jsonl")]
    result = reconcile(certs, {p.key: p for p in pack.pairs}, pack.verdicts)
    for field in ("verdict_consistent", "verdict", "verdict_cascade"):
        part = result[field]
        assert part["compared"] == 1127
        assert part["same_probe_steps"] >= 300
        assert part["same_probe_steps_agreement"] >= 0.99, part
        # Every difference has a named cause (never "other").
        assert not [c for c in part["causes"] if c.startswith("other")], part["causes"]


def test_verify_holds_on_the_pack(evaluated: Path) -> None:
    assert main(["verify", str(evaluated)]) == 0
