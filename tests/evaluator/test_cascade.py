"""The cascade filter: the paper's previous-step rule, its variants, and the pack's 60."""

from __future__ import annotations

import pytest

from evaluator.cascade import PAPER_CASCADE_MODE, apply_cascade, count_cascaded
from evaluator.pairs import AuditPair
from evaluator.verdicts import COMBINED, Verdict, decide_all
from tests.evaluator.test_verdicts import CHANGED, ORIG, PACK, make_pair


def chain(specs: list[tuple[int, int | None, str, str]]) -> list[AuditPair]:
    """Pairs of one (problem, premise) group: (cot_step, proof_step, sem, loc)."""
    return [
        make_pair(
            cot_step=s,
            proof_step=t,
            sem=sem,
            loc=loc,
            exclusion_reasons=() if t is not None else ("unmatched_cot_step",),
            parent_proof_steps=(t - 1,) if t and t > 1 else (),
        )
        for s, t, sem, loc in specs
    ]


def verdicts(pairs: list[AuditPair], mode: str = "previous_cot_step") -> list[Verdict]:
    out = apply_cascade(pairs, decide_all(pairs, COMBINED), mode=mode)  # type: ignore[arg-type]
    return [d.verdict for d in out]


def test_local_only_changes_below_a_local_change_cascade() -> None:
    pairs = chain(
        [
            (1, 1, CHANGED, CHANGED),  # the substituted step itself: both deltas
            (2, 2, ORIG, CHANGED),  # propagation: local only, parent changed -> CASCADE
            (3, 3, ORIG, CHANGED),  # parent is itself a cascade, still grounded locally
            (4, 4, ORIG, ORIG),
        ]
    )
    assert verdicts(pairs) == [
        Verdict.GROUNDED,
        Verdict.CASCADE,
        Verdict.CASCADE,
        Verdict.INSENSITIVE,
    ]
    out = apply_cascade(pairs, decide_all(pairs, COMBINED))
    assert out[1].rule == "R_CASCADE_FILTERED"
    assert count_cascaded(pairs, out) == 2


def test_a_consistent_change_or_an_unchanged_parent_is_kept() -> None:
    pairs = chain([(1, 1, ORIG, ORIG), (2, 2, ORIG, CHANGED), (3, 3, CHANGED, CHANGED)])
    assert verdicts(pairs) == [Verdict.INSENSITIVE, Verdict.GROUNDED, Verdict.GROUNDED]


def test_groups_are_per_problem_and_premise() -> None:
    a = chain([(1, 1, CHANGED, CHANGED)])
    b = [make_pair(cot_step=2, proof_step=2, loc=CHANGED, premise_id="P2")]
    assert verdicts(a + b) == [Verdict.GROUNDED, Verdict.GROUNDED]


def test_previous_cot_step_counts_unaligned_steps_but_aligned_variant_skips_them() -> None:
    pairs = chain([(1, 1, CHANGED, CHANGED), (2, None, ORIG, ORIG), (3, 2, ORIG, CHANGED)])
    assert verdicts(pairs, "previous_cot_step")[2] is Verdict.GROUNDED
    assert verdicts(pairs, "previous_aligned_step")[2] is Verdict.CASCADE
    # The paper's rule: an unaligned restatement above a local-only change is its parent.
    pairs = chain([(1, None, ORIG, CHANGED), (2, 1, ORIG, CHANGED)])
    assert verdicts(pairs, "previous_cot_step")[1] is Verdict.CASCADE
    assert verdicts(pairs, "previous_aligned_step")[1] is Verdict.GROUNDED


def test_evaluate_takes_the_previous_aligned_step_and_rescore_the_papers_rule() -> None:
    """End to end an unaligned step (a restatement, a comment) is never positive, so under the
    paper's rule the local-only change right after it could never be cascaded; `evaluate`
    takes the closest earlier aligned step instead, as the protocol words it (docs/
    decision-layer.md), while `rescore` keeps the paper's rule for the authors' own pairs."""
    import argparse

    from evaluator.commands.rescore import add_arguments
    from evaluator.pipeline import EvaluateOptions

    pairs = chain([(1, 1, CHANGED, CHANGED), (2, None, ORIG, ORIG), (3, 2, ORIG, CHANGED)])
    assert verdicts(pairs, EvaluateOptions().audit_settings.cascade_mode)[2] is Verdict.CASCADE
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    rescore_default = parser.parse_args(["PACK"]).cascade_mode
    assert rescore_default == PAPER_CASCADE_MODE
    assert verdicts(pairs, rescore_default)[2] is Verdict.GROUNDED


def test_dag_parent_follows_the_proof_tree() -> None:
    # CoT order 1, 2, 3 but step 3's proof parent is proof step 1, not the previous step.
    pairs = [
        make_pair(cot_step=1, proof_step=1, sem=CHANGED, loc=CHANGED),
        make_pair(cot_step=2, proof_step=2, parent_proof_steps=()),
        make_pair(cot_step=3, proof_step=3, loc=CHANGED, parent_proof_steps=(1,)),
    ]
    assert verdicts(pairs, "previous_cot_step")[2] is Verdict.GROUNDED
    assert verdicts(pairs, "dag_parent")[2] is Verdict.CASCADE


def test_bad_arguments_are_named() -> None:
    pairs = chain([(1, 1, ORIG, ORIG)])
    with pytest.raises(ValueError, match="1 pairs but 0 decisions"):
        apply_cascade(pairs, [])
    with pytest.raises(ValueError, match="mode must be one of"):
        apply_cascade(pairs, decide_all(pairs), mode="sideways")  # type: ignore[arg-type]


def test_pack_cascades_60_with_the_paper_rule() -> None:
    if not PACK.is_dir():
        pytest.skip("the GPT-4o evidence pack (../shared/data/grounding-audit-gpt4o) is absent")
    from evaluator.authors import load_pack

    pack = load_pack(PACK, "gpt-4o")
    combined = decide_all(pack.pairs, COMBINED)
    paper = apply_cascade(pack.pairs, combined, mode="previous_cot_step")
    aligned = apply_cascade(pack.pairs, combined, mode="previous_aligned_step")
    assert count_cascaded(pack.pairs, paper) == 60
    # p010 (P2): the unaligned step 1 is the parent of step 2 only under the paper's rule.
    assert count_cascaded(pack.pairs, aligned) == 59


def test_vanished_steps_cascade_along_the_proof_tree_whatever_the_mode() -> None:
    # Step 1 restates (unaligned); proof steps S1..S3 at CoT steps 2..4 all vanished under the
    # local probe of the entity premise: S1 keeps its change, S2 and S3 are downstream.
    def vanished(step: int, proof: int) -> AuditPair:
        return make_pair(
            cot_step=step,
            proof_step=proof,
            loc=None,
            missing_local=True,
            vanished_local=True,
            parent_proof_steps=(proof - 1,) if proof > 1 else (),
        )

    restatement = make_pair(cot_step=1, proof_step=None, exclusion_reasons=("unmatched",))
    pairs = [restatement, vanished(2, 1), vanished(3, 2), vanished(5, 3)]  # step 4 skipped
    for mode in ("previous_cot_step", "previous_aligned_step", "dag_parent"):
        got = verdicts(pairs, mode)
        assert got[1:] == [Verdict.GROUNDED, Verdict.CASCADE, Verdict.CASCADE], mode
