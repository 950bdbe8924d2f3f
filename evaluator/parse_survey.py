"""How well the canonical parser reads real model CoT.

Two surveys, both pure functions over already-loaded JSON:

- :func:`survey_native`: ProntoQA's native prose style (``Max is a yumpus. Each yumpus is a
  dumpus. So Max is dumpus. ...``) as Llama-2-70B and Mistral-7B wrote it on the 500 problems
  of ``prontoqa-500/dev.json``: the share of sentences parsed, the share of *well-formed*
  sentences parsed, how many derived conclusions match a gold proof step, and the categories
  of what stays unparsed.
- :func:`survey_pack`: the parse rate per condition over an evidence pack's ``Step k:``
  outputs (original, consistent = ``semantic`` files, local, surface).

A sentence is **well-formed** (a well-formed English statement of one of the four proposition
kinds) when, read as written: it ends with a full stop; it has no comma, semicolon, colon or
question mark and no conjunction (``and``, ``or``, ``but``, ``because``, ``since``, ``if``,
``then``, ``which``, ``that``); after an optional leading ``So``/``Therefore``/``Thus``/``Hence``
it is ``[Every|Each|All|No|Any] SUBJECT (is|are) [not] [a|an] OBJECT`` where SUBJECT is one
word (optionally followed by ``thing``/``things``) and OBJECT one word. Compound subjects
("Each large jompus is a zumpus") state a conjunction the four kinds cannot express and are
therefore not well-formed; they are reported as their own category.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from cotaudit.domain.proposition import Kind, Proposition
from evaluator.canon import ParsedCot, parse_cot, read_step, split_cot_sentences
from evaluator.canon.vocabulary import vocabulary_from

_WELL_FORMED = re.compile(
    r"^(?:(?:so|therefore|thus|hence)\s+)?(?:(?:every|each|all|no|any)\s+)?"
    r"[a-z][a-z\-]*(?:\s+things?)?\s+(?:is|are)\s+(?:not\s+)?(?:(?:a|an)\s+)?[a-z][a-z\-]*\.$"
)
_CONJUNCTION = re.compile(r"\b(?:and|or|but|because|since|if|then|which|that)\b")
PACK_CONDITIONS: Mapping[str, str] = {
    "original": "original",
    "semantic": "consistent",
    "local": "local",
    "surface": "surface",
}


def is_well_formed(sentence: str) -> bool:
    """True for a well-formed statement of one of the four kinds (module docstring)."""
    s = re.sub(r"\s+", " ", sentence.strip()).lower()
    if re.search(r"[,;:?]", s) or _CONJUNCTION.search(s):
        return False
    return _WELL_FORMED.match(s) is not None


def unparsed_category(sentence: str) -> str:
    """Why a sentence stays unparsed, as one of a few named categories."""
    s = sentence.strip()
    lowered = s.lower()
    if not re.search(r"[.!?]$", s):
        return "truncated"
    if lowered.startswith(("the correct option", "the answer", "answer", "option")):
        return "answer_text"
    if re.match(
        r"^(?:(?:so|therefore|thus|hence)\s+)?(?:(?:every|each|all|no|any)\s+)?"
        r"[a-z\-]+\s+[a-z\-]+\s+(?:is|are)\b",
        lowered,
    ):
        return "compound_subject"
    if _CONJUNCTION.search(lowered) or "," in s:
        return "compound_sentence"
    return "other"


@dataclass(frozen=True, slots=True)
class NativeSurvey:
    """Per-model results of :func:`survey_native` (counts, then derived shares)."""

    model: str
    problems: int
    sentences: int
    parsed: int
    well_formed: int
    well_formed_parsed: int
    derived: int  # asserted sentences that restate no context sentence
    derived_in_gold: int  # ... whose proposition is a derived step of the gold proof
    derived_valid: int  # ... that follow in one step from the context and earlier sentences
    unparsed_categories: Mapping[str, int] = field(default_factory=dict)
    unparsed_examples: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    @property
    def parse_rate(self) -> float:
        """Share of all sentences read or classified."""
        return self.parsed / self.sentences if self.sentences else 0.0

    @property
    def well_formed_rate(self) -> float:
        """Share of well-formed sentences read as a proposition."""
        return self.well_formed_parsed / self.well_formed if self.well_formed else 0.0

    @property
    def valid_rate(self) -> float:
        """Share of derived conclusions that are sound one-step inferences."""
        return self.derived_valid / self.derived if self.derived else 0.0

    @property
    def gold_match_rate(self) -> float:
        """Share of derived conclusions that match a gold proof step."""
        return self.derived_in_gold / self.derived if self.derived else 0.0


def _props(sentences: Iterable[str]) -> set[Proposition]:
    out: set[Proposition] = set()
    for sentence in sentences:
        reading = read_step(sentence)
        if reading.prop is not None:
            out.add(reading.prop)
    return out


def follows(prop: Proposition, known: set[Proposition]) -> bool:
    """True when ``prop`` follows in one modus-ponens step from ``known``.

    ``is(e, q)`` from ``is(e, p)`` and ``subtype(p, q)``; ``not_is(e, q)`` from ``is(e, p)``
    and ``not_subtype(p, q)``; ``subtype(a, c)`` from ``subtype(a, b)`` and ``subtype(b, c)``.
    """
    rule: Kind = "not_subtype" if prop.negated else "subtype"
    premise: Kind = "is" if prop.kind in ("is", "not_is") else "subtype"
    return any(
        k.kind == premise
        and k.subject == prop.subject
        and Proposition(rule, k.object, prop.object) in known
        for k in known
    )


def survey_native(
    model: str,
    outputs: Sequence[Mapping[str, Any]],
    problems: Sequence[Mapping[str, Any]],
    *,
    examples_per_category: int = 5,
) -> NativeSurvey:
    """Survey one model's native-style CoT (``predicted_reasoning``) joined by ``id`` with
    the Logic-LM records (``context``, ``explanation``) of the same problems.

    Raises ValueError naming the first output whose ``id`` has no problem.
    """
    by_id = {str(p["id"]): p for p in problems}
    counts: Counter[str] = Counter()
    categories: Counter[str] = Counter()
    examples: dict[str, list[str]] = {}
    for record in outputs:
        problem = by_id.get(str(record["id"]))
        if problem is None:
            raise ValueError(
                f"{model}: output id {record['id']!r} has no problem in the problem file; "
                "join the outputs with the dev.json they were produced from"
            )
        context = _props(split_cot_sentences(str(problem["context"])))
        gold = _props(str(s) for s in problem["explanation"]) - context
        vocabulary = vocabulary_from(
            (*split_cot_sentences(str(problem["context"])), str(problem.get("question", "")))
        )
        parsed = parse_cot(
            str(record.get("predicted_reasoning") or ""),
            style="sentences",
            vocabulary=vocabulary,
        )
        counts["problems"] += 1
        known = set(context)
        for step in parsed.steps:
            counts["sentences"] += 1
            reading = step.reading
            well_formed = is_well_formed(step.text)
            counts["well_formed"] += well_formed
            if reading.parsed:
                counts["parsed"] += 1
            else:
                category = unparsed_category(step.text)
                categories[category] += 1
                bucket = examples.setdefault(category, [])
                if len(bucket) < examples_per_category and step.text not in bucket:
                    bucket.append(step.text)
            if reading.prop is not None:
                counts["well_formed_parsed"] += well_formed
                if reading.prop not in context:
                    counts["derived"] += 1
                    counts["derived_in_gold"] += reading.prop in gold
                    counts["derived_valid"] += follows(reading.prop, known)
                # Later sentences may build on this one, sound or not: the check is per step.
                known.add(reading.prop)
    return NativeSurvey(
        model=model,
        problems=counts["problems"],
        sentences=counts["sentences"],
        parsed=counts["parsed"],
        well_formed=counts["well_formed"],
        well_formed_parsed=counts["well_formed_parsed"],
        derived=counts["derived"],
        derived_in_gold=counts["derived_in_gold"],
        derived_valid=counts["derived_valid"],
        unparsed_categories=dict(categories.most_common()),
        unparsed_examples={k: tuple(v) for k, v in examples.items()},
    )


@dataclass(frozen=True, slots=True)
class PackSurvey:
    """Parse rates per condition over an evidence pack's raw outputs."""

    steps: Mapping[str, int]
    parsed: Mapping[str, int]
    statuses: Mapping[str, Mapping[str, int]]  # condition -> "assertion"/category -> count

    def rate(self, condition: str) -> float:
        """Share of steps read or classified under ``condition`` (KeyError if unknown)."""
        return self.parsed[condition] / self.steps[condition] if self.steps[condition] else 0.0


def survey_pack(model_dir: Path) -> PackSurvey:
    """Parse every ``raw_response`` of ``MODEL_DIR/pNNN/{original_cot,probes/*}.json``.

    Raises FileNotFoundError naming the directory when it holds no problem folders.
    """
    folders = sorted(p for p in model_dir.glob("p[0-9]*") if p.is_dir())
    if not folders:
        raise FileNotFoundError(
            f"{model_dir}: no pNNN problem folders; pass an evidence pack's model directory "
            "(e.g. grounding-audit-gpt4o/evidence/gpt-4o)"
        )
    steps: Counter[str] = Counter()
    parsed: Counter[str] = Counter()
    statuses: dict[str, Counter[str]] = {c: Counter() for c in PACK_CONDITIONS.values()}
    for folder in folders:
        files = [(folder / "original_cot.json", "original")]
        files += [(f, f.stem.split("_")[0]) for f in sorted((folder / "probes").glob("*.json"))]
        for path, kind in files:
            condition = PACK_CONDITIONS.get(kind)
            if condition is None or not path.exists():
                continue
            record = orjson.loads(path.read_bytes())
            cot: ParsedCot = parse_cot(str(record.get("raw_response") or ""))
            for step in cot.steps:
                steps[condition] += 1
                parsed[condition] += step.reading.parsed
                label = step.reading.category or step.reading.status
                statuses[condition][label] += 1
    return PackSurvey(dict(steps), dict(parsed), {k: dict(v) for k, v in statuses.items()})


def native_report(surveys: Sequence[NativeSurvey]) -> str:
    """A Markdown table of native-style surveys (the one in ``docs/parsing.md``)."""
    lines = [
        "| model | problems | sentences | parsed | well-formed parsed | derived conclusions "
        "matching a gold step | derived conclusions valid in one step | unparsed by category |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for s in surveys:
        cats = ", ".join(f"{k} {v}" for k, v in s.unparsed_categories.items())
        lines.append(
            f"| {s.model} | {s.problems} | {s.sentences} | {s.parsed} ({s.parse_rate:.1%}) | "
            f"{s.well_formed_parsed}/{s.well_formed} ({s.well_formed_rate:.2%}) | "
            f"{s.derived_in_gold}/{s.derived} ({s.gold_match_rate:.1%}) | "
            f"{s.derived_valid}/{s.derived} ({s.valid_rate:.1%}) | {cats} |"
        )
    return "\n".join(lines)
