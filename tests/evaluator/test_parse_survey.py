"""The native-style survey (Llama-2-70B, Mistral-7B on prontoqa-500) and its definitions."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from cotaudit.domain.proposition import parse_canonical
from evaluator.parse_survey import (
    follows,
    is_well_formed,
    native_report,
    survey_native,
    survey_pack,
    unparsed_category,
)

DATA = Path(__file__).resolve().parents[2] / ".." / "shared" / "data"


@pytest.mark.parametrize(
    ("sentence", "expected"),
    [
        ("So Max is dumpus.", True),
        ("Each yumpus is a dumpus.", True),
        ("Tumpuses are not sour.", True),
        ("Fruity things are not dull.", True),
        ("No balpus is a belpus.", True),
        ("Each large jompus is a zumpus.", False),  # compound subject: not one of the kinds
        ("So Max is", False),  # truncated
        ("Max is a yumpus and a dumpus.", False),
        ("Since Max is a yumpus, Max is a dumpus.", False),
        ("Is Max a yumpus?", False),
    ],
)
def test_well_formed_definition(sentence: str, expected: bool) -> None:
    assert is_well_formed(sentence) is expected


@pytest.mark.parametrize(
    ("sentence", "category"),
    [
        ("So Polly is", "truncated"),
        ("The correct option is A.", "answer_text"),
        ("Each large jompus is a zumpus.", "compound_subject"),
        ("Max is a wumpus, or a yumpus.", "compound_sentence"),
        ("Hmm.", "other"),
    ],
)
def test_unparsed_categories(sentence: str, category: str) -> None:
    assert unparsed_category(sentence) == category


def _problem() -> dict[str, Any]:
    return {
        "id": "P1",
        "context": "Max is a yumpus. Each yumpus is a dumpus. Dumpuses are sour. "
        "Wumpuses are bitter.",
        "explanation": [
            "Max is a yumpus.",
            "Each yumpus is a dumpus.",
            "Max is a dumpus.",
            "Dumpuses are sour.",
            "Max is sour.",
        ],
    }


def test_survey_native_counts_on_a_hand_made_output() -> None:
    outputs = [
        {
            "id": "P1",
            "predicted_reasoning": "Max is a yumpus. Each yumpus is a dumpus. So Max is dumpus. "
            "So Max is a wumpus. Each large jompus is a zumpus. So Max",
        }
    ]
    s = survey_native("m", outputs, [_problem()])
    # "So Max" was cut off by the token limit: classified (truncated), never an assertion.
    assert (s.sentences, s.parsed, s.well_formed, s.well_formed_parsed) == (6, 5, 4, 4)
    assert (s.derived, s.derived_in_gold) == (2, 1)  # "dumpus" is gold, "wumpus" is not
    assert s.derived_valid == 1  # "wumpus" follows from nothing
    assert s.unparsed_categories == {"compound_subject": 1}
    assert "| m | 1 | 6 | 5 (83.3%)" in native_report([s])


def test_a_word_the_problem_never_uses_is_no_assertion() -> None:
    outputs = [{"id": "P1", "predicted_reasoning": "Max is a yumpus. So Max is a wump."}]
    s = survey_native("m", outputs, [_problem()])
    assert (s.sentences, s.parsed, s.derived) == (2, 2, 0)


@pytest.mark.parametrize(
    ("prop", "expected"),
    [
        ("is(max, dumpus)", True),
        ("not_is(max, wooden)", True),
        ("is(max, wooden)", False),
        ("subtype(yumpus, sour)", True),
        ("is(sam, dumpus)", False),
    ],
)
def test_follows_is_one_modus_ponens_step(prop: str, expected: bool) -> None:
    known = {
        parse_canonical(p)
        for p in (
            "is(max, yumpus)",
            "subtype(yumpus, dumpus)",
            "not_subtype(yumpus, wooden)",
            "subtype(dumpus, sour)",
        )
    }
    assert follows(parse_canonical(prop), known) is expected


def test_survey_native_names_an_unknown_id() -> None:
    with pytest.raises(ValueError, match="'P9' has no problem"):
        survey_native("m", [{"id": "P9", "predicted_reasoning": ""}], [_problem()])


def test_survey_pack_names_a_wrong_directory(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="no pNNN problem folders"):
        survey_pack(tmp_path)


@pytest.mark.parametrize("model", ["llama-2-70b", "mistral-7b"])
def test_real_cot_well_formed_sentences_parse(model: str) -> None:
    path, dev = DATA / "real-cot" / f"{model}.json", DATA / "prontoqa-500" / "dev.json"
    if not (path.exists() and dev.exists()):
        pytest.skip(f"real CoT data absent: {path} or {dev} (see data/README.md)")
    s = survey_native(model, orjson.loads(path.read_bytes()), orjson.loads(dev.read_bytes()))
    assert s.problems == 500
    assert s.well_formed > 0.8 * s.sentences  # the definition covers the bulk of the text
    assert s.well_formed_rate >= 0.95, s.unparsed_examples
    assert s.parse_rate >= 0.95, s.unparsed_categories
    assert s.derived_in_gold > 0.4 * s.derived
