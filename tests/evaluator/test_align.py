"""Content alignment: CoT steps to proof steps, probe steps to proof steps (never by number)."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from cotaudit.domain.problem import ProofStep
from cotaudit.domain.proposition import Proposition, parse_canonical
from evaluator.align import (
    OriginalAlignment,
    align_original,
    align_probe,
    proof_conclusions,
    substitute,
)
from evaluator.canon import parse_cot, read_clause

PACK = Path(__file__).resolve().parents[2] / ".." / "shared" / "data" / "grounding-audit-gpt4o"

PROOF = (
    ProofStep(1, "is(alex, bimpus)", ("P4", "P1")),
    ProofStep(2, "is(alex, bompus)", ("S1", "P2")),
    ProofStep(3, "not_is(alex, bumpus)", ("S2", "P3")),
)
ORIGINAL = """Step 1: Alex is a bempus.
Step 2: Since bempuses are bimpuses and Alex is a bempus, Alex is a bimpus.
Step 3: Since bimpuses are bompuses, Alex is a bompus.
Step 4: Bompuses are not bumpuses, so Alex is not a bumpus.
Answer: False"""


def _cot(*steps: str) -> str:
    return "\n".join(f"Step {i}: {s}" for i, s in enumerate(steps, start=1)) + "\nAnswer: True"


@pytest.fixture
def original() -> OriginalAlignment:
    return align_original(parse_cot(ORIGINAL), PROOF)


def test_original_alignment_matches_by_conclusion(original: OriginalAlignment) -> None:
    assert [(m.cot_step, m.proof_step) for m in original.matches] == [(2, 1), (3, 2), (4, 3)]
    assert [(u.cot_step, u.reason) for u in original.unmatched] == [(1, "no_proof_step")]
    assert original.unaudited == ()
    assert not original.ambiguous
    assert original.cot_step_for(2) == 3
    assert original.proof_step_for(4) == 3
    assert original.matches[0].cot_index == 1


def test_unmatched_reasons_and_unaudited_steps() -> None:
    cot = parse_cot(
        _cot("if Alex were a bempus, Alex would be a bimpus", "Jomp", "Alex is a bompus")
    )
    result = align_original(cot, PROOF)
    assert [u.reason for u in result.unmatched] == ["non_assertion", "unparseable"]
    assert result.unaudited == (1, 3)


def test_a_proof_step_matched_twice_makes_the_problem_ambiguous() -> None:
    cot = parse_cot(_cot("Alex is a bimpus.", "So Alex is a bimpus."))
    result = align_original(cot, PROOF)
    assert result.ambiguous
    assert "S1 is matched by CoT steps 1, 2" in result.ambiguity[0]


def test_a_cot_step_matching_two_proof_steps_is_ambiguous() -> None:
    proof = (*PROOF, ProofStep(4, "is(alex, bimpus)", ("S3",)))
    result = align_original(parse_cot(ORIGINAL), proof)
    assert result.ambiguous
    assert any("matches proof steps S1, S4" in a for a in result.ambiguity)


def test_malformed_proof_conclusion_is_named() -> None:
    with pytest.raises(ValueError, match="proof step S2: conclusion 'Alex is' is not canonical"):
        proof_conclusions((ProofStep(2, "Alex is", ()),))


def test_probe_restating_premises_first_shifts_nothing(original: OriginalAlignment) -> None:
    probe = parse_cot(
        _cot(
            "Bempuses are zqbimpuses.",
            "Zqbimpuses are bompuses.",
            "Bompuses are not bumpuses.",
            "Alex is a bempus.",
            "Therefore, Alex is a zqbimpus.",
            "Therefore, Alex is a bompus.",
            "Therefore, Alex is not a bumpus.",
        )
    )
    result = align_probe(probe, original, PROOF, substitution={"bimpus": "zqbimpus"})
    assert [(m.proof_step, m.probe_step, m.rule) for m in result.matches] == [
        (1, 5, "substituted"),
        (2, 6, "exact"),
        (3, 7, "exact"),
    ]
    assert result.for_proof_step(1).conclusion == parse_canonical("is(alex, zqbimpus)")
    assert result.for_proof_step(1).probe_index == 4
    assert result.missing == ()


def test_changed_step_found_by_chain_position(original: OriginalAlignment) -> None:
    probe = parse_cot(
        _cot(
            "Since bempuses are bimpuses and Alex is a bempus, Alex is a bimpus.",
            "Bimpuses are bompuses, and bompuses are not bumpuses, so bimpuses are not bumpuses.",
            "Alex is not a bompus.",
            "So Alex is a bumpus.",
        )
    )
    result = align_probe(probe, original, PROOF, substitution={"bompus": "zqbompus"})
    assert [(m.probe_step, m.rule, str(m.conclusion)) for m in result.matches] == [
        (1, "exact", "is(alex, bimpus)"),
        (3, "chain_position", "not_is(alex, bompus)"),
        (4, "chain_position", "is(alex, bumpus)"),
    ]


def test_chain_position_needs_the_parent_and_skips_restatements(
    original: OriginalAlignment,
) -> None:
    probe = parse_cot(
        _cot(
            "Alex is a zqbempus.",
            "There is no information connecting zqbempuses to bempuses.",
            "Alex is a bempus.",
            "So Alex is not a bumpus.",
        )
    )
    premises = [Proposition("is", "alex", "zqbempus"), Proposition("is", "alex", "bempus")]
    result = align_probe(
        probe, original, PROOF, substitution={"bempus": "zqbempus"}, premises=premises
    )
    # S1 has no counterpart (both entity assertions are restatements), so S2 has no place
    # in the probe's chain; S3 is found by content.
    assert [(m.proof_step, m.rule) for m in result.matches] == [
        (1, "missing"),
        (2, "missing"),
        (3, "exact"),
    ]
    assert result.missing == (1, 2)
    with pytest.raises(KeyError):
        result.for_proof_step(9)


def test_premises_restated_in_the_original_never_fill_a_chain_position(
    original: OriginalAlignment,
) -> None:
    assert parse_canonical("is(alex, bempus)") in original.restatements
    assert parse_canonical("subtype(bempus, bimpus)") in original.restatements
    assert parse_canonical("is(alex, bimpus)") not in original.restatements  # a proof step
    probe = parse_cot(
        _cot(
            "Alex is a zqbempus, which implies she is a bempus.",
            "Since bimpuses are bompuses, Alex is a bompus.",
        )
    )
    result = align_probe(probe, original, PROOF, substitution={"bempus": "zqbempus"})
    assert [(m.proof_step, m.rule) for m in result.matches] == [
        (1, "missing"),
        (2, "exact"),
        (3, "missing"),
    ]


def test_hypothetical_probe_is_missing_not_changed(original: OriginalAlignment) -> None:
    probe = parse_cot(
        _cot(
            "Bempuses are bimpuses, so if Alex were a bempus, Alex would be a bimpus.",
            "we cannot determine whether Alex is a bumpus",
        )
    )
    result = align_probe(probe, original, PROOF)
    assert {m.rule for m in result.matches} == {"missing"}


def test_substitute_renames_both_names() -> None:
    prop = parse_canonical("subtype(bempus, bimpus)")
    assert str(substitute(prop, {"bimpus": "zqbimpus"})) == "subtype(bempus, zqbimpus)"


# The problems docs/alignment.md names: the authors' positional pairing turned restatements and
# rule-level steps into changes. Our content alignment must find the real counterpart.
SHIFTED = ("p004", "p013", "p014", "p018", "p026", "p031", "p034", "p042", "p048", "p049")


def _load(pid: str) -> tuple[tuple[ProofStep, ...], list[str], OriginalAlignment]:
    problem = orjson.loads((PACK / "data" / "prontoqa_50" / f"{pid}.json").read_bytes())
    proof = tuple(
        ProofStep(s["step"], s["conclusion"], tuple(s["depends_on"])) for s in problem["proof_tree"]
    )
    raw = orjson.loads((PACK / "evidence" / "gpt-4o" / pid / "original_cot.json").read_bytes())
    premises = [p["text"] for p in problem["premises"]]
    return proof, premises, align_original(parse_cot(raw["raw_response"]), proof)


@pytest.mark.skipif(not PACK.is_dir(), reason=f"evidence pack absent: {PACK}")
def test_p004_semantic_p1_restated_premises_are_not_changes() -> None:
    proof, _, original = _load("p004")
    raw = orjson.loads(
        (PACK / "evidence" / "gpt-4o" / "p004" / "probes" / "semantic_P1.json").read_bytes()
    )
    result = align_probe(
        parse_cot(raw["raw_response"]), original, proof, substitution=raw["substitution"]
    )
    assert [(m.probe_step, m.rule) for m in result.matches] == [
        (7, "substituted"),
        (8, "exact"),
        (9, "exact"),
        (10, "exact"),
        (11, "exact"),
    ]


@pytest.mark.skipif(not PACK.is_dir(), reason=f"evidence pack absent: {PACK}")
@pytest.mark.parametrize("pid", SHIFTED)
def test_positional_artefacts_of_the_authors_vanish(pid: str) -> None:
    proof, premises, original = _load(pid)
    folder = PACK / "evidence" / "gpt-4o" / pid
    artefacts = resolved = 0
    for path in sorted(folder.glob("probes/semantic_P*.json")):
        raw = orjson.loads(path.read_bytes())
        premise_id = path.stem.split("_")[1]
        props = [
            p
            for p in (
                read_clause(t) for t in premises + [m["text"] for m in raw["modified_premises"]]
            )
            if p is not None
        ]
        probe = parse_cot(raw["raw_response"])
        stated = {step.prop for step in probe.steps if step.prop is not None}
        result = align_probe(
            probe, original, proof, substitution=raw["substitution"], premises=props
        )
        for match in result.matches:
            cot_step = original.cot_step_for(match.proof_step)
            cert = orjson.loads(
                (folder / "certificates" / f"cert_S{cot_step}_{premise_id}.json").read_bytes()
            )
            if cert["phi_original"] is None or cert["phi_semantic"] is None:
                continue
            phi = parse_canonical(cert["phi_original"])
            expected = {phi, substitute(phi, raw["substitution"])}
            # An artefact: their probe phi is neither the conclusion nor its substituted form,
            # yet the probe output states one of those in some step.
            if parse_canonical(cert["phi_semantic"]) not in expected and expected & stated:
                artefacts += 1
                resolved += match.conclusion in expected
    assert artefacts > 0
    assert resolved == artefacts
