"""Splitting CoT text into steps and sentences, and reading the final answer."""

from __future__ import annotations

import pytest

from evaluator.canon import CotStep, extract_true_false_answer, split_cot_sentences, split_steps


def test_plain_steps_and_answer_line_ends_steps() -> None:
    text = "Step 1: Alex is a bempus.\nStep 2: So Alex is a bimpus.\n\nAnswer: True\nStep 3: x"
    assert split_steps(text) == [
        CotStep(1, "Alex is a bempus."),
        CotStep(2, "So Alex is a bimpus."),
    ]


@pytest.mark.parametrize(
    "line",
    [
        "**Step 1:** Alex is a bempus",
        "Step 1 - Alex is a bempus",
        "### Step 1: Alex is a bempus",
        "step 1. Alex is a bempus",
        "- **Step 1**: Alex is a bempus",
    ],
)
def test_step_header_variants(line: str) -> None:
    assert split_steps(line) == [CotStep(1, "Alex is a bempus")]


def test_multi_line_step_is_joined_and_preamble_dropped() -> None:
    text = (
        "Let me think.\nStep 1: Since bempuses are bimpuses\nand Alex is a bempus,\n"
        "Alex is a bimpus."
    )
    assert split_steps(text) == [
        CotStep(1, "Since bempuses are bimpuses and Alex is a bempus, Alex is a bimpus.")
    ]


def test_numbered_list_fallback_only_without_step_headers() -> None:
    assert split_steps("1. Alex is a bempus.\n2) Alex is a bimpus.") == [
        CotStep(1, "Alex is a bempus."),
        CotStep(2, "Alex is a bimpus."),
    ]


def test_premises_restated_as_a_numbered_list_before_the_numbered_steps_are_not_steps() -> None:
    cot = (
        "The premises are:\n1. Every cat is a feline.\n2. Max is a cat.\n3. Felines are "
        "carnivores.\n\nReasoning:\n1. Max is a cat.\n2. So Max is a feline.\n\nAnswer: True"
    )
    assert split_steps(cot) == [CotStep(1, "Max is a cat."), CotStep(2, "So Max is a feline.")]
    # Numbering that does not start again keeps every line, wherever it starts.
    assert [s.number for s in split_steps("2. Max is a cat.\n3. So Max is a feline.")] == [2, 3]


def test_a_list_numbered_one_throughout_is_numbered_in_order() -> None:
    # Markdown numbers "1. ... 1. ... 1. ..." itself; a model that writes it means 1, 2, 3.
    steps = split_steps("1. Max is a cat.\n1. So Max is a feline.\n1. So Max is a carnivore.")
    assert [(s.number, s.text) for s in steps] == [
        (1, "Max is a cat."),
        (2, "So Max is a feline."),
        (3, "So Max is a carnivore."),
    ]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Step 1: x\n\nAnswer: True", True),
        ("Answer: False", False),
        ("**Answer:** false", False),
        ("answer: TRUE (Alex is a bimpus)", True),
        ("Final answer: True", True),
        ("Answer: The statement is False.", False),
        ("Answer: True\n...\nAnswer: False", False),
        ("The answer is: False", False),
        ("Answer: No", False),
        ("**Answer:** No, Juno is not a ruminant.", False),
        ("Answer: Yes", True),
        ("Answer: $\\boxed{False}$", False),
        ("So the final answer is \\boxed{\\text{True}}.", True),
        ("I would not say no. Answer: True", True),
        ("no", None),
        ("Step 1: the answer depends on it", None),
        ("It is true that Alex is a bempus.", None),
        ("", None),
    ],
)
def test_extract_answer(text: str, expected: bool | None) -> None:
    assert extract_true_false_answer(text) is expected


def test_split_sentences_keeps_a_truncated_tail() -> None:
    assert split_cot_sentences("Max is a yumpus. So Max is dumpus.\n\nThe") == [
        "Max is a yumpus.",
        "So Max is dumpus.",
        "The",
    ]
