from __future__ import annotations

import json
from pathlib import Path

import pytest

from cotaudit.domain.problem import Premise
from runner.tasks.prompts import parse_prompt, render_prompt

PREMISES = [Premise("P1", "Bempuses are bimpuses"), Premise("P2", "Alex is a bempus")]


def test_render_prompt_paper_layout() -> None:
    prompt = render_prompt(PREMISES, "Is Alex a bimpus?")
    assert prompt.startswith(
        "Given the following premises:\n1. Bempuses are bimpuses\n2. Alex is a bempus\n\n"
        "Question: Is Alex a bimpus?\n\nSolve step by step."
    )
    assert prompt.endswith("Answer: True\nor\nAnswer: False")
    assert render_prompt([p.text for p in PREMISES], "Is Alex a bimpus?") == prompt


def test_parse_prompt_inverts_render() -> None:
    premises = [Premise(f"P{i}", f"Bempuses are b{i}umpuses") for i in range(1, 13)]
    premises, question = list(premises), "Is Alex a belpus?"
    parsed, parsed_question = parse_prompt(render_prompt(premises, question))
    assert list(parsed) == premises
    assert parsed_question == question


@pytest.mark.parametrize(
    ("prompt", "message"),
    [
        ("Hello", "Given the following premises"),
        ("Given the following premises:\n1. A are B\n", "Question"),
        ("Given the following premises:\n2. A are B\n\nQuestion: Is x?", "premise line 1"),
    ],
)
def test_parse_prompt_rejects_foreign_prompts(prompt: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_prompt(prompt)


def test_unknown_template() -> None:
    with pytest.raises(ValueError, match="nope"):
        render_prompt(PREMISES, "Is Alex a bimpus?", template="nope")


def test_paper_originals_byte_for_byte(pack_dir: Path) -> None:
    problems = sorted((pack_dir / "data" / "prontoqa_50").glob("p[0-9]*.json"))
    assert len(problems) == 50
    for path in problems:
        problem = json.loads(path.read_text())
        stored = json.loads(
            (pack_dir / "evidence/gpt-4o" / path.stem / "original_cot.json").read_text()
        )
        premises = [Premise(p["id"], p["text"]) for p in problem["premises"]]
        prompt = render_prompt(premises, problem["question"])
        assert prompt == stored["prompt"], path.stem
        assert parse_prompt(prompt) == (tuple(premises), problem["question"])
