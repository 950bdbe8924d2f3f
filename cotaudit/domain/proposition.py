"""Canonical propositions and noun morphology.

``is(alex, bimpus)``, ``not_is(alex, sour)``, ``subtype(bempus, bimpus)``,
``not_subtype(balpus, belpus)``, ``is(7, prime number)``: names are lower-case and singular
(a name of several words is singular in its last word); adjectives stay as they are. Fresh
symbols (``zqbimpus``) are ordinary names.

Morphology: ProntoQA's fictional nouns follow one rule (``bempus`` / ``bempuses``); every
other word goes through the ``inflect`` package (regular, ``-ies``, ``-es``, ``-ves`` and
irregular plurals: ``mice``, ``geese``, ``fish``), imported on first use because its import
takes about two seconds and fictional problems never need it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Literal, TypeAlias

if TYPE_CHECKING:
    import inflect

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


_ENGINE: list[inflect.engine] = []
# Words the English singulariser must leave alone: ProntoQA's singular nouns and adjectives
# end in these (``bempus``, ``nervous``, ``glass``), and so do a few verbs a clause may hand
# over (``is``, ``has``); ``inflect`` would cut them (``nervou``, ``i``).
_KEEP_ENDINGS = ("us", "ss", "is")
_FUNCTION_WORDS = frozenset({"has", "was", "does", "its", "his", "this", "thus", "yes"})


def _engine() -> inflect.engine:
    if not _ENGINE:
        import inflect

        _ENGINE.append(inflect.engine())
    return _ENGINE[0]


@lru_cache(maxsize=65536)
def singular(word: str) -> str:
    """Lower-case singular of a noun; adjectives and singulars unchanged but lower-cased.

    ``bempuses`` -> ``bempus``, ``felines`` -> ``feline``, ``mice`` -> ``mouse``,
    ``butterflies`` -> ``butterfly``, ``prime numbers`` -> ``prime number``; ``nervous``,
    ``sour``, ``bempus``, ``fish`` unchanged.
    """
    w = word.lower()
    head, _, last = w.rpartition(" ")
    if last.endswith("uses") and len(last) > 4:
        last = last[:-2]
    elif last.endswith(_KEEP_ENDINGS) or last in _FUNCTION_WORDS or not last.isalpha():
        pass
    else:
        found = _engine().singular_noun(last)
        if isinstance(found, str) and found:
            last = found
    return f"{head} {last}" if head else last


@lru_cache(maxsize=65536)
def plural(word: str) -> str:
    """Plural of a noun: ProntoQA's rule for its nouns (``bempus`` -> ``bempuses``), English
    for others (``mouse`` -> ``mice``, ``prime number`` -> ``prime numbers``)."""
    if word.endswith("us"):
        return word + "es"
    head, _, last = word.rpartition(" ")
    if not last.isalpha():
        return word
    found = _engine().plural_noun(last)
    last = found if isinstance(found, str) and found else last + "s"
    return f"{head} {last}" if head else last
