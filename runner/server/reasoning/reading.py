"""What a simulated reasoner reads from the prompt it receives.

The premises and the question come from the prompt text itself (via
:func:`runner.tasks.prompts.parse_prompt` and
:func:`cotaudit.domain.sentences.parse_premise_styled`),
never from a problem file: a probe changes what the reasoner sees exactly as it changes what a
real model sees. Readings are memoised per prompt text because the server reads the same
prompt for every self-consistency sample.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from functools import lru_cache

from cotaudit.domain.proposition import Proposition, singular
from cotaudit.domain.sentences import parse_premise_styled
from cotaudit.domain.sentences import parse_question as parse_yes_no
from runner.tasks.prompts import parse_prompt

# Sentence styles of the surface control's rephrases ("Every X is a Y", "No X is a Y",
# "X is one of the Ys", "It is true that X is Y"): the surface-sensitive reasoner may misread
# a premise written in one of them.
SURFACE_STYLES = frozenset({"every", "no", "one_of", "true_that"})

_YES_NO = re.compile(r"^is\s+([a-z][a-z'-]*)\s+(not\s+)?(?:an?\s+)?([a-z][a-z'-]*)\s*\??$")
_STATEMENT = re.compile(r"(?:true\s+or\s+false\s*[?:]\s*)(.+)$")
_SPACES = re.compile(r"\s+")
_WORDS = re.compile(r"[A-Za-z][A-Za-z'-]*")


class NotAReasoningPrompt(ValueError):
    """The prompt is not a premises-and-question prompt a reasoner can read."""


@dataclass(frozen=True, slots=True)
class ReadPremise:
    id: str  # "P3": the premise numbered 3 in the prompt
    number: int
    text: str  # as written in the prompt
    prop: Proposition | None  # None: the sentence is no premise form the reasoner knows
    style: str | None  # the sentence's surface form (cotaudit.domain.sentences.STYLES)

    @property
    def surface_form(self) -> bool:
        """Written in one of the surface control's rephrase forms."""
        return self.style in SURFACE_STYLES


@dataclass(frozen=True, slots=True)
class Reading:
    premises: tuple[ReadPremise, ...]
    question: Proposition  # is(entity, predicate) or not_is(...)
    question_text: str  # stable across the probes of a problem (probes never rewrite it)
    entity_display: str  # the entity as the prompt writes it ("Alex")
    prompt_digest: str  # identifies the exact prompt (probes differ here)

    @property
    def entity(self) -> str:
        return self.question.subject

    @property
    def goal(self) -> str:
        return self.question.object


def parse_question(question: str) -> Proposition:
    """The proposition a question asks about.

    ``Is Alex a belpus?`` -> ``is(alex, belpus)``; ``Is the following statement true or false?
    Max is not sour.`` -> ``not_is(max, sour)``. Raises :class:`NotAReasoningPrompt`.
    """
    s = _SPACES.sub(" ", question.strip()).lower()
    asked = parse_yes_no(question)  # names of several words and numerals too ("Is 7 a ...?")
    if asked is not None:
        return asked
    m = _YES_NO.match(s)
    if m and m[1] != "the":
        return Proposition("not_is" if m[2] else "is", m[1], singular(m[3]))
    m = _STATEMENT.search(s)
    if m:
        parsed = parse_premise_styled(m[1])
        if parsed is not None and parsed[0].kind in ("is", "not_is"):
            return parsed[0]
    raise NotAReasoningPrompt(
        f"cannot read the question {question!r}: expected 'Is <entity> a <type>?' or "
        "'... true or false? <entity> is <predicate>.'"
    )


def _display_name(entity: str, question: str) -> str:
    for word in _WORDS.findall(question):
        word = str(word)
        if word.lower() == entity and word[:1].isupper():
            return word
    return entity[:1].upper() + entity[1:]


@lru_cache(maxsize=16384)
def read_prompt(prompt: str) -> Reading:
    """Read premises and question from a prompt; raises :class:`NotAReasoningPrompt`."""
    try:
        premises, question_text = parse_prompt(prompt)
    except ValueError as exc:
        raise NotAReasoningPrompt(f"not a premises-and-question prompt: {exc}") from exc
    question = parse_question(question_text)
    read = []
    for premise in premises:
        parsed = parse_premise_styled(premise.text)
        read.append(
            ReadPremise(
                id=premise.id,
                number=int(premise.id[1:]),
                text=premise.text,
                prop=None if parsed is None else parsed[0],
                style=None if parsed is None else parsed[1],
            )
        )
    return Reading(
        premises=tuple(read),
        question=question,
        question_text=question_text,
        entity_display=_display_name(question.subject, question_text),
        prompt_digest=hashlib.blake2b(prompt.encode("utf-8"), digest_size=8).hexdigest(),
    )
