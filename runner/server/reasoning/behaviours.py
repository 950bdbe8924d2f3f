"""How each simulated reasoner departs from faithful forward chaining.

Each function is a pure transformation: of what is read (``misread``) or of the derived
steps (``restate_entity``, ``take_shortcut``, ``add_noise``), keeping every step's record of
what it truly used correct, so the truth record stays the behaviour's own account.
"""

from __future__ import annotations

from dataclasses import replace

from cotaudit.domain.ontology import NOUNS, ancestors
from cotaudit.domain.proposition import Proposition
from cotaudit.domain.sentences import is_type_name
from runner.server.reasoning.chain import Derivation, Perceived, Step
from runner.server.reasoning.chance import pick, unit
from runner.server.reasoning.reading import Reading

_NEGATE = {"is": "not_is", "not_is": "is", "subtype": "not_subtype", "not_subtype": "subtype"}


def negate(prop: Proposition) -> Proposition:
    """The proposition with its polarity flipped."""
    return Proposition(_NEGATE[prop.kind], prop.subject, prop.object)  # type: ignore[arg-type]


def misread(reading: Reading, perceived: Perceived, *, p: float, salt: str) -> Perceived:
    """Misread premises written in a surface-rephrase form, each with probability ``p``.

    Whether premise ``Pj`` of a problem *would* be misread is keyed by the question text and
    ``Pj`` (stable across probes); it happens when ``Pj`` is written in a rephrase form: a
    negated one loses its negation, a positive one is not understood (the chain stops there).
    """
    out = []
    for premise, prop in perceived:
        if premise.surface_form and unit(salt, "misread", reading.question_text, premise.id) < p:
            if prop.negated:
                out.append((premise, negate(prop)))
            # a positive one is not understood at all: the chain stops there
            continue
        out.append((premise, prop))
    return tuple(out)


def restate_entity(reading: Reading, derivation: Derivation, perceived: Perceived) -> Derivation:
    """Prepend a step restating the entity premise ("Alex is a bempus.")."""
    fact = next(
        (
            (premise, prop)
            for premise, prop in perceived
            if prop.kind in ("is", "not_is") and prop.subject == reading.entity
        ),
        None,
    )
    if fact is None or derivation.steps[0].kind == "restate":
        return derivation
    premise, prop = fact
    first = Step("restate", prop, premises=(premise.id,), rule_number=premise.number)
    shifted = [replace(s, parents=tuple(i + 1 for i in s.parents)) for s in derivation.steps]
    return replace(derivation, steps=(first, *shifted), goal_index=derivation.goal_index + 1)


def takes_shortcut(reading: Reading, *, p: float, salt: str) -> bool:
    """Whether the shortcut applies to this problem (keyed by its question: probe-stable)."""
    return unit(salt, "shortcut", reading.question_text) < p


def take_shortcut(reading: Reading, derivation: Derivation, *, prior: bool) -> Derivation:
    """Replace the answering step (and anything after it) with a conclusion from a prior.

    The new last step states the question's predicate with the prior's polarity ("Therefore,
    Alex is not a belpus."), using no premise and no earlier step; the answer follows it.
    """
    concl = Proposition("is" if prior else "not_is", reading.entity, reading.goal)
    steps = (*derivation.steps[: derivation.goal_index], Step("prior", concl))
    answer = prior == (reading.question.kind == "is")
    return Derivation(steps, answer, True, len(steps) - 1)


def add_noise(reading: Reading, derivation: Derivation, *, p: float, key: str) -> Derivation:
    """Vary each derived step's conclusion with probability ``p`` (keyed by ``key``).

    A varied intermediate step is either skipped (the next step does its work as well) or
    names a different type (a slip: the next step still builds on the right fact). A varied
    answering step flips its polarity, and the answer with it.
    """
    steps = list(derivation.steps)
    answer = derivation.answer
    goal_index = derivation.goal_index
    # Draws are keyed by each step's index in the faithful derivation, not its current
    # position: after a skip, the step that moved into position i gets its own draw (keyed
    # by position, it would re-draw the skipped step's numbers, vary too and be skipped in
    # turn, collapsing the rest of the chain into a flipped answer every time).
    origin = list(range(len(steps)))
    i = 0
    while i < len(steps):
        step, j = steps[i], origin[i]
        if step.kind != "derive" or unit(key, "noise", j) >= p:
            i += 1
            continue
        is_answer = derivation.reached and i == goal_index
        nxt = steps[i + 1] if i + 1 < len(steps) else None
        assert step.conclusion is not None
        if is_answer:
            steps[i] = replace(step, kind="noise", conclusion=negate(step.conclusion))
            answer = not answer
        elif nxt is not None and nxt.kind == "derive" and unit(key, "skip", j) < 0.5:
            steps[i + 1] = replace(
                nxt, premises=step.premises + nxt.premises, parents=step.parents, fact=step.fact
            )
            steps = _drop(steps, i)
            del origin[i]
            goal_index -= 1
            continue  # the next step, now at i, takes its own draw
        else:
            other = _other_type(reading, step.conclusion, key, j)
            steps[i] = replace(step, kind="noise", conclusion=other, premises=(), parents=())
            if nxt is not None and nxt.kind == "derive":
                steps[i + 1] = replace(
                    nxt, premises=step.premises + nxt.premises, parents=step.parents
                )
        i += 1
    return Derivation(tuple(steps), answer, derivation.reached, goal_index)


def _drop(steps: list[Step], index: int) -> list[Step]:
    """Remove ``steps[index]``; later steps' parent indices shift down by one."""
    out = []
    for j, s in enumerate(steps):
        if j == index:
            continue
        parents = tuple(k - 1 if k > index else k for k in s.parents if k != index)
        out.append(replace(s, parents=parents) if parents != s.parents else s)
    return out


def _other_type(reading: Reading, concl: Proposition, key: str, i: int) -> Proposition:
    """A different type named in the premises (the slip of a noisy step)."""
    names = sorted(
        {
            name
            for prem in reading.premises
            if prem.prop is not None
            for name in (prem.prop.subject, prem.prop.object)
            if is_type_name(name) and name != concl.object
        }
    )
    if not names:
        return negate(concl)
    return Proposition(concl.kind, concl.subject, names[pick(len(names), key, "other", i)])


def from_world_knowledge(reading: Reading, perceived: Perceived) -> Derivation | None:
    """Answer from what the reasoner believes is true of the world, not from the premises.

    It reads one premise, the one saying what the entity is ("Fae is a cat"); when that is a
    real category it knows (:mod:`cotaudit.domain.ontology`), it walks up its own taxonomy one
    step per category ("Since cats are felines and Fae is a cat, Fae is a feline.") until it
    reaches the question's predicate, or else to the top, and then denies the predicate
    ("Therefore, Fae is not a reptile."). Each step truly used the entity premise (the first)
    or nothing but the step before: the rule premises that say the same are ignored, which is
    what a grounding audit should catch. None when the entity's category is not a real one
    (a fictional word, or one a probe renamed): the reasoner then reads the premises like
    ``faithful``.
    """
    fact = next(
        (
            (premise, prop)
            for premise, prop in perceived
            if prop.kind == "is" and prop.subject == reading.entity and prop.object in NOUNS
        ),
        None,
    )
    if fact is None:
        return None
    premise, known = fact
    goal = reading.goal
    steps: list[Step] = []
    current = known
    for category in ancestors(known.object):
        belief = Proposition("subtype", current.object, category)
        concl = Proposition("is", reading.entity, category)
        used = (premise.id,) if not steps else ()
        parents = (len(steps) - 1,) if steps else ()
        steps.append(Step("belief", concl, used, parents, rule=belief, fact=current))
        current = concl
        if category == goal:
            answer = reading.question.kind == "is"
            return Derivation(tuple(steps), answer, True, len(steps) - 1)
    # The predicate is not above the entity's category: deny it.
    denial = Proposition("not_is", reading.entity, goal)
    used = (premise.id,) if not steps else ()
    parents = (len(steps) - 1,) if steps else ()
    steps.append(Step("belief", denial, used, parents))
    answer = reading.question.kind == "not_is"
    return Derivation(tuple(steps), answer, True, len(steps) - 1)
