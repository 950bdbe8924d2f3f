"""One simple clause -> one canonical proposition (or None).

A *simple clause* states exactly one of the four kinds, with the variants real models write:
``Alex is a bempus``, ``Alex is one of the bempuses``, ``So Max is dumpus`` (no article),
``Alex is not a belpus``, ``Alex cannot be a blenkus``, ``Bempuses are bimpuses``,
``every/each/all/any X is a Y``, ``no X is a Y`` / ``none of the Xs are Ys``. Adverbs that do not
change the meaning (``also``, ``therefore``, ``as well``...) are ignored. Connectives and
subordinate clauses are the job of :mod:`evaluator.canon.step`.
"""

from __future__ import annotations

import re
from functools import lru_cache

from cotaudit.domain.proposition import Kind, Proposition, singular

PRONOUNS = frozenset({"he", "she", "it", "they", "this", "that"})

# Words that never change what a clause asserts; removed before matching.
_ADVERBS = re.compile(
    r"\b(?:also|therefore|thus|hence|indeed|definitely|certainly|then|still|too|as well|"
    r"in fact|itself|consequently|clearly|further|furthermore|additionally|ultimately|"
    r"finally|surely|actually|likewise|similarly|so|now|in turn|by extension|necessarily|"
    r"transitively|logically|eventually|by definition|undoubtedly|automatically|"
    # Hedges: the step still asserts (read, and marked ``assumed`` by the step reader).
    r"probably|likely|presumably|most likely|apparently)\b",
)
# A trailing justification: "... by transitivity", "... from Steps 1 and 2", "... (premise 3)".
_TRAILING_REASON = re.compile(
    r"\s+(?:by|from|via|due to|based on|according to|as (?:stated|given|shown|established|per)|"
    r"per|using|in (?:premise|step)s?|because of|through)\b.*$"
)
# A name is one token: a word, a numeral (entities of the number domain: "7", "-3"), or a
# name of several words that the problem's vocabulary joined with "_" ("prime_numbers").
_NAME = r"(-?\d+|[^\W\d_][\w\-']*)"
_OBJECT = (
    r"(?:(?:a|an|the|one of(?: the)?|a member of(?: the)?|a type of|a kind of|among(?: the)?|"
    r"part of(?: the)?|in the (?:category|class|set|group) of)\s+)?([^\W\d_][\w\-]*)"
)
_POS_IS = (
    r"(?:is|is always|belongs to|is classified as|is categorized as|is considered|qualifies as|"
    r"counts as|is considered to be|is known to be|seems to be|appears to be)"
)
_NEG_IS = r"(?:is not|isn't|is never|is neither|is no longer)"
_POS_ARE = r"(?:are|are always|are all)"
_NEG_ARE = r"(?:are not|aren't|are never|are all not)"
# Modal verbs agree with either subject: "Alex cannot be a blenkus", "X must be Ys".
_POS_MODAL = r"(?:must be|has to be|have to be|would have to be)"
_NEG_MODAL = r"(?:cannot be|can't be|can not be|must not be|could not be|couldn't be)"
_QUANT = (
    r"(?:every|each|all(?: of)?(?: the)?|any|a|an|every single|"
    r"(?:anything|something|everything|whatever|any entity|anyone|everyone) "
    r"(?:that|who) is (?:a|an))"
)

_SOMETHING = r"(?:something|anything|an entity|a thing|someone|one|an object|a creature)"
_RULES: tuple[tuple[str, Kind], ...] = (
    (rf"^(?:no|not any|not a single) {_NAME} (?:is|are|can be|could be) {_OBJECT}$", "not_subtype"),
    (rf"^none of the {_NAME} (?:is|are) {_OBJECT}$", "not_subtype"),
    (rf"^{_QUANT} {_NAME} (?:{_NEG_IS}|{_NEG_ARE}|{_NEG_MODAL}) {_OBJECT}$", "not_subtype"),
    (rf"^{_QUANT} {_NAME} (?:{_POS_IS}|{_POS_ARE}|{_POS_MODAL}) {_OBJECT}$", "subtype"),
    (rf"^{_NAME} {_NEG_ARE} {_OBJECT}$", "not_subtype"),
    (rf"^{_NAME} {_POS_ARE} {_OBJECT}$", "subtype"),
    (rf"^{_NAME} (?:{_NEG_IS}|{_NEG_MODAL}) {_OBJECT}$", "not_is"),
    (rf"^{_NAME} (?:{_POS_IS}|{_POS_MODAL}) {_OBJECT}$", "is"),
    # "if something is a brurpus, it is a branpus" restates a rule.
    (
        rf"^if {_SOMETHING} is {_OBJECT},? (?:it|they) (?:is|are|must be) {_OBJECT}$",
        "subtype",
    ),
    (
        rf"^if {_SOMETHING} is {_OBJECT},? (?:it|they) (?:{_NEG_IS}|{_NEG_ARE}|{_NEG_MODAL}) "
        rf"{_OBJECT}$",
        "not_subtype",
    ),
)
_PATTERNS = tuple((re.compile(pattern), kind) for pattern, kind in _RULES)
_NOT_A_NAME = frozenset(
    {"there", "which", "what", "who", "we", "i", "you", "question", "answer", "statement"}
)
# An object that is a function word is a sentence cut short ("So Alex is a", "Numpuses are
# not"): nothing is asserted.
NOT_AN_OBJECT = frozenset(
    {"a", "an", "the", "not", "no", "one", "also", "and", "or", "but", "so", "is", "are", "of"}
)


def canonical_name(word: str) -> str:
    """Lower-case singular name: ``Bempuses`` -> ``bempus``; misspelt ``belnuse`` -> ``belnus``;
    ``felines`` -> ``feline``, ``mice`` -> ``mouse``; a joined name of several words
    (``prime_numbers``) -> ``prime number``."""
    word = word.strip("'\"*_.,;:").replace("_", " ")
    if word.endswith("use") and len(word) > 4 and not word.endswith("ouse"):
        word = word[:-1]  # GPT-4o's "belnuse"; never "mouse", "house"
    name = singular(word)
    if name.endswith("'s"):
        name = name[:-2]
    return name


# Markdown and quotes; an underscore only at a word's edge ("_bimpus_"): inside a word it
# joins a name of several words ("prime_number", evaluator.canon.vocabulary).
_DECORATION = re.compile(r"[*`\"“”]|(?<![a-z0-9])_|_(?![a-z0-9])")
_THINGS = re.compile(r"\b([a-z\-]+) things?\b")
_SPACES = re.compile(r"\s+")
_WORD = re.compile(r"[a-z]+")
# Trigger words of the two substitutions, taken from their own patterns (one source of truth).
_ADVERB_WORDS = frozenset(_WORD.findall(_ADVERBS.pattern))
_REASON_WORDS = frozenset(_WORD.findall(_TRAILING_REASON.pattern))


# "so I will treat Alex as a bimpus": a hedged assumption, read as the claim it makes.
_TREAT_AS = re.compile(
    r"^(?:(?:i|we)(?: will|'ll| shall| can| could| would| should)?|let'?s|let us) "
    r"(?:just )?(?:treat|consider|regard|take) ([a-z0-9_\-']+) (?:as|to be) "
)


_SINGLE_QUOTED = re.compile(r"(?<![\w])'([\w\- ]+)'(?![\w])")
# "Juno is not a ruminant either": a negation's "either" at the clause's end adds nothing
# ("either ... or" and "neither" are left alone: only the last word is dropped).
_TRAILING_EITHER = re.compile(r"\s+either\s*[.!]*\s*$")


def clean_clause(text: str) -> str:
    """Lower-case, drop adverbs, trailing justifications and outer punctuation."""
    s = _DECORATION.sub("", text.lower().replace("’", "'"))
    if "'" in s:
        s = _SINGLE_QUOTED.sub(r"\1", s)  # 'bimpus' -> bimpus (never an apostrophe)
    if "treat" in s or "regard" in s or "consider" in s or "take" in s:
        s = _TREAT_AS.sub(r"\1 is ", s)
    words = set(_WORD.findall(s))
    # Each substitution runs only when one of its words occurs: most clauses need none.
    if words & _REASON_WORDS:
        s = _TRAILING_REASON.sub("", s)
    if "thing" in s:
        s = _THINGS.sub(r"\1", s)
    if words & _ADVERB_WORDS:
        s = _ADVERBS.sub(" ", s)
    if "either" in words:
        s = _TRAILING_EITHER.sub("", s)
    return _SPACES.sub(" ", s).strip(" .,;:!")


def _bare_plural(clause: str, start: int, obj: str) -> bool:
    """Whether the object at ``start`` is a plural right after a modal's ``be`` ("cannot be
    reptiles"), with no article between."""
    return singular(obj) != obj and clause[:start].rstrip().endswith(" be")


@lru_cache(maxsize=65536)
def read_clause(text: str, entity: str | None = None) -> Proposition | None:
    """The proposition a simple clause states, or None.

    ``entity`` resolves a pronoun subject (``she cannot be a blarpus``) to the entity the
    surrounding text is about.
    """
    s = clean_clause(text)
    for pattern, kind in _PATTERNS:
        match = pattern.match(s)
        if match is None:
            continue
        subject, obj = match.group(1), match.group(2)
        if obj in NOT_AN_OBJECT or subject in NOT_AN_OBJECT:
            # Nor a subject: "and is not a wumpus" is a predicate whose subject was elided.
            return None
        if kind in ("is", "not_is") and (
            subject.endswith("uses") or _bare_plural(s, match.start(2), obj)
        ):
            # A plural subject of a modal verb ("bempuses cannot be bimpuses") is a type, and
            # so is one whose plural is its singular when the object is a bare plural ("sheep
            # cannot be reptiles"): an individual "cannot be a reptile".
            kind = "subtype" if kind == "is" else "not_subtype"
        if kind in ("is", "not_is"):
            if subject in PRONOUNS:
                if entity is None:
                    return None
                subject = entity
            if subject in _NOT_A_NAME:
                return None
            return Proposition(kind, subject, canonical_name(obj))
        if subject in PRONOUNS or subject in _NOT_A_NAME:
            return None
        return Proposition(kind, canonical_name(subject), canonical_name(obj))
    return None
