"""Clean premise sentences <-> canonical propositions, in every form our data sources use.

Parsed forms (any case, with or without a final period)::

    Bempuses are bimpuses            subtype(bempus, bimpus)        style "plural"
    Balpuses are not belpuses        not_subtype(balpus, belpus)    style "plural"
    Wumpuses are not feisty          not_subtype(wumpus, feisty)    style "plural"
    All bempuses are bimpuses        subtype(bempus, bimpus)        style "all"
    Each yumpus is a dumpus          subtype(yumpus, dumpus)        style "each"
    Every X is a Y / Every X is not Y                               style "every"
    No balpus is a belpus            not_subtype(balpus, belpus)    style "no"
    Alex is a bempus / Alex is not an impus / Max is sour           style "plural"
    Alex is one of the bempuses      is(alex, bempus)               style "one_of"
    It is true that Max is sour      is(max, sour)                  style "true_that"

A subject that carries no quantifier and is followed by ``is`` is an entity (a name or a
numeral: ``7 is a prime number``); a plural subject followed by ``are``, or a quantified one,
is a type. Names may have up to three words (``prime number``, ``natural number``). Objects
are singularised with :func:`cotaudit.domain.proposition.singular`, so adjectives stay as they
are and real plurals become singular (``Felines are carnivores`` -> ``subtype(feline,
carnivore)``).

Nouns versus adjectives: a canonical object is rendered as a noun (with an article, plural
where needed) when :func:`is_type_name` says so: it ends in ``us`` but not ``ous`` (every
ProntoQA type name and every fresh symbol we make from one: ``bempus``, ``zqbimpus``,
``frondus``), or it is a category of the real-word ontologies (``cat``, ``prime number``,
``zqcat``: :mod:`cotaudit.domain.ontology`); anything else is an adjective (``sour``,
``nervous``, ``zqsour``).

This module is on the simulated reasoners' hot path: regexes are compiled once and parses are
memoised.
"""

from __future__ import annotations

import re
from functools import lru_cache

from cotaudit.domain.ontology import is_noun
from cotaudit.domain.proposition import Kind, Proposition, plural, singular

STYLES: tuple[str, ...] = ("plural", "all", "each", "every", "no", "one_of", "true_that")

# A name: a word or numeral, perhaps followed by one more word ("prime number"); never a
# determiner ("The sky is ...") nor a word of the sentence's own grammar.
_WORD = (
    r"((?:-?\d+|(?!(?:the|this|that|these|those|there)\b)[a-z][a-z'-]*)"
    r"(?: (?!(?:not|a|an|the|is|are|of)\b)[a-z][a-z'-]*)?)"
)
_ART = r"(?:an?\s+)?"
_NOT = r"(not\s+)?"

# Order matters: quantified forms first, so that "each" is never read as an entity name.
_NO = re.compile(rf"^no\s+{_WORD}\s+is\s+{_ART}{_WORD}$")
_EACH = re.compile(rf"^(each|every)\s+{_WORD}\s+is\s+{_NOT}{_ART}{_WORD}$")
_ALL = re.compile(rf"^all\s+{_WORD}\s+are\s+{_NOT}{_WORD}$")
_ARE = re.compile(rf"^{_WORD}\s+are\s+{_NOT}{_WORD}$")
_ONE_OF = re.compile(rf"^{_WORD}\s+is\s+{_NOT}one\s+of\s+the\s+{_WORD}$")
_TRUE_THAT = re.compile(rf"^it\s+is\s+{_NOT}true\s+that\s+{_WORD}\s+is\s+{_ART}{_WORD}$")
_IS = re.compile(rf"^{_WORD}\s+is\s+{_NOT}{_ART}{_WORD}$")
_SPACES = re.compile(r"\s+")
_QUANTIFIERS = frozenset({"each", "every", "no", "all", "it", "some", "there"})
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=\S)")


def is_type_name(name: str) -> bool:
    """True for a noun (``bempus``, ``zqbimpus``, ``cat``, ``prime number``), False for an
    adjective (``sour``, ``nervous``)."""
    return (name.endswith("us") and not name.endswith("ous")) or is_noun(name)


def capitalise(text: str) -> str:
    """Upper-case the first character only (``zqbimpuses are ...`` -> ``Zqbimpuses ...``)."""
    return text[:1].upper() + text[1:]


def article(name: str) -> str:
    """``a`` or ``an`` before a noun, as ProntoQA writes them (``an impus``, ``an integer``)."""
    return "an" if name[:1] in "aeiou" else "a"


def _normalise(text: str) -> str:
    text = _SPACES.sub(" ", text.strip()).lower()
    return text.rstrip(". ").strip()


@lru_cache(maxsize=65536)
def parse_premise_styled(text: str) -> tuple[Proposition, str] | None:
    """Parse a premise sentence into ``(proposition, style)``; ``None`` if it is no premise.

    ``style`` is one of :data:`STYLES` and says which surface form the sentence used (the
    surface probe rephrases into a different one).
    """
    s = _normalise(text)
    kind: Kind
    if not s:
        return None
    m = _NO.match(s)
    if m:
        return Proposition("not_subtype", singular(m[1]), singular(m[2])), "no"
    m = _EACH.match(s)
    if m:
        kind = "not_subtype" if m[3] else "subtype"
        return Proposition(kind, singular(m[2]), singular(m[4])), m[1]
    m = _ALL.match(s)
    if m:
        kind = "not_subtype" if m[2] else "subtype"
        return Proposition(kind, singular(m[1]), singular(m[3])), "all"
    m = _ONE_OF.match(s)
    if m and m[1] not in _QUANTIFIERS:
        kind = "not_is" if m[2] else "is"
        return Proposition(kind, m[1], singular(m[3])), "one_of"
    m = _TRUE_THAT.match(s)
    if m and m[2] not in _QUANTIFIERS:
        kind = "not_is" if m[1] else "is"
        return Proposition(kind, m[2], singular(m[3])), "true_that"
    m = _ARE.match(s)
    if m and m[1] not in _QUANTIFIERS:
        kind = "not_subtype" if m[2] else "subtype"
        return Proposition(kind, singular(m[1]), singular(m[3])), "plural"
    m = _IS.match(s)
    if m and m[1] not in _QUANTIFIERS:
        kind = "not_is" if m[2] else "is"
        return Proposition(kind, m[1], singular(m[3])), "plural"
    return None


def parse_premise(text: str) -> Proposition | None:
    """The canonical proposition of a clean premise sentence, or ``None``.

    >>> str(parse_premise("Balpuses are not belpuses."))
    'not_subtype(balpus, belpus)'
    """
    parsed = parse_premise_styled(text)
    return None if parsed is None else parsed[0]


def _object_phrase(name: str, *, plural_form: bool) -> str:
    if not is_type_name(name):
        return name
    return plural(name) if plural_form else f"{article(name)} {name}"


@lru_cache(maxsize=65536)
def render_premise(prop: Proposition, style: str = "plural") -> str:
    """Render a proposition as a premise sentence (no final period) in ``style``.

    Type-level propositions: ``plural`` ("Bempuses are bimpuses", "Balpuses are not
    belpuses"), ``all`` ("All bempuses are bimpuses"), ``each`` / ``every`` ("Each X is a
    Y", "Every X is not Y"), ``no`` ("No X is a Y", negative only). Entity propositions:
    ``plural`` ("Alex is a bempus", "Max is not sour"), ``one_of`` ("Alex is one of the
    bempuses", nouns only), ``true_that`` ("It is true that Max is sour"). Raises
    ``ValueError`` for a style that cannot express the proposition.
    """
    subject, obj, negated = prop.subject, prop.object, prop.negated
    neg = "not " if negated else ""
    if prop.kind in ("subtype", "not_subtype"):
        if style == "plural":
            return f"{capitalise(plural(subject))} are {neg}{_object_phrase(obj, plural_form=True)}"
        if style == "all" and not negated:
            return f"All {plural(subject)} are {_object_phrase(obj, plural_form=True)}"
        if style in ("each", "every"):
            quantifier = capitalise(style)
            return f"{quantifier} {subject} is {neg}{_object_phrase(obj, plural_form=False)}"
        if style == "no" and negated:
            return f"No {subject} is {_object_phrase(obj, plural_form=False)}"
    else:
        name = capitalise(subject)
        if style == "plural":
            return f"{name} is {neg}{_object_phrase(obj, plural_form=False)}"
        if style == "one_of" and is_type_name(obj):
            return f"{name} is {neg}one of the {plural(obj)}"
        if style == "true_that":
            return f"It is {neg}true that {name} is {_object_phrase(obj, plural_form=False)}"
    raise ValueError(f"style {style!r} cannot express {prop}; use one of {', '.join(STYLES)}")


# The surface control's meaning-preserving rephrase: from the style a premise is written in
# to the style it is rewritten in. The first three rows are the paper's rules
# (config/audit_policy.json); the others extend them to the forms of the other sources.
_SURFACE_STYLE: dict[tuple[str, bool, bool], str] = {
    # (style, is entity-level, negated) -> target style
    ("plural", False, False): "every",  # Xs are Ys -> Every X is a Y
    ("plural", False, True): "no",  # Xs are not Ys -> No X is a Y
    ("plural", True, False): "one_of",  # X is a Y -> X is one of the Ys
    ("plural", True, True): "one_of",  # X is not a Y -> X is not one of the Ys
    ("all", False, False): "every",
    ("all", False, True): "no",
    ("each", False, False): "plural",
    ("every", False, False): "plural",
    ("each", False, True): "no",
    ("every", False, True): "no",
    ("no", False, True): "plural",
    ("one_of", True, False): "plural",
    ("one_of", True, True): "plural",
    ("true_that", True, False): "plural",
    ("true_that", True, True): "plural",
}


def surface_rephrase(text: str) -> str | None:
    """The surface control's rephrase of a premise, or ``None`` when it is no premise.

    ``Xs are Ys`` -> ``Every X is a Y``; ``Xs are not Ys`` -> ``No X is a Y``; ``X is a Y`` ->
    ``X is one of the Ys`` (the paper's rules), and the inverse direction for premises
    already in a quantified form. An entity premise with an adjective (``Max is sour``),
    which has no "one of" form, becomes ``It is true that Max is sour``.
    """
    parsed = parse_premise_styled(text)
    if parsed is None:
        return None
    prop, style = parsed
    entity = prop.kind in ("is", "not_is")
    target = _SURFACE_STYLE[(style, entity, prop.negated)]
    if target == "one_of" and not is_type_name(prop.object):
        target = "true_that"
    return render_premise(prop, target)


def split_premise_sentences(context: str) -> list[str]:
    """Split a paragraph into sentences, each stripped of spaces and its final period.

    ``"Jompuses are not shy. Max is a yumpus."`` -> ``["Jompuses are not shy", "Max is a
    yumpus"]``. Empty pieces are dropped.
    """
    out = []
    for piece in _SENTENCE_END.split(context.strip()):
        s = piece.strip().rstrip(".").strip()
        if s:
            out.append(s)
    return out


_QUESTION = re.compile(rf"^is\s+{_WORD}\s+{_NOT}{_ART}{_WORD}\s*\?$")


def render_question(prop: Proposition) -> str:
    """The paper's yes/no question about an entity proposition: ``Is Alex a belpus?``.

    The question is always asked in the positive (``not_is(max, sour)`` -> ``Is Max
    sour?``): the answer then says whether the positive statement holds, as in the paper.
    """
    if prop.kind not in ("is", "not_is"):
        raise ValueError(f"a question is about an entity, not a type: {prop}")
    return f"Is {capitalise(prop.subject)} {_object_phrase(prop.object, plural_form=False)}?"


@lru_cache(maxsize=8192)
def parse_question(text: str) -> Proposition | None:
    """``Is Alex a belpus?`` -> ``is(alex, belpus)`` (``Is Max not sour?`` -> ``not_is``)."""
    m = _QUESTION.match(_SPACES.sub(" ", text.strip()).lower())
    if m is None or m[1] in _QUANTIFIERS:
        return None
    return Proposition("not_is" if m[2] else "is", m[1], singular(m[3]))
