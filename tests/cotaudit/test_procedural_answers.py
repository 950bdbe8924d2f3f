"""Answer extraction: robust to formatting, strict about values, failures named."""

from __future__ import annotations

import pytest

from cotaudit.domain.procedural_answers import extract_procedural_answer


@pytest.mark.parametrize(
    ("family", "text", "value"),
    [
        ("arith", "x = 3\nAnswer: 17", 17),
        ("arith", "**Answer:** -12.", -12),
        ("arith", "Answer: 1,024", 1024),
        ("arith", "final answer: 5", 5),
        ("arith", "Answer: 4\nWait, let me redo it.\nAnswer: 6", 6),
        ("arith", "ANSWER : `42`", 42),
        ("circuit", "Answer: 1", True),
        ("circuit", "answer: False", False),
        ("reachability", "Answer: Yes.", True),
        ("reachability", "Answer: **no**", False),
        ("reachability", "Answer: not reachable", False),
    ],
)
def test_reads_the_last_answer_line(family: str, text: str, value: int | bool) -> None:
    found = extract_procedural_answer(text, family)
    assert found.ok and found.value == value and type(found.value) is type(value)


@pytest.mark.parametrize(
    ("family", "text", "failure"),
    [
        ("arith", "", "empty text"),
        ("arith", None, "empty text"),
        ("arith", "The result is 12.", "no answer line"),
        ("arith", "Answer: about 12", "unreadable value"),
        ("arith", "Answer: 12 or 13", "unreadable value"),
        ("circuit", "Answer: 2", "unreadable value"),
        ("reachability", "Answer: maybe", "unreadable value"),
    ],
)
def test_failures_are_named_never_guessed(family: str, text: str | None, failure: str) -> None:
    found = extract_procedural_answer(text, family)
    assert not found.ok and found.value is None and found.failure == failure


def test_unknown_family_is_a_programming_error() -> None:
    with pytest.raises(ValueError, match="family"):
        extract_procedural_answer("Answer: 1", "sudoku")
