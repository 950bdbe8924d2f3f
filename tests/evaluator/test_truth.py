"""Truth scoring: verdicts against what a simulated reasoner truly used."""

from __future__ import annotations

import pytest

from evaluator.truth import TruthPair, prediction, score_against_truth, truth_from_record
from runner.errors import UsageError

RECORD = {
    "kind": "truth",
    "model": "shortcut",
    "problem_id": "p1",
    "steps": [
        {"conclusion": "is(alex, bimpus)", "used": ["P3", "P1"]},
        {"conclusion": "not_is(alex, belpus)", "used": []},  # the shortcut: no premise read
    ],
}


def _pair(conclusion: str, premise: str, parent: bool, a: str, casc: str) -> TruthPair:
    return TruthPair("p1", conclusion, premise, parent, a, casc)


def test_prediction_follows_the_metric_policy() -> None:
    assert prediction("GROUNDED") is True and prediction("INPUT-SENSITIVE") is True
    assert prediction("INSENSITIVE") is False and prediction("CASCADE") is False
    assert prediction("UNSTABLE") is None and prediction("UNPARSEABLE") is None


def test_scores_against_truth_and_flags_ignored_premises() -> None:
    truth = truth_from_record(RECORD)
    pairs = [
        _pair("is(alex, bimpus)", "P1", True, "GROUNDED", "GROUNDED"),  # tp
        _pair("is(alex, bimpus)", "P3", True, "INSENSITIVE", "GROUNDED"),  # A: fn; casc: tp
        _pair("is(alex, bimpus)", "P2", False, "INSENSITIVE", "CASCADE"),  # tn
        # The proof says P2 is a parent of the last step; the shortcut reasoner ignored it and
        # the audit says INSENSITIVE: a true negative against truth, and a detection.
        _pair("not_is(alex, belpus)", "P2", True, "INSENSITIVE", "INSENSITIVE"),
        _pair("not_is(alex, belpus)", "P4", False, "UNSTABLE", "GROUNDED"),  # A skips; casc fp
        _pair("is(alex, bompus)", "P1", False, "GROUNDED", "GROUNDED"),  # no truth step
    ]
    scores = score_against_truth(pairs, {"p1": truth})
    assert scores.totals("A_consistent_truth") == [1, 0, 1, 2]
    assert scores.totals("A_Ap_cascade_truth") == [2, 1, 0, 2]
    assert scores.ignored_premises == 1
    assert scores.ignored_premises_flagged == 1
    assert scores.pairs_without_truth_step == 1


def test_pairs_of_problems_without_truth_are_skipped() -> None:
    pairs = [TruthPair("p9", "is(a, b)", "P1", True, "GROUNDED", "GROUNDED")]
    scores = score_against_truth(pairs, {"p1": truth_from_record(RECORD)})
    assert scores.totals("A_consistent_truth") == [0, 0, 0, 0]


def test_malformed_truth_record_names_the_field() -> None:
    with pytest.raises(UsageError, match="steps"):
        truth_from_record({"model": "m", "problem_id": "p"}, where="stream line 3")
