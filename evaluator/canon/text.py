"""Raw model text -> steps, sentences and the final answer.

Models decorate the requested ``Step k: ...`` / ``Answer: True`` format with markdown bold,
headings, other numbering styles and steps that wrap over several lines; the readers here
accept those variants and never guess an answer that is not written.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# "Step 3:", "**Step 3:**", "### Step 3 -", "Step 3.", "- Step 3)" (case-insensitive).
# A hyphen right before a digit is a negative numeral ("Step 1: -8 is ..."), never a separator.
_SEPARATOR = r"(?:[:.)–—]|-(?!\d))?"
_STEP_LINE = re.compile(
    rf"^[\s>#*_\-]*step\s*(\d+)\s*[*_]*\s*{_SEPARATOR}\s*[*_]*\s*{_SEPARATOR}\s*(.*)$",
    re.IGNORECASE,
)
# Fallback numbering when a model writes "1. ..." or "2) ..." instead of "Step k:".
_NUMBERED_LINE = re.compile(r"^[\s>#*_\-]*(\d+)\s*[.)]\s*[*_]*\s*(.+)$")
_ANSWER_LINE = re.compile(r"^[\s>#*_\-]*(?:final\s+)?answer\b", re.IGNORECASE)
# "Answer: True", "**Answer:** false", "Answer - TRUE (because ...)", "Final answer: True".
_ANSWER = re.compile(
    r"(?:final\s+)?answer[*_\s]*(?:is\s+)?[:\-–—]?[*_\s]*(?:the\s+(?:statement|answer)\s+is\s+)?"
    r"[*_\s\"'“”‘’\[]*\b(true|false)\b",
    re.IGNORECASE,
)
# "The answer is no." to a yes/no question: only in this explicit form, never a bare "no".
_YES_NO_ANSWER = re.compile(
    r"\bthe\s+(?:final\s+)?answer\s+is[*_\s:\"'“”‘’]*\b(yes|no)\b", re.IGNORECASE
)
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n+")


@dataclass(frozen=True, slots=True)
class CotStep:
    """One numbered step of a CoT as written: its number and its text (lines joined)."""

    number: int
    text: str


def split_steps(cot: str) -> list[CotStep]:
    """Split a CoT into its ``Step k:`` steps.

    Lines before the first step are preamble and dropped; a line that is not a step header
    continues the current step (multi-line steps); the ``Answer:`` line ends the steps. When
    no ``Step k`` header exists at all, ``1.`` / ``1)`` numbering is accepted instead.
    """
    steps = _split_with(cot, _STEP_LINE)
    if not steps:
        steps = _split_with(cot, _NUMBERED_LINE)
    return steps


def _split_with(cot: str, header: re.Pattern[str]) -> list[CotStep]:
    numbers: list[int] = []
    texts: list[list[str]] = []
    for line in cot.splitlines():
        if _ANSWER_LINE.match(line):
            break
        match = header.match(line)
        if match is not None:
            numbers.append(int(match.group(1)))
            texts.append([match.group(2).strip()])
        elif texts and line.strip():
            texts[-1].append(line.strip())
    return [
        CotStep(n, " ".join(part for part in parts if part))
        for n, parts in zip(numbers, texts, strict=True)
    ]


def extract_true_false_answer(cot: str) -> bool | None:
    """The final ``Answer: True/False`` (the last one written; ``The answer is "True".``, and
    ``The answer is yes/no.`` to the yes/no question), or None when absent."""
    found = [(m.start(), m.group(1).lower() == "true") for m in _ANSWER.finditer(cot)]
    found += [(m.start(), m.group(1).lower() == "yes") for m in _YES_NO_ANSWER.finditer(cot)]
    if not found:
        return None
    return max(found)[1]


def split_cot_sentences(text: str) -> list[str]:
    """Split prose CoT (ProntoQA's native style) into sentences.

    A truncated final fragment without a full stop is kept as a sentence of its own: the
    reader decides whether it says anything.
    """
    return [s.strip() for s in _SENTENCE_END.split(text) if s and s.strip()]
