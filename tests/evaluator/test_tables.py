"""build_model_report: the report.json model shape on small synthetic audits."""

from __future__ import annotations

import orjson
import pytest

from evaluator.baselines import SampleStepSummary, SelfConsistencyInput
from evaluator.pairs import AuditPair, ProblemOutcome
from evaluator.tables import PAIRED_KEY, REQUIRED_ROWS, build_model_report, decide_audit
from evaluator.verdicts import COMBINED, COMBINED_NO_SURFACE, CONSISTENT, LOCAL, decide_all
from tests.evaluator.test_baselines import problem
from tests.evaluator.test_verdicts import CHANGED, make_pair

ROW_FIELDS = {"precision", "recall", "f1", "tp", "fp", "fn", "tn", "ci"}


def audit() -> tuple[list[AuditPair], list[ProblemOutcome]]:
    pairs = []
    outcomes = []
    for i in range(6):
        pid = f"p{i}"
        grounded = i % 3 != 0
        pairs += [
            make_pair(problem_id=pid, sem=CHANGED if grounded else None, is_direct_parent=True),
            make_pair(problem_id=pid, premise_id="P2", is_direct_parent=True, cites_premise=True),
            make_pair(problem_id=pid, premise_id="P3", loc=CHANGED, text_changed=True),
            make_pair(problem_id=pid, cot_step=2, sem=CHANGED, loc=CHANGED, text_changed=False),
        ]
        outcomes.append(ProblemOutcome(pid, 3 + i % 2, True, i != 5, unscored_deps_full=1))
    return pairs, outcomes


def test_report_has_every_required_row_and_analysis() -> None:
    pairs, outcomes = audit()
    report = build_model_report(pairs, outcomes, seed=3, n_boot=500)
    assert set(REQUIRED_ROWS) - {"self_consistency_full"} <= set(report["rows"])
    assert "self_consistency_full" not in report["rows"]  # no SC input: row absent
    for row in report["rows"].values():
        assert set(row) >= ROW_FIELDS
        low, high = row["ci"]
        assert low <= row["f1"] <= high or row["tp"] == 0
    a = report["rows"]["A_consistent_full"]
    assert (a["tp"], a["fp"], a["fn"], a["tn"]) == (4, 6, 6, 6)
    assert report["rows"]["A_consistent_lower_bound_full"]["fn"] == 6 + 2 + 6
    assert report["certificates"] == {"total": 24, "evaluable": 24}
    assert report["misrepresentations"] == 6
    assert report["rawr"]["correct"] == 5 and report["rawr"]["rawr"] == 5
    assert set(report["by_hops"]) == {"3", "4"}
    assert report["bootstrap"]["seed"] == 3 and report["bootstrap"]["n_boot"] == 500
    assert report["paired"] == {}
    orjson.dumps(report)  # JSON-serialisable as is


def test_same_seed_same_intervals_and_no_bootstrap_option() -> None:
    pairs, outcomes = audit()
    a = build_model_report(pairs, outcomes, seed=9, n_boot=300)
    b = build_model_report(pairs, outcomes, seed=9, n_boot=300)
    assert a["rows"] == b["rows"]
    none = build_model_report(pairs, outcomes, n_boot=0)
    assert all(row["ci"] is None for row in none["rows"].values())
    with pytest.raises(ValueError, match="n_boot"):
        build_model_report(pairs, outcomes, n_boot=-1)


def test_intervals_do_not_depend_on_the_order_problems_completed_in() -> None:
    # Concurrent requests complete in any order, so the stream (and the pipeline's outcome
    # list) may hold the same problems in another order: the bootstrap must not notice.
    pairs, outcomes = [], []
    for i in range(12):  # problems that differ from each other, so that order could matter
        pid = f"p{i:02d}"
        for k in range(i % 5 + 1):
            sem = CHANGED if (i + k) % 3 else None
            pairs.append(
                make_pair(problem_id=pid, premise_id=f"P{k}", sem=sem, is_direct_parent=k < 2)
            )
        outcomes.append(ProblemOutcome(pid, 3, True, True))
    forward = build_model_report(pairs, outcomes, seed=9, n_boot=400)
    shuffled = build_model_report(pairs[::-1], outcomes[5:] + outcomes[:5], seed=9, n_boot=400)
    assert forward["rows"] == shuffled["rows"]
    assert forward["paired"] == shuffled["paired"]


def test_pipeline_slots_and_self_consistency_are_carried() -> None:
    pairs = [make_pair(problem_id="p1", sem=CHANGED, is_direct_parent=True)]
    outcomes = [ProblemOutcome("p1", 3, True, True)]
    sc = SelfConsistencyInput(
        {"p1": problem()},
        {"p1": [SampleStepSummary(1, True, 1.0, "is(alex, bimpus)", 5)]},
        {"p1": {"P3"}},
    )
    report = build_model_report(
        pairs,
        outcomes,
        self_consistency=sc,
        n_boot=50,
        alignment={"cot_steps": 3},
        parse_rates={"original": 1.0},
        non_assertions={"local": {"hypothetical": 2}},
    )
    assert report["alignment"] == {"cot_steps": 3}
    assert report["parse_rates"] == {"original": 1.0}
    assert report["non_assertions"] == {"local": {"hypothetical": 2}}
    assert report["rows"]["self_consistency_full"]["tp"] == 2
    assert set(report["paired"][PAIRED_KEY]) >= {"diff", "ci"}
    assert report["self_consistency_alignment"]["proof_steps_scored"] == 1


def test_pairs_of_unknown_problems_are_refused() -> None:
    with pytest.raises(ValueError, match="without a ProblemOutcome"):
        build_model_report([make_pair(problem_id="zz")], [], n_boot=0)


def test_decide_audit_gives_every_evaluator() -> None:
    pairs, _ = audit()
    d = decide_audit(pairs)
    assert len(d.consistent) == len(d.local) == len(d.combined) == len(d.cascaded) == len(pairs)
    assert d.no_surface[0].rule != "R_UNPARSEABLE_SUR"
    for evaluator, got in (
        (CONSISTENT, d.consistent),
        (LOCAL, d.local),
        (COMBINED, d.combined),
        (COMBINED_NO_SURFACE, d.no_surface),
    ):
        assert list(got) == decide_all(pairs, evaluator)
