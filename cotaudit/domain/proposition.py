"""Canonical propositions and the noun morphology of ProntoQA's fictional ontology.

``is(alex, bimpus)``, ``not_is(alex, sour)``, ``subtype(bempus, bimpus)``,
``not_subtype(balpus, belpus)``: names are lower-case and singular; adjectives stay as they
are. Fresh symbols (``zqbimpus``) are ordinary names.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal, TypeAlias

Kind: TypeAlias = Literal["is", "not_is", "subtype", "not_subtype"]
KINDS: tuple[Kind, ...] = ("is", "not_is", "subtype", "not_subtype")

_CANONICAL = re.compile(
    r"^\s*(is|not_is|subtype|not_subtype)\(\s*([^,()]+?)\s*,\s*([^,()]+?)\s*\)\s*$"
)


@dataclass(frozen=True, slots=True)
class Proposition:
    kind: Kind
    subject: str  # entity name (is/not_is) or type (subtype/not_subtype), canonical form
    object: str  # the predicate: a type or an adjective, canonical form

    @property
    def negated(self) -> bool:
        return self.kind in ("not_is", "not_subtype")

    def __str__(self) -> str:
        return f"{self.kind}({self.subject}, {self.object})"


def parse_canonical(text: str) -> Proposition:
    """Parse ``is(alex, bimpus)``; raises ValueError on anything else."""
    match = _CANONICAL.match(text)
    if match is None:
        raise ValueError(f"not a canonical proposition: {text!r}")
    kind, subject, obj = match.groups()
    return Proposition(kind, subject.lower(), obj.lower())  # type: ignore[arg-type]


def singular(word: str) -> str:
    """Lower-case singular of a ProntoQA noun; other words unchanged but lower-cased.

    ``bempuses`` -> ``bempus``, ``impuses`` -> ``impus``; ``nervous``, ``sour`` unchanged.
    """
    w = word.lower()
    if w.endswith("uses") and len(w) > 4:
        return w[:-2]
    return w


def plural(word: str) -> str:
    """Plural of a ProntoQA noun (``bempus`` -> ``bempuses``)."""
    if word.endswith("us"):
        return word + "es"
    if word.endswith(("s", "x", "sh", "ch")):
        return word + "es"
    if word.endswith("y") and len(word) > 1 and word[-2] not in "aeiou":
        return word[:-1] + "ies"
    return word + "s"
