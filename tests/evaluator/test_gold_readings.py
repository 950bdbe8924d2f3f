"""The hand-labelled gold set of readings: the parser's precision, reported and held >= 99.5%.

``tests/evaluator/data/gold_readings.jsonl`` holds one labelled sentence or step per line:

- references into ``../shared/data`` (never copied): ``file`` (relative to the data folder),
  ``line`` (the file's line holding the JSON string of the output: ``predicted_reasoning`` of
  the real-cot files, ``raw_response`` of the GPT-4o pack), ``step`` (1-based: the sentence of
  the prose output, the ``Step k`` of the pack's), and ``sha256`` (first 12 hex digits of the
  SHA-256 of that sentence's text, so a changed data file fails loudly instead of silently
  labelling another sentence);
- generated true/false/number-ontology text, written out with the vocabulary of its problem.

Each has its expected ``reading`` (``assertion`` with its ``proposition``, ``not_a_step``, or
``unparseable``). A reference is read in its document (pronouns, a cut-off last sentence)
against its problem's vocabulary, as the evaluator reads it. Precision of readings: of the
items the parser gave a reading (an assertion or a classification), the share it got right;
a reading that exists and is wrong counts against it. How the labels were made:
docs/parsing.md, "The gold set".
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import Counter
from collections.abc import Mapping
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from evaluator.canon import ParsedCot, parse_cot, read_step, split_cot_sentences
from evaluator.canon.step import StepReading
from evaluator.canon.vocabulary import Vocabulary, vocabulary_from, vocabulary_from_words

GOLD = Path(__file__).parent / "data" / "gold_readings.jsonl"
DATA = Path(__file__).resolve().parents[2] / ".." / "shared" / "data"
READINGS = {"assertion": "assertion", "non_assertion": "not_a_step", "unparseable": "unparseable"}
PRECISION_FLOOR = 0.995
_FIELD = re.compile(r'^\s*"(predicted_reasoning|raw_response)"\s*:\s*(".*")\s*,?\s*$')


def _gold() -> list[dict[str, Any]]:
    return [json.loads(line) for line in GOLD.read_text(encoding="utf-8").splitlines()]


@cache
def _lines(file: str) -> list[str]:
    return (DATA / file).read_text(encoding="utf-8").splitlines()


@cache
def _dev() -> Mapping[str, Mapping[str, Any]]:
    data = json.loads((DATA / "prontoqa-500" / "dev.json").read_text(encoding="utf-8"))
    return {str(p["id"]): p for p in data}


def _record_id(file: str, line: int) -> str:
    """The ``id`` of the real-cot record whose ``predicted_reasoning`` is on ``line``."""
    for text in reversed(_lines(file)[: line - 1]):
        m = re.match(r'^\s*"id"\s*:\s*"([^"]+)"', text)
        if m:
            return m.group(1)
    raise AssertionError(f"{file}:{line}: no record id above the line")


def _pack_vocabulary(file: str) -> tuple[Vocabulary, list[str]]:
    parts = Path(file).parts  # grounding-audit-gpt4o/evidence/gpt-4o/pNNN/...
    problem = json.loads(
        (DATA / parts[0] / "data" / "prontoqa_50" / f"{parts[3]}.json").read_text()
    )
    premises = [str(p["text"]) for p in problem["premises"]]
    probe = json.loads((DATA / file).read_text())
    modified = [str(p["text"]) for p in probe.get("modified_premises") or []]
    texts = (*premises, *modified, str(problem["question"]))
    return vocabulary_from(texts), modified or premises


@cache
def _document(file: str, line: int) -> ParsedCot:
    m = _FIELD.match(_lines(file)[line - 1])
    assert m is not None, f"{file}:{line} holds no predicted_reasoning/raw_response"
    text = json.loads(m.group(2))
    if m.group(1) == "predicted_reasoning":
        problem = _dev()[_record_id(file, line)]
        vocabulary = vocabulary_from(
            (*split_cot_sentences(str(problem["context"])), str(problem["question"]))
        )
        return parse_cot(text, style="sentences", vocabulary=vocabulary)
    vocabulary, premises = _pack_vocabulary(file)
    return parse_cot(text, premises=premises, vocabulary=vocabulary)


def _read(item: Mapping[str, Any]) -> tuple[str, StepReading]:
    if "file" in item:
        step = _document(item["file"], item["line"]).steps[item["step"] - 1]
        digest = hashlib.sha256(step.text.encode("utf-8")).hexdigest()[:12]
        where = f"{item['file']}:{item['line']} step {item['step']}"
        assert digest == item["sha256"], f"{where}: the data changed ({step.text!r})"
        return step.text, step.reading
    vocabulary = vocabulary_from_words(item["vocabulary"])
    return item["text"], read_step(item["text"], vocabulary=vocabulary)


def test_the_gold_set_is_large_and_varied() -> None:
    gold = _gold()
    assert len(gold) >= 400
    sources = Counter(
        item["file"].split("/")[0] if "file" in item else "generated" for item in gold
    )
    assert sources["real-cot"] >= 200 and sources["grounding-audit-gpt4o"] >= 200
    assert sources["generated"] >= 50
    readings = Counter(item["reading"] for item in gold)
    assert min(readings.values()) >= 15, readings  # every kind of reading is represented


def test_precision_of_readings_on_the_gold_set(capsys: pytest.CaptureFixture[str]) -> None:
    if not DATA.is_dir():
        pytest.skip(f"../shared/data not found at {DATA}: the references cannot be read")
    gold = _gold()
    produced = correct = 0
    missed: list[str] = []
    wrong: list[str] = []
    for item in gold:
        text, reading = _read(item)
        got = READINGS[reading.status]
        expected = item["reading"]
        if got == "unparseable":
            if expected != "unparseable":
                missed.append(f"{text!r}: expected {expected} {item.get('proposition') or ''}")
            continue
        produced += 1
        right = got == expected and (
            got != "assertion" or str(reading.prop) == item.get("proposition")
        )
        correct += right
        if not right:
            wrong.append(
                f"{text!r}: read {got} {reading.prop or ''}, expected {expected} "
                f"{item.get('proposition') or ''}"
            )
    precision = correct / produced
    with capsys.disabled():
        print(
            f"\ngold set: {len(gold)} items, {produced} read, precision of readings "
            f"{precision:.4f} ({correct}/{produced}); {len(missed)} expected readings missed"
        )
        for line in wrong[:20]:
            print(f"  wrong: {line}")
    assert precision >= PRECISION_FLOOR, wrong
    assert len(missed) <= 0.01 * len(gold), missed
