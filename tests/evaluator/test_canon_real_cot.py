"""Readings of Llama-2-70B's and Mistral-7B's own sentences (``../shared/data/real-cot``),
each read against its problem's words as the evaluator and the survey read it."""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

import orjson
import pytest

from evaluator.canon import ParsedCot, parse_cot, split_cot_sentences
from evaluator.canon.vocabulary import vocabulary_from

DATA = Path(__file__).resolve().parents[2] / ".." / "shared" / "data"


@cache
def _records(model: str) -> dict[str, dict[str, Any]]:
    path = DATA / "real-cot" / f"{model}.json"
    if not path.exists():
        pytest.skip(f"real CoT data absent: {path} (see data/README.md)")
    return {str(r["id"]): r for r in orjson.loads(path.read_bytes())}


@cache
def _problems() -> dict[str, dict[str, Any]]:
    path = DATA / "prontoqa-500" / "dev.json"
    if not path.exists():
        pytest.skip(f"ProntoQA problems absent: {path} (see data/README.md)")
    return {str(p["id"]): p for p in orjson.loads(path.read_bytes())}


def _parsed(model: str, problem_id: str) -> tuple[ParsedCot, dict[str, Any]]:
    problem = _problems()[problem_id]
    # The question as the evaluator states it: "Is the following statement true or false?
    # Fae is not opaque." -> its last sentence names the individual.
    sentences = (*split_cot_sentences(str(problem["context"])), str(problem["question"]))
    text = str(_records(model)[problem_id]["predicted_reasoning"])
    return parse_cot(text, style="sentences", vocabulary=vocabulary_from(sentences)), problem


@pytest.mark.parametrize(
    ("model", "problem_id", "sentence", "prop"),
    [
        ("llama-2-70b", "ProntoQA_17", "Liquid is not opaque.", "not_subtype(liquid, opaque)"),
        ("llama-2-70b", "ProntoQA_143", "Liquid is transparent.", "subtype(liquid, transparent)"),
        ("llama-2-70b", "ProntoQA_374", "Feisty is aggressive.", "subtype(feisty, aggressive)"),
        ("mistral-7b", "ProntoQA_71", "Mean is not dull.", "not_subtype(mean, dull)"),
        ("mistral-7b", "ProntoQA_160", "Sour is not liquid.", "not_subtype(sour, liquid)"),
    ],
)
def test_a_property_as_the_subject_states_a_rule_not_a_claim_about_an_individual(
    model: str, problem_id: str, sentence: str, prop: str
) -> None:
    # "Wumpuses are liquid. So Fae is liquid. Liquid is not opaque. So Fae is not opaque.":
    # the model states that liquid things are not opaque; Liquid is no individual of the
    # problem (Fae is), so not_is(liquid, opaque) would be a claim about nobody.
    cot, _ = _parsed(model, problem_id)
    readings = {s.text: s.reading for s in cot.steps}
    assert readings[sentence].status == "assertion"
    assert str(readings[sentence].prop) == prop


@pytest.mark.parametrize("model", ["llama-2-70b", "mistral-7b"])
def test_every_individual_claim_is_about_an_individual_of_the_problem(model: str) -> None:
    wrong = []
    for problem_id in _records(model):
        cot, problem = _parsed(model, problem_id)
        individual = str(problem["question"]).rsplit("?", 1)[-1].split()[0].lower()
        for step in cot.steps:
            props = [c.prop for c in step.reading.clauses if c.prop is not None]
            wrong += [
                (problem_id, step.text, str(p))
                for p in props
                if p.kind in ("is", "not_is") and p.subject != individual
            ]
    assert wrong == []
