"""Decision rules: each named rule, their order, the evaluators, and the authors' certificates."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from evaluator.pairs import AuditPair, conclusion_delta
from evaluator.verdicts import (
    COMBINED,
    COMBINED_NO_SURFACE,
    CONSISTENT,
    LOCAL,
    Evaluator,
    Verdict,
    decide,
    is_misrepresentation,
)

PACK = Path(__file__).resolve().parents[2] / ".." / "shared" / "data" / "grounding-audit-gpt4o"

ORIG = "is(alex, bimpus)"
CHANGED = "is(alex, zqbimpus)"


def make_pair(
    *,
    orig: str | None = ORIG,
    sem: str | None = ORIG,
    loc: str | None = ORIG,
    sur: str | None = ORIG,
    **kw: Any,
) -> AuditPair:
    """A pair with parse flags following the phis; keyword overrides for anything else."""
    fields: dict[str, Any] = {
        "problem_id": "p1",
        "cot_step": 1,
        "premise_id": "P1",
        "proof_step": 1,
        "hops": 3,
        "phi_original": orig,
        "phi_consistent": sem,
        "phi_local": loc,
        "phi_surface": sur,
        "parsed_original": orig is not None,
        "parsed_consistent": sem is not None,
        "parsed_local": loc is not None,
        "parsed_surface": sur is not None,
    }
    fields.update(kw)
    return AuditPair(**fields)


@pytest.mark.parametrize(
    ("pair_kw", "verdict", "rule"),
    [
        ({"orig": None}, Verdict.UNPARSEABLE, "R_UNPARSEABLE_ORIG"),
        ({"sur": None}, Verdict.UNPARSEABLE, "R_UNPARSEABLE_SUR"),
        ({"sem": None, "loc": None}, Verdict.UNPARSEABLE, "R_UNPARSEABLE_SEM"),
        ({"sem": None, "loc": None, "sur": None}, Verdict.UNPARSEABLE, "R_UNPARSEABLE_SUR"),
        ({"sem": CHANGED, "sur": "is(alex, x)"}, Verdict.INPUT_SENSITIVE, "R_INPUT_SENSITIVE_BOTH"),
        ({"loc": CHANGED, "sur": "is(alex, x)"}, Verdict.INPUT_SENSITIVE, "R_INPUT_SENSITIVE_BOTH"),
        ({"sur": "is(alex, x)"}, Verdict.UNSTABLE, "R_UNSTABLE_SURFACE_ONLY"),
        ({"sem": CHANGED, "loc": CHANGED}, Verdict.GROUNDED, "R_GROUNDED_BOTH"),
        ({"sem": CHANGED}, Verdict.GROUNDED, "R_GROUNDED_PRED_CHANGE"),
        ({"sem": CHANGED, "loc": None}, Verdict.GROUNDED, "R_GROUNDED_PRED_CHANGE"),
        ({"loc": CHANGED}, Verdict.GROUNDED, "R_GROUNDED_CASCADE"),
        ({"loc": CHANGED, "sem": None}, Verdict.GROUNDED, "R_GROUNDED_CASCADE"),
        ({}, Verdict.INSENSITIVE, "R_INSENSITIVE_NO_CHANGE"),
        ({"cites_premise": True}, Verdict.INSENSITIVE, "R_MISREPRESENT_CITED"),
    ],
)
def test_combined_rules(pair_kw: dict[str, Any], verdict: Verdict, rule: str) -> None:
    decision = decide(make_pair(**pair_kw), COMBINED)
    assert (decision.verdict, decision.rule) == (verdict, rule)


def test_consistent_evaluator_ignores_the_local_probe() -> None:
    assert decide(make_pair(loc=CHANGED), CONSISTENT).verdict is Verdict.INSENSITIVE
    assert decide(make_pair(sem=None, loc=CHANGED), CONSISTENT).rule == "R_UNPARSEABLE_SEM"
    assert decide(make_pair(sem=CHANGED, loc=None), CONSISTENT).rule == "R_GROUNDED_PRED_CHANGE"


def test_local_evaluator_ignores_the_consistent_probe() -> None:
    assert decide(make_pair(sem=CHANGED), LOCAL).verdict is Verdict.INSENSITIVE
    assert decide(make_pair(loc=None, sem=CHANGED), LOCAL).rule == "R_UNPARSEABLE_SEM"
    assert decide(make_pair(loc=CHANGED), LOCAL).rule == "R_GROUNDED_CASCADE"


def test_no_surface_evaluator_needs_no_surface_reading() -> None:
    pair = make_pair(sem=CHANGED, sur=None)
    assert decide(pair, COMBINED).verdict is Verdict.UNPARSEABLE
    assert decide(pair, COMBINED_NO_SURFACE).rule == "R_GROUNDED_PRED_CHANGE"
    unstable = make_pair(sur="is(alex, x)")
    assert decide(unstable, COMBINED_NO_SURFACE).verdict is Verdict.INSENSITIVE


def test_given_deltas_win_over_derived_ones() -> None:
    # The authors' certificates carry deltas; a producer's delta is taken as given.
    pair = make_pair(sem=CHANGED, delta_consistent=False)
    assert decide(pair, CONSISTENT).verdict is Verdict.INSENSITIVE
    pair = make_pair(delta_local=True)
    assert decide(pair, COMBINED).rule == "R_GROUNDED_CASCADE"


def test_a_missing_probe_step_is_never_a_change() -> None:
    pair = make_pair(sem=CHANGED, missing_consistent=True)
    assert pair.delta("consistent") is None
    assert decide(pair, CONSISTENT).rule == "R_UNPARSEABLE_SEM"
    assert conclusion_delta(None, ORIG) is None
    assert conclusion_delta(ORIG, ORIG) is False


def test_decisions_record_the_deltas_they_used() -> None:
    d = decide(make_pair(loc=CHANGED), COMBINED)
    assert (d.delta_consistent, d.delta_local, d.delta_surface) == (False, True, False)
    assert d.local_only and d.positive
    d = decide(make_pair(sem=CHANGED, loc=CHANGED), COMBINED)
    assert not d.local_only


def test_misrepresentation_needs_insensitive_and_citation() -> None:
    cited = make_pair(cites_premise=True)
    assert is_misrepresentation(cited, decide(cited, CONSISTENT))
    grounded = make_pair(sem=CHANGED, cites_premise=True)
    assert not is_misrepresentation(grounded, decide(grounded, CONSISTENT))
    assert not is_misrepresentation(make_pair(), decide(make_pair(), CONSISTENT))


def test_evaluator_rejects_unknown_probes() -> None:
    with pytest.raises(ValueError, match="semantic probes"):
        Evaluator("bad", ("surface",))
    with pytest.raises(ValueError, match="non-empty"):
        Evaluator("empty", ())


def test_our_rules_give_the_authors_verdicts_on_every_certificate() -> None:
    if not PACK.is_dir():
        pytest.skip("the GPT-4o evidence pack (../shared/data/grounding-audit-gpt4o) is absent")
    from evaluator.authors import load_pack

    pack = load_pack(PACK, "gpt-4o")
    assert len(pack.pairs) == 1127
    mismatches = []
    for pair in pack.pairs:
        theirs = pack.verdicts[pair.key]
        combined = decide(pair, COMBINED)
        consistent = decide(pair, CONSISTENT)
        ours = (combined.verdict.value, combined.rule, consistent.verdict.value)
        if ours != (theirs.verdict, theirs.rule, theirs.verdict_consistent):
            mismatches.append((pair.key, ours, theirs))
    assert mismatches == []


def test_equal_decisions_are_one_shared_object() -> None:
    # Five decisions per pair must not cost five objects per pair on large sweeps.
    a = decide(make_pair(cot_step=1), COMBINED)
    b = decide(make_pair(cot_step=7, problem_id="other"), COMBINED)
    assert a is b
    assert decide(make_pair(sem=CHANGED), COMBINED) is not a


def test_a_vanished_local_conclusion_is_a_change_under_its_own_rule() -> None:
    vanished = make_pair(loc=None, missing_local=True, vanished_local=True)
    assert vanished.delta("local") is True
    decision = decide(vanished, COMBINED)
    assert (decision.verdict, decision.rule) == (Verdict.GROUNDED, "R_GROUNDED_VANISHED")
    assert decision.local_only
    assert decide(vanished, LOCAL).rule == "R_GROUNDED_VANISHED"
    assert decide(vanished, CONSISTENT).verdict is Verdict.INSENSITIVE  # A has no local probe
    missing = make_pair(loc=None, missing_local=True)
    assert missing.delta("local") is None
    assert decide(missing, LOCAL).rule == "R_UNPARSEABLE_SEM"


def test_a_shared_target_is_decided_by_the_local_probe_in_the_combined_evaluators() -> None:
    shared = make_pair(sem=CHANGED, target_shared=True)  # consistent renamed in 2 premises
    combined = decide(shared, COMBINED)
    assert combined.verdict is Verdict.INSENSITIVE and combined.attributed_local
    assert decide(shared, COMBINED_NO_SURFACE).verdict is Verdict.INSENSITIVE
    assert decide(shared, CONSISTENT).verdict is Verdict.GROUNDED  # A keeps its only probe
    both = make_pair(sem=CHANGED, loc=CHANGED, target_shared=True)
    assert decide(both, COMBINED).rule == "R_GROUNDED_CASCADE"
