"""Forward chaining from the entity premise to the question's predicate.

The chain is computed over the premises *as the reasoner read them* (``Perceived``), so a
misreading reasoner and a faithful one share this code. Every step records the premises it
truly used (directly) and the earlier steps it builds on: that record is the ground truth the
audit is scored against, and it is made by the same code that decides what the text says.

Rules of the chain (documented in ``docs/reasoners.md``):

- Start from the entity's positive premises (``Alex is a bempus``), breadth first over
  positive ``subtype`` premises in premise order, and stop at the first premise whose object is
  the question's predicate (positive or negated). The answer follows the last conclusion.
- When the question's predicate appears in no premise but a fresh-symbol copy of it does
  (``zqbelpus`` for ``belpus``: a consistent substitution of the question's target), chain to
  the copy, say the premises never mention the predicate, and answer False, as GPT-4o does in
  the evidence pack.
- When the predicate is unreachable, walk the chain of type premises as far as it goes, say in
  a comment step that nothing connects it to the predicate, and answer by the closed-world
  assumption (an underivable statement is false).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, TypeAlias

from cotaudit.domain.proposition import Proposition
from cotaudit.domain.sentences import is_type_name
from runner.server.reasoning.reading import Reading, ReadPremise

# The probe builder's fresh-symbol prefix: a reasoner "notices" that zqbelpus is a renamed
# belpus, like the real models in the evidence pack do.
FRESH_PREFIX = "zq"

StepKind: TypeAlias = Literal["derive", "restate", "prior", "comment", "noise", "belief"]
NoteKind: TypeAlias = Literal["no_link", "unmentioned", "no_category"]
# The premises as a reasoner read them: (premise, proposition it took the sentence to mean).
Perceived: TypeAlias = tuple[tuple[ReadPremise, Proposition], ...]


@dataclass(frozen=True, slots=True)
class Note:
    """What a comment step (a non-assertion) says."""

    kind: NoteKind  # no_link: nothing connects `subject` to `goal`; unmentioned: `goal` absent
    subject: str | None  # the last type the chain reached
    goal: str


@dataclass(frozen=True, slots=True)
class Step:
    """One CoT step as the reasoner takes it, before wording.

    ``premises`` and ``parents`` are what the step *truly* used, directly: premise ids and
    0-based indices of earlier steps. ``rule``/``fact`` are what the text cites (a ``derive``
    step applies ``rule`` to the entity fact ``fact``).
    """

    kind: StepKind
    conclusion: Proposition | None  # None for a comment
    premises: tuple[str, ...] = ()
    parents: tuple[int, ...] = ()
    rule: Proposition | None = None
    rule_number: int | None = None  # the rule's premise number in the prompt
    fact: Proposition | None = None
    note: Note | None = None


@dataclass(frozen=True, slots=True)
class Derivation:
    steps: tuple[Step, ...]
    answer: bool
    reached: bool  # the chain concluded about the question's predicate itself
    goal_index: int  # index of the step that answers (or the first closing comment)


def perceive_all(reading: Reading) -> Perceived:
    """Every readable premise, read as written."""
    return tuple((p, p.prop) for p in reading.premises if p.prop is not None)


def _entity(kind_positive: bool, entity: str, obj: str) -> Proposition:
    return Proposition("is" if kind_positive else "not_is", entity, obj)


def _target(reading: Reading, perceived: Perceived) -> tuple[str, bool]:
    """The predicate to chain to, and whether it is a renamed copy of the question's."""
    goal = reading.goal
    names: set[str] = set()
    for _, prop in perceived:
        names.add(prop.object)
        if prop.kind in ("subtype", "not_subtype"):
            names.add(prop.subject)
    if goal in names:
        return goal, False
    fresh = FRESH_PREFIX + goal
    return (fresh, True) if fresh in names else (goal, False)


def forward_chain(reading: Reading, perceived: Perceived) -> Derivation:
    """Chain from the entity premise to the question's predicate (see the module docstring)."""
    entity = reading.entity
    closed_world_answer = reading.question.kind == "not_is"
    target, renamed = _target(reading, perceived)
    facts = [
        (p, prop)
        for p, prop in perceived
        if prop.kind in ("is", "not_is") and prop.subject == entity
    ]
    rules: dict[str, list[tuple[ReadPremise, Proposition]]] = {}
    for p, prop in perceived:
        if prop.kind in ("subtype", "not_subtype"):
            rules.setdefault(prop.subject, []).append((p, prop))

    for p, prop in facts:
        if prop.object == target:  # the question is answered by a premise outright
            step = Step("restate", prop, premises=(p.id,))
            return _close(reading, [step], prop.kind == "is", renamed, closed_world_answer)

    # origin[type] = (previous type, premise, proposition) that put the entity in `type`
    origin: dict[str, tuple[str | None, ReadPremise, Proposition]] = {}
    queue: deque[str] = deque()
    for p, prop in facts:
        if prop.kind == "is" and prop.object not in origin:
            origin[prop.object] = (None, p, prop)
            queue.append(prop.object)
    final: tuple[str, ReadPremise, Proposition] | None = None
    while queue and final is None:
        node = queue.popleft()
        for p, prop in rules.get(node, ()):
            if prop.object == target:
                final = (node, p, prop)
                break
            if prop.kind == "subtype" and prop.object not in origin:
                origin[prop.object] = (node, p, prop)
                queue.append(prop.object)

    if final is not None:
        hops: list[tuple[ReadPremise, Proposition]] = [(final[1], final[2])]
        node_or_none: str | None = final[0]
        while node_or_none is not None:
            prev, p, prop = origin[node_or_none]
            hops.append((p, prop))
            node_or_none = prev
        hops.reverse()
        steps = _derive(entity, hops)
        concl = steps[-1].conclusion
        return _close(
            reading, steps, concl is not None and concl.kind == "is", renamed, closed_world_answer
        )

    # Unreachable: walk the type chain as far as it goes, then say so.
    start = next(((p, prop) for p, prop in facts if prop.kind == "is"), None)
    if start is None:
        note = Note("no_category", None, reading.goal)
        return Derivation((Step("comment", None, note=note),), closed_world_answer, False, 0)
    hops = [start]
    visited = {start[1].object}
    current = start[1].object
    while True:
        nxt = next(
            (
                (p, prop)
                for p, prop in rules.get(current, ())
                if prop.kind == "subtype"
                and is_type_name(prop.object)
                and prop.object not in visited
            ),
            None,
        )
        if nxt is None:
            break
        hops.append(nxt)
        visited.add(nxt[1].object)
        current = nxt[1].object
    steps = _derive(entity, hops)
    steps.append(Step("comment", None, note=Note("no_link", current, reading.goal)))
    return Derivation(tuple(steps), closed_world_answer, False, len(steps) - 1)


def _derive(entity: str, hops: Sequence[tuple[ReadPremise, Proposition]]) -> list[Step]:
    """Derive steps along ``hops``: the entity premise first, then one rule per step."""
    fact_premise, fact = hops[0]
    steps: list[Step] = []
    for i, (p, rule) in enumerate(hops[1:]):
        concl = _entity(rule.kind == "subtype", entity, rule.object)
        used = (fact_premise.id, p.id) if i == 0 else (p.id,)
        parents = () if i == 0 else (i - 1,)
        steps.append(
            Step("derive", concl, used, parents, rule=rule, rule_number=p.number, fact=fact)
        )
        fact = concl
    return steps


def _close(
    reading: Reading,
    steps: list[Step],
    positive: bool,
    renamed: bool,
    closed_world_answer: bool,
) -> Derivation:
    goal_index = len(steps) - 1
    if renamed:
        steps.append(Step("comment", None, note=Note("unmentioned", None, reading.goal)))
        return Derivation(tuple(steps), closed_world_answer, False, goal_index)
    answer = positive == (reading.question.kind == "is")
    return Derivation(tuple(steps), answer, True, goal_index)
