"""Prompt templates: premises + question -> the prompt text, and back.

The default template, ``paper``, is the prompt of the interventional grounding audit
(seed 002), byte for byte as stored in every raw output of the evidence pack
(``grounding-audit-gpt4o/evidence/gpt-4o/p*/``, field ``prompt``)::

    Given the following premises:
    1. Bempuses are bimpuses
    ...
    6. Alex is a bempus

    Question: Is Alex a belpus?

    Solve step by step. For each step, write EXACTLY in this format:
    Step 1: [Your conclusion in one sentence].
    ...
    Answer: False

:func:`parse_prompt` inverts :func:`render_prompt` for every template: the simulated
reasoners read what they are asked from the prompt they receive, so a probe really changes
what they see. It is on their hot path, hence line-based and memoised.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache

from cotaudit.domain.problem import Premise

_PAPER_HEAD = "Given the following premises:\n"
_PAPER_TAIL = (
    "\n\nSolve step by step. For each step, write EXACTLY in this format:\n"
    "Step 1: [Your conclusion in one sentence].\n"
    "Step 2: [Your conclusion in one sentence].\n"
    "...\n\n"
    "After all steps, write exactly:\n"
    "Answer: True\n"
    "or\n"
    "Answer: False"
)
_QUESTION = "\n\nQuestion: "

TEMPLATES: tuple[str, ...] = ("paper",)


def _texts(premises: Sequence[Premise] | Sequence[str]) -> list[str]:
    return [p.text if isinstance(p, Premise) else p for p in premises]


def render_prompt(
    premises: Sequence[Premise] | Sequence[str], question: str, template: str = "paper"
) -> str:
    """The prompt for ``premises`` (numbered in the order given) and ``question``.

    Premise texts are used as they are (no final period, as in the paper). Raises
    ``ValueError`` for an unknown template.
    """
    if template != "paper":
        raise ValueError(f"unknown prompt template {template!r}; use one of {TEMPLATES}")
    lines = [f"{i}. {text}" for i, text in enumerate(_texts(premises), start=1)]
    return _PAPER_HEAD + "\n".join(lines) + _QUESTION + question + _PAPER_TAIL


@lru_cache(maxsize=8192)
def parse_prompt(prompt: str) -> tuple[tuple[Premise, ...], str]:
    """Inverse of :func:`render_prompt`: ``(premises P1..Pk, question)``.

    Raises ``ValueError`` naming the part that does not fit when ``prompt`` was not made by
    a known template.
    """
    if not prompt.startswith(_PAPER_HEAD):
        raise ValueError("prompt does not start with 'Given the following premises:'")
    cut = prompt.find(_QUESTION, len(_PAPER_HEAD))
    if cut < 0:
        raise ValueError("prompt has no 'Question:' line after its premises")
    end = prompt.find("\n", cut + len(_QUESTION))
    question = prompt[cut + len(_QUESTION) : end if end >= 0 else len(prompt)]
    premises = []
    for i, line in enumerate(prompt[len(_PAPER_HEAD) : cut].split("\n"), start=1):
        number, sep, text = line.partition(". ")
        if not sep or number != str(i):
            raise ValueError(f"premise line {i} of the prompt is not '{i}. <premise>': {line!r}")
        premises.append(Premise(f"P{i}", text))
    return tuple(premises), question
