"""Self-consistency (raw samples and pack summaries) and string diff."""

from __future__ import annotations

import pytest

from cotaudit.domain.problem import Premise, Problem, ProofStep
from evaluator.baselines import (
    SampleStepSummary,
    self_consistency_counts,
    step_text_changed,
    string_diff_predictions,
    summarise_samples,
)
from tests.evaluator.test_verdicts import PACK, make_pair

A, B, C = "is(alex, bimpus)", "is(alex, bompus)", "not_is(alex, belpus)"


def test_summaries_from_raw_samples() -> None:
    samples: list[list[str | None]] = [
        [A, B, C],
        [A, B, C],
        [A, "is(alex, x)", C],
        [A, B, None],
        [A, B],
    ]
    out = summarise_samples(samples)
    assert [s.step for s in out] == [1, 2, 3]
    assert out[0] == SampleStepSummary(1, True, 1.0, A, 5)
    assert out[1].majority == B and out[1].agreement == pytest.approx(0.8) and out[1].consistent
    assert out[2].n_valid == 3 and out[2].consistent  # 3 of 3 parseable
    assert not summarise_samples([[A], [B]])[0].consistent  # 50% < 80%
    unread: list[list[str | None]] = [[None], [None]]
    assert summarise_samples(unread)[0] == SampleStepSummary(1, False, 0.0, None, 0)
    assert summarise_samples([[A], [B]])[0].majority == A  # tie: first seen
    with pytest.raises(ValueError, match="threshold"):
        summarise_samples(samples, threshold=0.0)


def problem() -> Problem:
    return Problem(
        problem_id="p1",
        premises=(
            Premise("P1", "Bempuses are bimpuses"),
            Premise("P2", "Bimpuses are bompuses"),
            Premise("P3", "Alex is a bempus"),
        ),
        question="Is Alex a bompus?",
        answer=True,
        proof=(
            ProofStep(1, A, ("P3", "P1")),
            ProofStep(2, B, ("S1", "P2")),
            ProofStep(3, C, ("S2",)),
        ),
    )


def test_self_consistency_predicts_all_or_no_premises_per_aligned_step() -> None:
    summaries = {
        "p1": [
            SampleStepSummary(1, True, 1.0, "is(alex, bempus)", 5),  # restatement: no proof step
            SampleStepSummary(2, True, 1.0, A, 5),  # consistent: predicts P1, P2, P3
            SampleStepSummary(3, False, 0.6, B, 5),  # inconsistent: predicts none
            SampleStepSummary(4, True, 1.0, C, 5),  # ambiguous with step 5: excluded
            SampleStepSummary(5, True, 1.0, C, 3),
        ]
    }
    counts, align = self_consistency_counts(
        {"p1": problem()}, summaries, ["p0", "p1"], {"p1": {"P3"}}
    )
    assert counts[0].tolist() == [0, 0, 0, 0]  # no summaries: all-zero row
    # proof step 1 (P3, P1 gold): tp 2, fp 1; proof step 2 (P2 gold): fn 1, tn 2
    assert counts[1].tolist() == [2, 1, 1, 2]
    assert (align.proof_steps_scored, align.proof_steps_ambiguous) == (2, 1)
    assert align.proof_steps_unmatched == 0
    pred, _ = self_consistency_counts(
        {"p1": problem()}, summaries, ["p1"], {"p1": {"P3"}}, gold="pred"
    )
    assert pred[0].tolist() == [1, 2, 1, 2]  # P3 is an entity premise: negative
    with pytest.raises(ValueError, match="no such problem"):
        self_consistency_counts({}, summaries, ["p1"], {})


def test_string_diff() -> None:
    assert step_text_changed("Alex is a bimpus.", "Alex  is a bimpus") is False
    assert step_text_changed("Alex is a bimpus.", "Alex is a zqbimpus.") is True
    assert step_text_changed(None, "x") is None
    pairs = [make_pair(text_changed=True), make_pair(text_changed=None)]
    assert string_diff_predictions(pairs) == [True, None]


def test_pack_summaries_reproduce_the_published_self_consistency_rows() -> None:
    if not PACK.is_dir():
        pytest.skip("the GPT-4o evidence pack (../shared/data/grounding-audit-gpt4o) is absent")
    from evaluator.authors import load_pack

    pack = load_pack(PACK, "gpt-4o")
    sc = pack.self_consistency
    assert sc is not None
    full, align = self_consistency_counts(
        sc.problems, sc.summaries, pack.problem_ids, sc.entity_premises
    )
    pred, _ = self_consistency_counts(
        sc.problems, sc.summaries, pack.problem_ids, sc.entity_premises, gold="pred"
    )
    assert full.sum(axis=0).tolist() == [148, 507, 59, 192]
    assert pred.sum(axis=0).tolist() == [116, 539, 42, 209]
    assert align.problems == 50
