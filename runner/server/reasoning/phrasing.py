"""The chain of thought a reasoner writes for its steps, in the paper's requested format.

``Step k: <one sentence>.`` lines, a blank line, then ``Answer: True|False``. Wording varies by
*voice* (chosen per CoT) and template (chosen per step), all from stable hashes, among forms
real models write and the evaluator's parser reads: the conclusion is the main clause after
``so``/``therefore``, or the last clause of ``Since A and B, C``:

- ``Since bempuses are bimpuses and Alex is a bempus, Alex is a bimpus.`` (GPT-4o)
- ``Since Alex is a bempus, and all bempuses are bimpuses, Alex is a bimpus.``
- ``Alex is a bempus, and bempuses are bimpuses, so Alex is also a bimpus.``
- ``Because every bempus is a bimpus, Alex is a bimpus.``
- ``By premise 1, bempuses are bimpuses, so Alex is a bimpus.``
- ``Alex is a bempus and bempuses are bimpuses; therefore, Alex is a bimpus.``
- ``Therefore, Alex is not a belpus.`` (a conclusion from a prior)
- ``The premises do not connect zqbimpuses to belpuses.`` (a comment: no assertion)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

from cotaudit.domain.proposition import Proposition, plural
from cotaudit.domain.sentences import article, capitalise, is_type_name
from runner.server.reasoning.chain import Note, Step
from runner.server.reasoning.chance import Dice, pick
from runner.server.reasoning.reading import Reading

# Step templates: {R} the rule, {F} the entity fact it applies to, {C} the conclusion, {n} the
# rule's premise number.
SINCE_RULE_FACT = "Since {R} and {F}, {C}."
SINCE_FACT_RULE = "Since {F}, and {R}, {C}."
FACT_RULE_SO = "{F}, and {R}, so {C}."
BECAUSE_RULE = "Because {R}, {C}."
RULE_SO = "{R}, so {C}."
BY_PREMISE = "By premise {n}, {R}, so {C}."
THEREFORE = "{F} and {R}; therefore, {C}."


@dataclass(frozen=True, slots=True)
class Voice:
    """A consistent way of writing: step templates and rule wordings (repeats weight)."""

    name: str
    templates: tuple[str, ...]
    rule_forms: tuple[str, ...]  # "plural" | "all" | "every"
    restate: tuple[str, ...]  # first-step restatement of the entity premise
    prior: tuple[str, ...]  # a conclusion from a prior
    also: bool = False  # "so Alex is also a bimpus"


VOICES: tuple[Voice, ...] = (
    Voice(
        "gpt",
        (SINCE_RULE_FACT,) * 5 + (SINCE_FACT_RULE,),
        ("plural",) * 4 + ("all",),
        ("{F}.",),
        ("Therefore, {C}.",),
    ),
    Voice(
        "since-fact",
        (SINCE_FACT_RULE,) * 4 + (SINCE_RULE_FACT, BECAUSE_RULE),
        ("all", "all", "plural"),
        ("{F}.", "We know that {F}."),
        ("So {C}.", "Therefore, {C}."),
    ),
    Voice(
        "plain",
        (FACT_RULE_SO, FACT_RULE_SO, RULE_SO, THEREFORE),
        ("plural", "every"),
        ("{F}.",),
        ("Hence, {C}.", "So {C}."),
        also=True,
    ),
    Voice(
        "cite",
        (BY_PREMISE, BY_PREMISE, BECAUSE_RULE),
        ("plural", "every"),
        ("We know that {F}.",),
        ("Therefore, {C}.",),
    ),
)


@lru_cache(maxsize=4096)
def _noun(name: str) -> str:
    return f"{article(name)} {name}" if is_type_name(name) else name


@lru_cache(maxsize=4096)
def _plural(name: str) -> str:
    return plural(name) if is_type_name(name) else name


def entity_clause(reading: Reading, prop: Proposition, *, also: bool = False) -> str:
    """``Alex is a bimpus``, ``Alex is not sour``, ``Alex is also an impus``."""
    neg = "not " if prop.negated else ""
    extra = "also " if also and not prop.negated else ""
    return f"{reading.entity_display} is {extra}{neg}{_noun(prop.object)}"


def rule_clause(prop: Proposition, form: str) -> str:
    """A type-level proposition in the reasoner's own words (lower-case start)."""
    a, b = prop.subject, prop.object
    if prop.negated:
        if form == "every":
            return f"no {a} is {_noun(b)}"
        return f"{plural(a)} are not {_plural(b)}"
    if form == "every":
        return f"every {a} is {_noun(b)}"
    if form == "all":
        return f"all {plural(a)} are {_plural(b)}"
    return f"{plural(a)} are {_plural(b)}"


def comment(reading: Reading, note: Note) -> str:
    """A step that asserts nothing (no entity and predicate in an 'is' clause)."""
    goal = note.goal
    if note.kind == "no_category":
        return f"The premises do not tell us which category {reading.entity_display} belongs to."
    if note.kind == "unmentioned":
        if is_type_name(goal):
            return f"The premises say nothing about {plural(goal)}."
        return f"The premises say nothing about being {goal}."
    subject = plural(note.subject or goal)
    if is_type_name(goal):
        return f"The premises do not connect {subject} to {plural(goal)}."
    return f"The premises do not say whether {subject} are {goal}."


def choose_voice(*key: object) -> Voice:
    return VOICES[pick(len(VOICES), "voice", *key)]


def write_step(reading: Reading, step: Step, index: int, voice: Voice, dice: Dice) -> str:
    """The sentence of one step (without the ``Step k:`` prefix); ``dice`` slots 3k..3k+2."""
    slot = 3 * index
    if step.kind == "comment":
        assert step.note is not None
        return comment(reading, step.note)
    assert step.conclusion is not None
    if step.kind == "restate":
        template = voice.restate[dice.pick(len(voice.restate), slot)]
        return capitalise(template.format(F=entity_clause(reading, step.conclusion)))
    if step.kind == "prior" or step.rule is None or step.fact is None:
        template = voice.prior[dice.pick(len(voice.prior), slot)]
        return capitalise(template.format(C=entity_clause(reading, step.conclusion)))
    templates = voice.templates
    if step.rule_number is None:
        # A belief cites no premise: never "By premise None".
        templates = tuple(t for t in templates if "{n}" not in t) or (SINCE_RULE_FACT,)
    template = templates[dice.pick(len(templates), slot)]
    form = voice.rule_forms[dice.pick(len(voice.rule_forms), slot + 1)]
    also = voice.also and template == FACT_RULE_SO and dice.pick(2, slot + 2) == 1
    return capitalise(
        template.format(
            R=rule_clause(step.rule, form),
            F=entity_clause(reading, step.fact),
            C=entity_clause(reading, step.conclusion, also=also),
            n=step.rule_number,
        )
    )


def write_cot(
    reading: Reading, steps: Sequence[Step], answer: bool, *, voice: Voice, key: str
) -> str:
    """The whole output: ``Step k: ...`` lines, a blank line, ``Answer: True|False``."""
    dice = Dice(key)
    lines = [
        f"Step {k}: {write_step(reading, step, k, voice, dice)}"
        for k, step in enumerate(steps, start=1)
    ]
    return "\n".join(lines) + f"\n\nAnswer: {'True' if answer else 'False'}"
