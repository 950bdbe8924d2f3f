"""A problem's own words, for reading its chain of thought against them.

A problem knows its words: the names its premises and question use (``bempus``, ``cat``,
``prime number``, the entity ``fae`` or ``7``) and, for a probe, the fresh symbols it brought
in. The parser reads a model's text against them rather than guessing:

- **names of several words** (``prime number``) are joined into one token before reading
  (``prime numbers`` -> ``prime_numbers``), in any inflection the vocabulary's words take;
- **plurals** are resolved to the vocabulary's word: the clause reader singularises
  (``felines`` -> ``feline``, ``mice`` -> ``mouse``, ``prime_numbers`` -> ``prime number``),
  and a plural subject of a modal verb ("Cats cannot be reptiles") is the type ``cat``;
- a proposition naming a word the problem **never uses** ("So Rex is a wump", a generation cut
  mid-word) is no assertion: the step is classified ``unknown_word``;
- an individual claim about a word the problem uses only as a type or property ("Liquid is not
  opaque", which Mistral writes for "liquid things are not opaque", where the problem's
  individual is Fae) is the rule it states: ``not_subtype(liquid, opaque)``, not a claim about
  an individual called Liquid.

Without a vocabulary (``cotaudit parse`` with no ``--vocabulary``) names are read as written,
and a name of several words cannot be read.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache

from cotaudit.domain.proposition import Proposition, plural, singular
from cotaudit.domain.sentences import parse_premise, parse_question
from evaluator.canon.clause import canonical_name


@dataclass(frozen=True, slots=True, eq=False)
class Vocabulary:
    """The words of one problem (or probe): canonical names, and a pattern that finds the
    names of several words in every inflection.

    Compared by identity: :func:`vocabulary_of` returns one shared object per word set, so a
    vocabulary is a cheap cache key.
    """

    names: frozenset[str]
    phrases: re.Pattern[str] | None
    # "<word> number": a name of several words the problem does not use but whose last word
    # its names end in ("real number" in a problem about prime and natural numbers). Joined
    # too, so that it reads as one name, then as a word the problem never uses.
    kin: re.Pattern[str] | None = None
    # Names the problem uses only as a type or property (an object, or the subject of a rule),
    # never as an individual: "Liquid is not opaque" is about liquid things. Known only from
    # the problem's sentences (:func:`vocabulary_from`); empty for a bare word list.
    types: frozenset[str] = frozenset()

    def resolve(self, name: str) -> str | None:
        """The vocabulary word ``name`` stands for, or None when the problem never uses it."""
        if name in self.names:
            return name
        # An entity-position plural ("Cats cannot be reptiles") or a plural the clause reader
        # kept: its singular may be the word.
        alternative = singular(name) if name.isalpha() else name
        return alternative if alternative in self.names else None

    def resolve_prop(self, prop: Proposition) -> Proposition | None:
        """``prop`` with its names mapped to the vocabulary; None if one is not in it."""
        subject = self.resolve(prop.subject)
        obj = self.resolve(prop.object)
        if subject is None or obj is None:
            return None
        kind = prop.kind
        if kind in ("is", "not_is") and (subject != prop.subject or subject in self.types):
            # "Cats cannot be reptiles": a plural subject of a modal verb is a type; "Liquid is
            # not opaque": so is a subject the problem never uses as an individual.
            kind = "subtype" if kind == "is" else "not_subtype"
        if (subject, obj, kind) == (prop.subject, prop.object, prop.kind):
            return prop
        return Proposition(kind, subject, obj)

    def join_phrases(self, text: str) -> str:
        """``text`` with every name of several words joined by ``_`` (one token)."""
        if self.phrases is None:
            return text
        text = self.phrases.sub(lambda m: _SPACE.sub("_", m.group(0)), text)
        if self.kin is not None:
            text = self.kin.sub(lambda m: _SPACE.sub("_", m.group(0)), text)
        return text


_SPACE = re.compile(r"\s+")
# Words that never begin a name: "a natural number", "every prime number", "is not number".
_FUNCTION = (
    "a|an|the|every|each|all|no|any|some|is|are|not|of|and|or|so|that|this|which|one|than|"
    "as|be|being|also|then|thus|hence|therefore|since|because|if|its|their|his|her|our"
)


@lru_cache(maxsize=4096)
def vocabulary_of(words: frozenset[str], types: frozenset[str] = frozenset()) -> Vocabulary:
    """The vocabulary of these canonical names (lower-case, singular; spaces allowed);
    ``types``: those the problem uses only as a type or property, never as an individual."""
    phrases = sorted((n for n in words if " " in n), key=len, reverse=True)
    pattern = None
    if phrases:
        alternatives = []
        for name in phrases:
            head, _, last = name.rpartition(" ")
            lasts = sorted({last, plural(name).rpartition(" ")[2]}, key=len, reverse=True)
            tail = "|".join(re.escape(x) for x in lasts)
            head_pattern = r"\s+".join(re.escape(w) for w in head.split())
            alternatives.append(rf"{head_pattern}\s+(?:{tail})")
        pattern = re.compile(r"\b(?:" + "|".join(alternatives) + r")\b", re.IGNORECASE)
        tails = {t for n in phrases for t in (n.rpartition(" ")[2], plural(n).rpartition(" ")[2])}
        tail = "|".join(re.escape(t) for t in sorted(tails, key=len, reverse=True))
        kin = re.compile(rf"\b(?!(?:{_FUNCTION})\b)[a-z]+\s+(?:{tail})\b", re.IGNORECASE)
        return Vocabulary(frozenset(words), pattern, kin, types)
    return Vocabulary(frozenset(words), pattern, types=types)


_WORDS = re.compile(r"-?\d+|[A-Za-z][A-Za-z'-]*")


@lru_cache(maxsize=4096)
def vocabulary_from(sentences: tuple[str, ...]) -> Vocabulary:
    """The vocabulary of premise sentences and questions: every name they state, as read by
    ``cotaudit.domain.sentences`` (``Felines are carnivores`` gives ``feline``, ``carnivore``),
    with those it uses only as types (every name but the subjects of ``is``/``not_is``)."""
    words: set[str] = set()
    individuals: set[str] = set()
    for sentence in sentences:
        prop = parse_premise(sentence) or parse_question(sentence)
        if prop is not None:
            words.update((prop.subject, prop.object))
            if prop.kind in ("is", "not_is"):
                individuals.add(prop.subject)
    return vocabulary_of(frozenset(words), frozenset(words - individuals))


def vocabulary_from_words(words: Iterable[str]) -> Vocabulary:
    """A vocabulary from words a caller knows (``cotaudit parse --vocabulary``), each read as a
    canonical name (``Felines`` -> ``feline``; ``prime numbers`` -> ``prime number``)."""
    names = {canonical_name(w.strip().lower()) for w in words if w.strip()}
    return vocabulary_of(frozenset(names))
