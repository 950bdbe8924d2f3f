from __future__ import annotations

import json
from pathlib import Path

import pytest

from cotaudit.domain.proposition import Proposition
from cotaudit.domain.sentences import (
    is_type_name,
    parse_premise,
    parse_premise_styled,
    render_premise,
    split_premise_sentences,
    surface_rephrase,
)


@pytest.mark.parametrize(
    ("text", "canonical", "style"),
    [
        ("Bempuses are bimpuses", "subtype(bempus, bimpus)", "plural"),
        ("Balpuses are not belpuses.", "not_subtype(balpus, belpus)", "plural"),
        ("Alex is a bempus", "is(alex, bempus)", "plural"),
        ("Alex is not a bempus.", "not_is(alex, bempus)", "plural"),
        ("Stella is an impus", "is(stella, impus)", "plural"),
        ("Each yumpus is a dumpus.", "subtype(yumpus, dumpus)", "each"),
        ("Every wumpus is an impus", "subtype(wumpus, impus)", "every"),
        ("Every tumpus is not angry.", "not_subtype(tumpus, angry)", "every"),
        ("Every X is not Y", "not_subtype(x, y)", "every"),
        ("Wumpuses are not feisty", "not_subtype(wumpus, feisty)", "plural"),
        ("Max is sour", "is(max, sour)", "plural"),
        ("Sally is nervous.", "is(sally, nervous)", "plural"),
        ("Max is not sour.", "not_is(max, sour)", "plural"),
        ("No balpus is a belpus", "not_subtype(balpus, belpus)", "no"),
        ("Alex is one of the bempuses", "is(alex, bempus)", "one_of"),
        ("All bempuses are bimpuses", "subtype(bempus, bimpus)", "all"),
        ("It is true that Max is sour", "is(max, sour)", "true_that"),
        ("  BEMPUSES   ARE BIMPUSES. ", "subtype(bempus, bimpus)", "plural"),
        ("Zqbimpuses are bompuses", "subtype(zqbimpus, bompus)", "plural"),
    ],
)
def test_parse_premise_forms(text: str, canonical: str, style: str) -> None:
    parsed = parse_premise_styled(text)
    assert parsed is not None
    assert str(parsed[0]) == canonical
    assert parsed[1] == style


@pytest.mark.parametrize(
    "text",
    ["", "Step 1: Since Alex is a bempus, Alex is a bimpus", "Each is a bimpus", "Hello world"],
)
def test_parse_premise_rejects_non_premises(text: str) -> None:
    assert parse_premise(text) is None


@pytest.mark.parametrize(
    ("prop", "style", "text"),
    [
        (Proposition("subtype", "bempus", "bimpus"), "plural", "Bempuses are bimpuses"),
        (Proposition("not_subtype", "balpus", "belpus"), "plural", "Balpuses are not belpuses"),
        (Proposition("is", "alex", "bempus"), "plural", "Alex is a bempus"),
        (Proposition("is", "alex", "impus"), "plural", "Alex is an impus"),
        (Proposition("not_is", "max", "sour"), "plural", "Max is not sour"),
        (Proposition("subtype", "yumpus", "dumpus"), "each", "Each yumpus is a dumpus"),
        (Proposition("not_subtype", "tumpus", "angry"), "every", "Every tumpus is not angry"),
        (Proposition("not_subtype", "balpus", "belpus"), "no", "No balpus is a belpus"),
        (Proposition("is", "alex", "bempus"), "one_of", "Alex is one of the bempuses"),
        (Proposition("subtype", "wumpus", "nervous"), "plural", "Wumpuses are nervous"),
        (Proposition("is", "max", "sour"), "true_that", "It is true that Max is sour"),
    ],
)
def test_render_premise(prop: Proposition, style: str, text: str) -> None:
    assert render_premise(prop, style) == text
    assert parse_premise(text) == prop


@pytest.mark.parametrize(
    ("prop", "style"),
    [
        (Proposition("subtype", "bempus", "bimpus"), "no"),
        (Proposition("is", "max", "sour"), "one_of"),
        (Proposition("is", "max", "sour"), "every"),
        (Proposition("subtype", "bempus", "bimpus"), "bogus"),
    ],
)
def test_render_premise_rejects_impossible_styles(prop: Proposition, style: str) -> None:
    with pytest.raises(ValueError, match=style):
        render_premise(prop, style)


@pytest.mark.parametrize(
    ("text", "rephrased"),
    [
        ("Bempuses are bimpuses", "Every bempus is a bimpus"),
        ("Balpuses are not belpuses", "No balpus is a belpus"),
        ("Alex is a bempus", "Alex is one of the bempuses"),
        ("Each yumpus is a dumpus", "Yumpuses are dumpuses"),
        ("Every tumpus is not angry", "No tumpus is angry"),
        ("Wumpuses are sour", "Every wumpus is sour"),
        ("Max is sour", "It is true that Max is sour"),
        ("No balpus is a belpus", "Balpuses are not belpuses"),
    ],
)
def test_surface_rephrase_preserves_meaning(text: str, rephrased: str) -> None:
    assert surface_rephrase(text) == rephrased
    assert parse_premise(rephrased) == parse_premise(text)


def test_is_type_name() -> None:
    assert is_type_name("bempus") and is_type_name("zqbimpus") and is_type_name("frondus")
    assert not is_type_name("nervous") and not is_type_name("sour")


def test_split_sentences() -> None:
    context = "Jompuses are not shy. Each yumpus is a dumpus.  Max is a yumpus."
    assert split_premise_sentences(context) == [
        "Jompuses are not shy",
        "Each yumpus is a dumpus",
        "Max is a yumpus",
    ]
    assert split_premise_sentences("") == []


def _all_real_sentences(data: Path) -> list[str]:
    sentences: list[str] = []
    for path in sorted((data / "grounding-audit-gpt4o/data/prontoqa_50").glob("p[0-9]*.json")):
        sentences += [p["text"] for p in json.loads(path.read_text())["premises"]]
    for record in json.loads((data / "prontoqa-500/dev.json").read_text()):
        sentences += split_premise_sentences(record["context"]) + record["explanation"]
    for hops in range(1, 6):
        for example in json.loads((data / f"prontoqa-native/{hops}hop.json").read_text()).values():
            test = example["test_example"]
            sentences += split_premise_sentences(test["question"]) + test["chain_of_thought"]
    return sentences


def test_every_real_sentence_parses_and_round_trips(
    pack_dir: Path, dev_json: Path, native_dir: Path
) -> None:
    sentences = _all_real_sentences(pack_dir.parent)
    assert len(sentences) > 15_000
    for text in sentences:
        parsed = parse_premise_styled(text)
        assert parsed is not None, text
        prop, style = parsed
        # Rendering in the style it was written in gives the sentence back.
        assert render_premise(prop, style) == text.rstrip("."), text
