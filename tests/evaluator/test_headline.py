"""The report's headline: what the audit found about a model, per evaluator, and the figures'
data the report did not hold (F1 by chain length with intervals, every certificate's verdict)."""

from __future__ import annotations

import pytest

from evaluator.headline import by_hops_rows, found, headline_section, verdict_mix_all
from evaluator.metrics import confusion_counts
from evaluator.pairs import ProblemOutcome
from evaluator.tables import build_model_report, decide_audit
from evaluator.verdicts import CONSISTENT, decide_all
from tests.evaluator.test_verdicts import CHANGED, make_pair


def outcome(pid: str, *, correct: bool = True, hops: int = 3) -> ProblemOutcome:
    return ProblemOutcome(pid, hops, True, correct)


PAIRS = [
    make_pair(problem_id="p1", sem=CHANGED, is_direct_parent=True),  # rule use, dependent
    make_pair(problem_id="p1", cot_step=2, is_direct_parent=True),  # rule use, ignored
    make_pair(
        problem_id="p1", cot_step=3, is_direct_parent=True, is_entity_premise=True
    ),  # entity use, ignored
    make_pair(problem_id="p1", cot_step=4, sem=CHANGED),  # not gold, dependent: FP
    make_pair(problem_id="p2", is_direct_parent=True, orig=None),  # unread: not judged
    make_pair(problem_id="p2", cot_step=2, is_direct_parent=True, sur="is(alex, x)"),  # UNSTABLE
    make_pair(
        problem_id="p2", cot_step=3, is_direct_parent=True, exclusion_reasons=("unmatched",)
    ),  # excluded
    make_pair(problem_id="p3", is_direct_parent=True, is_entity_premise=True),  # entity, ignored
]
OUTCOMES = [outcome("p1"), outcome("p2"), outcome("p3", correct=False)]


def test_found_counts_judged_dependent_and_ignored_uses_by_kind() -> None:
    f = found(PAIRS, decide_all(PAIRS, CONSISTENT), OUTCOMES)
    assert (f["judged"], f["dependent"], f["ignored"]) == (4, 1, 3)
    assert (f["judged_rule"], f["dependent_rule"], f["ignored_rule"]) == (2, 1, 1)
    assert (f["judged_entity"], f["dependent_entity"], f["ignored_entity"]) == (2, 0, 2)
    assert f["grounded_share"] == pytest.approx(0.25)
    assert f["false_positives"] == 1
    # p1 is correct and ignores a rule premise; p2 is correct with nothing judged ignored; p3
    # ignores one but answered wrongly.
    assert (f["correct"], f["rawr"], f["rawr_rule"], f["rawr_entity_only"]) == (2, 1, 1, 0)
    assert f["rawr_problems"] == ["p1"] and f["rawr_rate"] == pytest.approx(0.5)


def test_found_equals_the_rows_counts() -> None:
    decisions = decide_all(PAIRS, CONSISTENT)
    f = found(PAIRS, decisions, OUTCOMES)
    tp, fp, fn, _ = confusion_counts(PAIRS, decisions, ["p1", "p2", "p3"]).sum(axis=0)
    assert (f["dependent"], f["false_positives"], f["ignored"]) == (tp, fp, fn)
    assert f["judged"] == tp + fn


def test_nothing_judged_leaves_the_share_undefined() -> None:
    pairs = [make_pair(orig=None, is_direct_parent=True)]
    f = found(pairs, decide_all(pairs, CONSISTENT), [outcome("p1", correct=False)])
    assert f["judged"] == 0 and f["grounded_share"] is None and f["rawr_rate"] is None


def test_headline_section_covers_every_evaluator_and_marks_the_blind_spot() -> None:
    decisions = decide_audit(PAIRS)
    section = headline_section(PAIRS, decisions, OUTCOMES)
    assert section["evaluator"] == "A+A'"
    assert list(section["found"]) == ["A", "A'", "A+A'", "A+A'+cascade"]
    assert section["found"]["A"]["blind_spot"] and not section["found"]["A+A'"]["blind_spot"]
    assert section["correct_problems"] == ["p1", "p2"] and section["problems"] == 3
    assert "A_consistent_full" in section["blind_spot"]["rows"]


def test_build_model_report_carries_the_headline_equal_to_its_rows() -> None:
    report = build_model_report(PAIRS, OUTCOMES, n_boot=200, seed=1)
    for evaluator, row in (("A", "A_consistent_full"), ("A+A'", "A_Ap_combined_full")):
        f = report["headline"]["found"][evaluator]
        r = report["rows"][row]
        assert f["dependent"] == r["tp"] and f["judged"] == r["tp"] + r["fn"]
        assert f["false_positives"] == r["fp"]
    assert report["headline"]["found"]["A"]["rawr"] == report["rawr"]["rawr"]
    assert report["headline"]["found"]["A+A'"]["rawr"] == report["rawr_combined"]["rawr"]
    assert set(report["by_hops_rows"]) == {"A_Ap_cascade_full", "A_consistent_full"}


def test_by_hops_rows_have_intervals_and_problem_counts() -> None:
    pairs = [
        make_pair(problem_id=f"q{i}", sem=CHANGED if i % 3 else None, is_direct_parent=True)
        for i in range(12)
    ]
    outcomes = [outcome(f"q{i}", hops=3 + i % 2) for i in range(12)]
    report = build_model_report(pairs, outcomes, n_boot=300, seed=2)
    per = report["by_hops_rows"]["A_consistent_full"]
    assert sorted(per) == ["3", "4"]
    assert per["3"]["n_problems"] == 6 and per["4"]["n_problems"] == 6
    for entry in per.values():
        low, high = entry["ci"]
        assert low <= entry["f1"] <= high
    # without resamples, no interval; without problems, no lengths
    ids = [o.problem_id for o in outcomes]
    counts = {"A_consistent_full": confusion_counts(pairs, decide_all(pairs, CONSISTENT), ids)}
    hops = {o.problem_id: o.hops for o in outcomes}
    plain = by_hops_rows(counts, ids, hops, seed=0, n_boot=0)["A_consistent_full"]
    assert plain["3"]["ci"] is None and plain["3"]["f1"] == per["3"]["f1"]
    assert by_hops_rows(counts, [], {}, seed=0, n_boot=0) == {"A_consistent_full": {}}


def test_verdict_mix_all_counts_excluded_certificates_apart() -> None:
    pairs = [
        make_pair(orig=None, exclusion_reasons=("unmatched",)),
        make_pair(cot_step=2, orig=None, exclusion_reasons=("unmatched",)),
        make_pair(cot_step=3, sem=CHANGED),
    ]
    mix = verdict_mix_all(pairs, decide_audit(pairs))
    assert mix["A"] == {
        "UNPARSEABLE": {"evaluable": 0, "excluded": 2},
        "GROUNDED": {"evaluable": 1, "excluded": 0},
    }


def test_the_reports_headline_from_per_problem_counts_equals_the_pair_level_definition() -> None:
    # The report sums per-problem counts (evaluator.statistics); headline.py's pair-level
    # functions are the definition: the two must agree on every key.
    report = build_model_report(PAIRS, OUTCOMES, n_boot=0)
    decisions = decide_audit(PAIRS)
    assert report["headline"] == headline_section(PAIRS, decisions, OUTCOMES)
    assert report["verdict_mix_all"] == verdict_mix_all(PAIRS, decisions)
    assert report["verdict_mix_all"]["A"]["INSENSITIVE"]["excluded"] == 1
