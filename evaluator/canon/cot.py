"""A whole CoT -> parsed steps and final answer."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace

from cotaudit.domain.proposition import Proposition
from evaluator.canon.step import TRUNCATED, StepReading, read_step
from evaluator.canon.text import (
    extract_true_false_answer,
    output_steps,
    split_prose_steps,
    split_steps,
)
from evaluator.canon.vocabulary import Vocabulary

# A sentence that ends: final punctuation, then perhaps closing quotes, brackets, markdown.
_ENDED = re.compile(r"[.!?][\"'”’)\]*_`]*\s*$")


# "Suppose Max is sour. Then Max is a dumpus.": a step that opens with "then" right after a
# step of nothing but conditions is the consequent of that supposition, not an assertion.
_THEN = re.compile(r"^\W*(?:then|in that case|in this case)\b", re.IGNORECASE)


def _supposes(reading: StepReading) -> bool:
    """The step is nothing but conditions ("Suppose Max is sour.")."""
    return bool(reading.clauses) and all(c.role == "condition" for c in reading.clauses)


def is_cut_off(text: str) -> bool:
    """The text stops without its end (no final full stop, question or exclamation mark)."""
    return _ENDED.search(text) is None


@dataclass(frozen=True, slots=True)
class ParsedStep:
    """One CoT step: its written number, raw text and reading."""

    number: int
    text: str
    reading: StepReading

    @property
    def prop(self) -> Proposition | None:
        """The canonical conclusion when the step is an assertion, else None."""
        return self.reading.prop


@dataclass(frozen=True, slots=True)
class ParsedCot:
    """A parsed CoT: steps in written order and the final answer (None when not written)."""

    steps: tuple[ParsedStep, ...]
    answer: bool | None
    unread_steps: int = 0  # steps past ``max_steps``, left unread (the output was capped)

    @property
    def n_parsed(self) -> int:
        """Steps read as a proposition or classified as a non-assertion."""
        return sum(1 for s in self.steps if s.reading.parsed)

    def step(self, number: int) -> ParsedStep:
        """The step written as ``Step {number}``; KeyError when absent."""
        for s in self.steps:
            if s.number == number:
                return s
        raise KeyError(number)


def parse_cot(
    text: str,
    *,
    premises: Sequence[str] | None = None,
    style: str = "steps",
    vocabulary: Vocabulary | None = None,
    max_steps: int | None = None,
) -> ParsedCot:
    """Parse a CoT written as ``Step k:`` lines (``style="steps"``) or as prose sentences
    (``style="sentences"``, ProntoQA's native style; sentences are numbered from 1), or
    whichever the text is (``style="auto"``: :func:`~evaluator.canon.text.output_steps`).

    A pronoun subject is resolved to the entity of the latest entity-level step. A step that
    opens with "Then" after a supposition ("Suppose Max is sour. Then Max is a dumpus.") is
    hypothetical, as the supposition is, and so is each "Then" step after it. A last
    sentence without its end (the generation was cut off by the token limit: in the steps
    style, when no answer follows) is no assertion, whatever it starts to say ("So Alex is
    a", "So Rex is a wump"): it is classified ``truncated``. ``vocabulary``: the problem's
    words (see :func:`read_step`). ``max_steps``: read at most that many steps; the rest are
    counted in ``unread_steps`` (a capped output's last step read is not its last written, so
    it is never taken as cut off).
    """
    if style == "auto":
        style, written = output_steps(text)
    elif style == "sentences":
        written = split_prose_steps(text)
    elif style == "steps":
        written = split_steps(text)
    else:
        raise ValueError(f"parse_cot: style must be 'steps', 'sentences' or 'auto', got {style!r}")
    raw = [(s.number, s.text) for s in written]
    unread = 0
    if max_steps is not None and len(raw) > max_steps:
        unread = len(raw) - max_steps
        del raw[max_steps:]
    steps: list[ParsedStep] = []
    entity: str | None = None
    supposing = False  # the step before supposed, or followed a supposition with "then"
    for number, step_text in raw:
        reading = read_step(step_text, premises=premises, entity=entity, vocabulary=vocabulary)
        if supposing and _THEN.match(step_text):
            reading = replace(reading, status="non_assertion", prop=None, category="hypothetical")
        else:
            supposing = _supposes(reading)
        for clause in reading.clauses:
            if clause.prop is not None and clause.prop.kind in ("is", "not_is"):
                entity = clause.prop.subject
        steps.append(ParsedStep(number, step_text, reading))
    answer = extract_true_false_answer(text)
    cut_off_possible = not unread and (style == "sentences" or answer is None)
    if steps and cut_off_possible and is_cut_off(steps[-1].text):
        last = steps[-1]
        cut = replace(last.reading, status="non_assertion", prop=None, category=TRUNCATED)
        steps[-1] = ParsedStep(last.number, last.text, cut)
    return ParsedCot(tuple(steps), answer, unread)
