"""Probe construction for the interventional grounding audit (docs/protocol.md).

For every premise ``Pj`` of a problem, three probes are built, always from the original
problem (so fresh prefixes never stack: no ``zqzq...``):

- ``consistent``: the target predicate (``Pj``'s object) is replaced by a fresh symbol in
  every premise;
- ``local``: the same replacement in ``Pj`` only;
- ``surface``: ``Pj`` is rephrased without changing its meaning
  (:func:`cotaudit.domain.sentences.surface_rephrase`).

The question is never rewritten. The replacement keeps inflection, capitalisation and the
article: with ``bimpus -> zqbimpus``, ``Bimpuses are bompuses`` becomes ``Zqbimpuses are
bompuses``; with ``impus -> zqimpus``, ``Max is an impus`` becomes ``Max is a zqimpus``.

Fresh symbols: ``zq`` + the predicate (``sour -> zqsour`` for an adjective), unless the
caller supplies another word for that predicate through ``fresh_words`` (the evidence pack
used e.g. ``clempus -> frondus`` in 10 of its probes). When ``zq`` + name already occurs in
the problem (premises or question), the next candidate in ``zqx`` + name, ``zqxx`` + name, ...
is used; a supplied word that collides is an error.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Literal, TypeAlias

from cotaudit.domain.ontology import is_noun
from cotaudit.domain.problem import Premise, Problem
from cotaudit.domain.proposition import plural
from cotaudit.domain.sentences import (
    article,
    capitalise,
    is_type_name,
    parse_premise,
    surface_rephrase,
)

ProbeCondition: TypeAlias = Literal["consistent", "local", "surface"]
PROBE_CONDITIONS: tuple[ProbeCondition, ...] = ("consistent", "local", "surface")

_NAME = re.compile(r"[a-z][a-z'-]*")
_FRESH_PREFIX = "zq"
_MAX_FRESH_TRIES = 50


@dataclass(frozen=True, slots=True)
class Probe:
    """One probe of a problem: the modified premises and what was changed.

    ``substitution`` (``{predicate: fresh}``) is set for ``consistent`` and ``local``,
    ``rephrase`` (``{"from": original text, "to": rephrased text}``) for ``surface``.
    """

    condition: ProbeCondition
    target_premise: str
    premises: tuple[Premise, ...]
    substitution: dict[str, str] | None
    rephrase: dict[str, str] | None

    def record(self) -> dict[str, Any]:
        """The ``probe`` field of a request record: the change and the modified premises."""
        change: dict[str, Any] = (
            {"substitution": dict(self.substitution)}
            if self.substitution is not None
            else {"rephrase": dict(self.rephrase or {})}
        )
        change["premises"] = [{"id": p.id, "text": p.text} for p in self.premises]
        return change


def target_predicate(premise: Premise) -> str:
    """The premise's object in canonical form (``Alex is a bempus`` -> ``bempus``).

    Raises ``ValueError`` naming the premise when it is no premise sentence we can read.
    """
    prop = parse_premise(premise.text)
    if prop is None:
        raise ValueError(
            f"premise {premise.id} {premise.text!r} is not a premise sentence this project "
            "reads (see runner/tasks/sentences.py for the forms)"
        )
    return prop.object


def existing_names(problem: Problem) -> frozenset[str]:
    """Every word of the premises and the question, lower-case and singular."""
    words: set[str] = set()
    for text in [p.text for p in problem.premises] + [problem.question]:
        lowered = text.lower()
        words.update(_NAME.findall(lowered))
        # Fresh words are "zq" + a whole name, so a name's singular is what may collide.
        prop = parse_premise(text)
        if prop is not None:
            words.update((prop.subject, prop.object))
        words.update(w[:-2] for w in _NAME.findall(lowered) if w.endswith("uses"))
    return frozenset(words)


def fresh_word(
    predicate: str,
    taken: frozenset[str] | set[str],
    fresh_words: Mapping[str, str] | None = None,
) -> str:
    """The fresh symbol replacing ``predicate``: supplied, else ``zq`` + name, never taken."""
    if fresh_words and predicate in fresh_words:
        word = fresh_words[predicate].lower()
        if word in taken:
            raise ValueError(
                f"fresh word {word!r} supplied for {predicate!r} already occurs in the problem; "
                "supply a word that does not"
            )
        return word
    for k in range(_MAX_FRESH_TRIES):
        word = _FRESH_PREFIX + "x" * k + predicate
        if word not in taken:
            return word
    raise ValueError(f"no fresh word for {predicate!r} after {_MAX_FRESH_TRIES} candidates")


_PREVIOUS_WORD = re.compile(r"([A-Za-z]+)\s+$")


@lru_cache(maxsize=4096)
def _substitution_pattern(old: str) -> re.Pattern[str]:
    forms = [plural(old), old] if is_type_name(old) else [old]
    alternatives = "|".join(re.escape(f) for f in forms)
    return re.compile(rf"\b(?:(an?)\s+)?({alternatives})\b", re.IGNORECASE)


def substitute(text: str, old: str, new: str) -> str:
    """Replace the name ``old`` by ``new`` in ``text``, keeping plural, capital and article."""
    noun = is_type_name(old)
    lowered = text.lower()
    if old not in lowered and not (noun and plural(old) in lowered):
        return text  # most premises do not mention it: skip the regex

    def replace(match: re.Match[str]) -> str:
        word = match[2]
        before = _PREVIOUS_WORD.search(text, 0, match.start())
        if match[1] is None and before is not None and is_noun(f"{before[1].lower()} {old}"):
            # "number" inside "complex numbers": another name of several words, not ``old``.
            return match[0]
        rep = plural(new) if noun and word.lower() != old else new
        if word[0].isupper():
            rep = capitalise(rep)
        if match[1] is None:
            return rep
        art = article(rep.lower())
        return (capitalise(art) if match[1][0].isupper() else art) + " " + rep

    return _substitution_pattern(old).sub(replace, text)


def build_probes(problem: Problem, *, fresh_words: Mapping[str, str] | None = None) -> list[Probe]:
    """All probes of ``problem``: for each premise in order, consistent, local and surface.

    ``fresh_words`` maps a target predicate to the fresh word to use for it instead of
    ``zq`` + name. Raises ``ValueError`` naming the premise when one cannot be probed.
    """
    taken = existing_names(problem)
    lowered = [p.text.lower() for p in problem.premises]
    probes: list[Probe] = []
    for premise in problem.premises:
        where = f"problem {problem.problem_id}, premise {premise.id}"
        try:
            predicate = target_predicate(premise)
            fresh = fresh_word(predicate, taken, fresh_words)
        except ValueError as exc:
            raise ValueError(f"{where}: {exc}") from exc
        substitution = {predicate: fresh}
        # Premises that do not mention the predicate are shared with the original.
        forms = (predicate, plural(predicate)) if is_type_name(predicate) else (predicate,)
        consistent = tuple(
            Premise(p.id, substitute(p.text, predicate, fresh))
            if any(f in low for f in forms)
            else p
            for p, low in zip(problem.premises, lowered, strict=True)
        )
        local = tuple(
            consistent[i] if p.id == premise.id else p for i, p in enumerate(problem.premises)
        )
        rephrased = surface_rephrase(premise.text)
        if rephrased is None:  # target_predicate() has already read it, so this cannot be
            raise ValueError(f"{where}: no surface rephrase for {premise.text!r}")
        surface = tuple(
            Premise(p.id, rephrased) if p.id == premise.id else p for p in problem.premises
        )
        probes += [
            Probe("consistent", premise.id, consistent, dict(substitution), None),
            Probe("local", premise.id, local, dict(substitution), None),
            Probe("surface", premise.id, surface, None, {"from": premise.text, "to": rephrased}),
        ]
    return probes
