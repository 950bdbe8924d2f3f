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
# Fallback numbering when a model writes "1. ...", "2) ..." or "(3) ..." instead of "Step k:".
_NUMBERED_LINE = re.compile(r"^[\s>#*_\-]*\(?(\d+)\s*[.)]\s*[*_]*\s*(.+)$")
# The last fallback: bulleted lines ("- ...", "* ...", "• ..."), numbered in order.
_BULLET_LINE = re.compile(r"^[\s>]*[-*•]\s+(?!\*)(.+)$")
_ANSWER_LINE = re.compile(r"^[\s>#*_\-]*(?:final\s+)?answer\b", re.IGNORECASE)
# "Answer: True", "**Answer:** false", "Answer - TRUE (because ...)", "Final answer: True",
# "The answer is: False", "Answer: $\boxed{False}$".
_ANSWER = re.compile(
    r"(?:final\s+)?answer[*_\s]*(?:is\s*)?[:\-–—]?[*_\s]*(?:the\s+(?:statement|answer)\s+is\s+)?"
    r"[*_\s\"'“”‘’\[$]*(?:\\boxed\{\s*)?[*_\s\"'“”‘’]*\b(true|false)\b",
    re.IGNORECASE,
)
# "\boxed{False}" on its own: the math habit of marking the final answer.
_BOXED_ANSWER = re.compile(r"\\boxed\{\s*(?:\\text\{\s*)?(true|false)\b", re.IGNORECASE)
# "The answer is no." or "Answer: No" to the yes/no question: only after the answer is named,
# never a bare "no".
_YES_NO_ANSWER = re.compile(
    r"(?:\bthe\s+(?:final\s+)?answer\s+is|^[\s>#*_\-]*(?:final\s+)?answer[*_\s]*[:\-–—])"
    r"[*_\s:\"'“”‘’]*\b(yes|no)\b",
    re.IGNORECASE | re.MULTILINE,
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
    no ``Step k`` header exists at all, ``1.`` / ``1)`` / ``(1)`` numbering is accepted
    instead (its last list, where the numbering starts again at 1: a model that restates the
    premises as a numbered list before its numbered steps), and failing that bulleted lines,
    numbered in order. A header written as a title
    (a markdown heading, or bold to the end of the line: ``**Step 1: Juno's category**``)
    with the step's text on the lines below ends as a sentence of its own, so that it is not
    read as the start of the step's first sentence.
    """
    steps = _split_with(cot, _STEP_LINE)
    if not steps:
        steps = _last_numbered_list(_split_with(cot, _NUMBERED_LINE))
    if not steps:
        steps = _split_with(cot, _BULLET_LINE)
    return steps


def _last_numbered_list(steps: list[CotStep]) -> list[CotStep]:
    """The last list of numbered lines: where the numbering starts again at 1, what came
    before was another list (the premises restated, a plan), not the steps. A list numbered
    ``1.`` throughout (markdown numbers such a list itself) is numbered in order."""
    if len(steps) > 1 and all(step.number == 1 for step in steps):
        return [CotStep(i, step.text) for i, step in enumerate(steps, start=1)]
    restarts = [i for i in range(1, len(steps)) if steps[i].number == 1 < steps[i - 1].number]
    return steps[restarts[-1] :] if restarts else steps


_TITLE_END = re.compile(r"[*_]+\s*$")
_SENTENCE_FINAL = re.compile(r"[.!?:;]\s*$")


def _split_with(cot: str, header: re.Pattern[str]) -> list[CotStep]:
    numbers: list[int] = []
    texts: list[list[str]] = []
    titles: list[bool] = []
    for line in cot.splitlines():
        if _ANSWER_LINE.match(line):
            break
        match = header.match(line)
        if match is not None:
            numbered = match.re.groups == 2
            numbers.append(int(match.group(1)) if numbered else len(numbers) + 1)
            rest = match.group(match.re.groups).strip()
            titles.append(line.lstrip().startswith("#") or bool(_TITLE_END.search(rest)))
            texts.append([_TITLE_END.sub("", rest) if titles[-1] else rest])
        elif texts and line.strip():
            texts[-1].append(line.strip())
    for parts, title in zip(texts, titles, strict=True):
        if title and len(parts) > 1 and parts[0] and not _SENTENCE_FINAL.search(parts[0]):
            parts[0] += "."
    return [
        CotStep(n, " ".join(part for part in parts if part))
        for n, parts in zip(numbers, texts, strict=True)
    ]


def extract_true_false_answer(cot: str) -> bool | None:
    """The final ``Answer: True/False`` (the last one written; ``The answer is "True".``, and
    ``The answer is yes/no.`` to the yes/no question), or None when absent."""
    found = [(m.start(), m.group(1).lower() == "true") for m in _ANSWER.finditer(cot)]
    found += [(m.start(), m.group(1).lower() == "true") for m in _BOXED_ANSWER.finditer(cot)]
    found += [(m.start(), m.group(1).lower() == "yes") for m in _YES_NO_ANSWER.finditer(cot)]
    if not found:
        return None
    return max(found)[1]


def output_steps(text: str) -> tuple[str, list[CotStep]]:
    """How an output is read, and its steps: by its step lines (``"steps"``: ``Step k:``,
    numbered or bulleted, :func:`split_steps`) when it has any, else by its sentences
    numbered from 1, up to an ``Answer:`` line (``"sentences"``: a chain of thought or
    reasoning trace in prose)."""
    steps = split_steps(text)
    if steps:
        return "steps", steps
    return "sentences", split_prose_steps(text)


def split_prose_steps(text: str) -> list[CotStep]:
    """The sentences of a prose chain of thought as its steps, numbered from 1; an
    ``Answer:`` line ends them, as it ends :func:`split_steps`'s."""
    lines = text.splitlines()
    ends = next((i for i, line in enumerate(lines) if _ANSWER_LINE.match(line)), len(lines))
    prose = "\n".join(lines[:ends])
    return [CotStep(i, s) for i, s in enumerate(split_cot_sentences(prose), start=1)]


def split_cot_sentences(text: str) -> list[str]:
    """Split prose CoT (ProntoQA's native style) into sentences.

    A truncated final fragment without a full stop is kept as a sentence of its own: the
    reader decides whether it says anything.
    """
    return [s.strip() for s in _SENTENCE_END.split(text) if s and s.strip()]
