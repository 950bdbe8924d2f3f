"""Metric policy, per-problem counts, P/R/F1, lower bound, RAWR, misrepresentations, hops."""

from __future__ import annotations

import numpy as np
import pytest

from evaluator.metrics import (
    FN,
    FP,
    TN,
    TP,
    confusion_counts,
    counts_by_hops,
    lower_bound_counts,
    misrepresentations,
    prediction_counts,
    prf,
    rawr,
    scores,
)
from evaluator.pairs import ProblemOutcome
from evaluator.verdicts import CONSISTENT, Decision, Verdict, decide_all
from tests.evaluator.test_verdicts import CHANGED, make_pair

IDS = ["p1", "p2"]


def outcome(pid: str, *, correct: bool = True, hops: int = 3, unscored: int = 0) -> ProblemOutcome:
    return ProblemOutcome(pid, hops, True, correct, unscored, unscored)


def test_policy_counts_per_problem_and_skips() -> None:
    pairs = [
        make_pair(problem_id="p1", sem=CHANGED, is_direct_parent=True),  # tp
        make_pair(problem_id="p1", sem=CHANGED, cot_step=2),  # fp
        make_pair(problem_id="p2", is_direct_parent=True),  # fn
        make_pair(problem_id="p2", cot_step=2),  # tn
        make_pair(problem_id="p2", cot_step=3, orig=None, is_direct_parent=True),  # skipped
        make_pair(problem_id="p2", cot_step=4, sur="is(alex, x)"),  # UNSTABLE: skipped
        make_pair(problem_id="p2", cot_step=5, exclusion_reasons=("unmatched_cot_step",)),
    ]
    counts = confusion_counts(pairs, decide_all(pairs, CONSISTENT), IDS)
    assert counts.shape == (2, 4) and counts.dtype == np.int64
    assert counts.tolist() == [[1, 1, 0, 0], [0, 0, 1, 1]]
    # UNSTABLE negative instead of skipped (the authors' ablation "A alone" row).
    looser = confusion_counts(pairs, decide_all(pairs, CONSISTENT), IDS, skip={Verdict.UNPARSEABLE})
    assert looser[1, TN] == 2


def test_pred_gold_makes_entity_premises_negative() -> None:
    pairs = [
        make_pair(sem=CHANGED, is_direct_parent=True, is_entity_premise=True),
        make_pair(cot_step=2, is_direct_parent=True, is_entity_premise=True),
    ]
    decisions = decide_all(pairs, CONSISTENT)
    assert confusion_counts(pairs, decisions, ["p1"], gold="full").tolist() == [[1, 0, 1, 0]]
    assert confusion_counts(pairs, decisions, ["p1"], gold="pred").tolist() == [[0, 1, 0, 1]]
    with pytest.raises(ValueError, match="gold must be"):
        confusion_counts(pairs, decisions, ["p1"], gold="half")  # type: ignore[arg-type]


def test_unknown_problem_and_length_mismatch_are_named() -> None:
    pairs = [make_pair(problem_id="p9")]
    with pytest.raises(ValueError, match="p9"):
        prediction_counts(pairs, [True], IDS)
    with pytest.raises(ValueError, match="1 pairs but 2 predictions"):
        prediction_counts(pairs, [True, False], IDS)
    with pytest.raises(ValueError, match="once"):
        prediction_counts([], [], ["p1", "p1"])


def test_prf_convention_and_values() -> None:
    p, r, f = prf(np.array([0.0, 3.0]), np.array([0.0, 1.0]), np.array([0.0, 3.0]))
    assert p.tolist() == [0.0, 0.75] and r.tolist() == [0.0, 0.5]
    assert f[1] == pytest.approx(2 * 0.75 * 0.5 / 1.25)
    s = scores(np.array([[3, 1, 3, 5], [0, 0, 0, 2]]))
    assert (s.tp, s.fp, s.fn, s.tn) == (3, 1, 3, 7)
    assert s.f1 == pytest.approx(6 / 10)


def test_lower_bound_counts_skipped_gold_and_unscored_dependencies() -> None:
    pairs = [
        make_pair(sem=CHANGED, is_direct_parent=True),  # tp
        make_pair(cot_step=2, orig=None, is_direct_parent=True),  # unparseable gold -> fn
        make_pair(cot_step=3, sur="is(alex, x)", is_direct_parent=True),  # unstable gold -> fn
        make_pair(cot_step=4, orig=None),  # unparseable non-gold: still skipped
    ]
    decisions = decide_all(pairs, CONSISTENT)
    outcomes = [outcome("p1", unscored=2), outcome("p2")]
    counts = lower_bound_counts(pairs, decisions, outcomes, IDS)
    assert counts[0].tolist() == [1, 0, 4, 0]
    assert counts[1].tolist() == [0, 0, 0, 0]


def test_rawr_counts_correct_answers_with_ignored_gold_premises() -> None:
    pairs = [
        make_pair(problem_id="p1", is_direct_parent=True, is_entity_premise=True),
        make_pair(problem_id="p2", is_direct_parent=True, premise_id="P2"),
        make_pair(problem_id="p3", is_direct_parent=True),  # wrong answer: not RAWR
        make_pair(problem_id="p4", sem=CHANGED, is_direct_parent=True),  # grounded
    ]
    outcomes = [
        outcome("p1"),
        outcome("p2"),
        outcome("p3", correct=False),
        outcome("p4"),
        ProblemOutcome("p5", 3, True, None),  # no answer read: not correct
    ]
    result = rawr(pairs, decide_all(pairs, CONSISTENT), outcomes)
    assert (result.correct, result.rawr) == (3, 2)
    assert (result.structural_only, result.predicate) == (1, 1)
    assert result.rate == pytest.approx(2 / 3)
    assert [c.problem_id for c in result.cases] == ["p1", "p2"]


def test_misrepresentations_are_evaluable_insensitive_citing_pairs() -> None:
    pairs = [
        make_pair(cites_premise=True),
        make_pair(cot_step=2, cites_premise=True, sem=CHANGED),
        make_pair(cot_step=3, cites_premise=True, exclusion_reasons=("unmatched_cot_step",)),
    ]
    found = misrepresentations(pairs, decide_all(pairs, CONSISTENT))
    assert [p.cot_step for p in found] == [1]


def test_counts_by_hops_groups_problems() -> None:
    counts = np.array([[1, 0, 0, 1], [2, 1, 1, 0], [0, 0, 1, 0]], dtype=np.int64)
    out = counts_by_hops(counts, ["a", "b", "c"], {"a": 3, "b": 5, "c": 3})
    assert sorted(out) == [3, 5]
    n, s = out[3]
    assert n == 2 and (s.tp, s.fn) == (1, 1)
    assert out[5][1].fp == 1


def test_column_constants_match_layout() -> None:
    assert (TP, FP, FN, TN) == (0, 1, 2, 3)
    d = Decision(Verdict.CASCADE, "R_CASCADE_FILTERED")
    assert not d.positive


def test_vectorised_counts_equal_a_per_pair_reference() -> None:
    rng = np.random.default_rng(5)
    phis = [None, "is(alex, a)", "is(alex, b)"]
    pairs = []
    for i in range(400):
        pick = rng.integers(0, 3, size=4)
        pairs.append(
            make_pair(
                problem_id=f"p{i % 7}",
                cot_step=i,
                orig=phis[pick[0]],
                sem=phis[pick[1]],
                loc=phis[pick[2]],
                sur=phis[pick[3]],
                is_direct_parent=bool(rng.integers(0, 2)),
                is_entity_premise=bool(rng.integers(0, 2)),
                exclusion_reasons=("unmatched_cot_step",) if rng.random() < 0.1 else (),
            )
        )
    ids = [f"p{i}" for i in range(7)]
    decisions = decide_all(pairs, CONSISTENT)
    for gold in ("full", "pred"):
        expected = np.zeros((7, 4), dtype=np.int64)
        for pair, d in zip(pairs, decisions, strict=True):
            if pair.excluded or d.verdict in (Verdict.UNPARSEABLE, Verdict.UNSTABLE):
                continue
            truth = pair.gold_full if gold == "full" else pair.gold_pred
            col = (TP if truth else FP) if d.positive else (FN if truth else TN)
            expected[int(pair.problem_id[1:]), col] += 1
        got = confusion_counts(pairs, decisions, ids, gold=gold)
        assert np.array_equal(got, expected)
        assert expected.sum() > 50 and (expected.sum(axis=0) > 0).all()  # every column used
