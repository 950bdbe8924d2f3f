"""One CoT step -> its main asserted conclusion, or a classified non-assertion.

The step is cut into clauses at commas, semicolons and clause-level connectives, and each
clause gets a role from the word that introduces it:

- ``since/because/given that/as`` open *reasons* (``and`` continues them);
- ``so/therefore/thus/hence/which means/it follows that/we conclude`` open *conclusions*;
- ``if/suppose/assuming/without/unless`` open *conditions*, and the clause they govern is a
  *hypothetical consequent*;
- ``but/however/yet/although`` open a *contrast*;
- anything else is a *main* clause.

The conclusion of the step is its last conclusion clause, else its last main or contrast
clause, else its last consequent (the last clause of "Since A and B, C" is main; "A, and B, so
C" concludes C). Then: a consequent is a ``hypothetical`` (or the comment it states); a
comment (``we cannot determine``, ``there is no information``...), goal, answer, question or
subjunctive (``would``, ``were``) clause is a non-assertion of that category, except that a
contrast remark after an assertion leaves the assertion as the conclusion; a clause of one of
the four kinds is an assertion; anything else is unparseable. Citations (``premise 2``,
``(Premise 3)``, ``by premise 1``, ``premises 1 to 3``) are recorded and removed before
reading. ``docs/parsing.md`` gives the full order with examples.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Literal, TypeAlias

from cotaudit.domain.proposition import Proposition
from evaluator.canon.clause import PRONOUNS, read_clause
from evaluator.canon.letters import normalise_letters
from evaluator.canon.vocabulary import Vocabulary

Status: TypeAlias = Literal["assertion", "non_assertion", "unparseable"]
Role: TypeAlias = Literal["main", "contrast", "reason", "conclusion", "condition", "consequent"]

# Non-assertion categories, in the order they are tested.
CATEGORIES: tuple[str, ...] = ("question", "answer", "comment", "goal", "hypothetical")
# Set after reading, not from a clause's words: a sentence cut off by the token limit
# (``evaluator.canon.cot``), and a proposition naming a word the problem never uses.
TRUNCATED = "truncated"
UNKNOWN_WORD = "unknown_word"

_CITATION = re.compile(
    r"\b(?:premises?|p)\s*#?\s*(\d+(?:\s*(?:,|and|&|or|to|through|-|–)\s*(?:premise\s*|p)?\d+)*)",
    re.IGNORECASE,
)
_RANGE = re.compile(r"(\d+)\s*(?:to|through|-|–)\s*(?:premise\s*|p)?(\d+)", re.IGNORECASE)
# "the second premise", "the 2nd premise", "premise two": a premise named in words.
_ORDINALS = (
    "first",
    "second",
    "third",
    "fourth",
    "fifth",
    "sixth",
    "seventh",
    "eighth",
    "ninth",
    "tenth",
)
_CARDINALS = ("one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten")
_WORD_NUMBER = {w: i for words in (_ORDINALS, _CARDINALS) for i, w in enumerate(words, 1)}
_NAMED_PREMISE = (
    rf"\bthe\s+(?:({'|'.join(_ORDINALS)})|(\d+)(?:st|nd|rd|th))\s+premise\b|"
    rf"\bpremise\s+({'|'.join(_CARDINALS)})\b"
)
_WORD_CITATION = re.compile(_NAMED_PREMISE, re.IGNORECASE)
_CITATION_PHRASE = re.compile(
    r"\b(?:(?:by|from|using|with|per|via|in|according to|based on|as (?:stated|given|shown|"
    r"established) (?:in|by)|as per|combining|applying|following|recall(?:ing)?)\s+)?"
    r"(?:(?:the\s+)?(?:premises?|steps?)\s*#?\s*\d+(?:\s*(?:,|and|&|or|with|to|-|–)\s*"
    r"(?:(?:premise|step)s?\s*)?\d+)*|" + _NAMED_PREMISE + r")"
    r"(?:\s+(?:states|says|tells us|gives)(?: us)?(?: that)?)?",
    re.IGNORECASE,
)
_SOURCE_PHRASE = re.compile(
    r"\b(?:based on|from|according to|given|using|by|with) (?:the |these |all |our )?"
    r"(?:given |above |provided |available |stated )?(?:premises|information|facts|rules|"
    r"chain|reasoning|steps)\b",
    re.IGNORECASE,
)
# "The statement is: Max is sour.", "Claim: ...", "To prove: ...": a label that restates the
# claim under test, which the colon cut off from it; what follows is what is to be determined.
_RESTATED = re.compile(
    r"(?:^|(?<=[.!?]\s))(?:(?:the|our)\s+)?(?:given\s+|original\s+|target\s+)?"
    r"(?:statement|question|claim|hypothesis|goal|query|conjecture)"
    r"(?:\s+(?:to (?:be )?(?:evaluate|evaluated|check|checked|verify|verified|prove|proved|proven|"
    r"test|tested|determine|answer)|(?:we|i) (?:want|need|have|are asked) to "
    r"(?:check|evaluate|verify|prove|test|determine)|in question|under consideration))?"
    r"(?:\s+(?:is|reads|says))?\s*:\s*|"
    r"(?:^|(?<=[.!?]\s))to (?:prove|show|check|verify|determine)\s*:\s*",
    re.IGNORECASE,
)
# "if something is a brurpus, it is also a branpus" states the rule "every brurpus is ...".
_GENERIC_IF = re.compile(
    r"\bif (?:something|anything|an entity|a thing|someone|anyone|an object|a creature) is "
    r"(?:a|an) ([a-z_\-]+),? (?:then )?(?:it|they) (?=(?:is|are|cannot|can't|must)\b)",
    re.IGNORECASE,
)
_PARENTHESES = re.compile(r"\([^()]*\)|\[[^\[\]]*\]")
_APPOSITIVE = re.compile(
    r",\s*(?:(?:being|as|which is|who is)\s+)?(?:a|an|one of the)\s+[a-z_\-]+\s*,", re.IGNORECASE
)
_SPLIT = re.compile(
    r"\s*[,;:]\s*|(?<=[a-z0-9])[.!]\s+(?=[A-Z])|"
    # "and" before a comma too: "Jet is a fronpus and, according to premise 2, fronpuses are
    # ..." loses its citation to the cleaning and keeps the comma ("... and, fronpuses ...").
    r"\s+(?=(?:and|but|so|since|because|therefore|thus|hence)[\s,])|"
    r"(?<!which)(?<!this)(?<!that)\s+(?=(?:implies|means)\s)"
)
# The subject and verb of a clause, reused by an elliptical continuation.
_SUBJECT_VERB = re.compile(
    r"^(.*?\b(?:is not|are not|isn't|aren't|cannot be|can't be|must be|is|are))(?:\s|$)",
    re.IGNORECASE,
)
# "Max is a cat, which is a feline.": the relative clause says what the object before it is.
_OBJECT_RELATIVE = re.compile(
    r"^(?:which|who) (is|are) ((?:not )?(?:also )?(?:a|an|one of the) [a-z_\-]+|[a-z_\-]+s)$",
    re.IGNORECASE,
)
_POSITIVE_OBJECT = re.compile(r"\b(?:is|are) (?:a |an |one of the )?([a-z_\-]+)$", re.IGNORECASE)
_BARE_WORD = re.compile(r"^(?:not\s+)?(?:also\s+)?[a-z_\-]+$", re.IGNORECASE)
_ELLIPSIS = re.compile(r"^(?:not\s+)?(?:also\s+)?(?:a|an|one of the)\s+[a-z_\-]+$", re.IGNORECASE)
_LEADER_RULES: tuple[tuple[str, Role], ...] = (
    (
        r"^(?:and\s+)?(?:so|therefore|thus|hence|consequently|accordingly|"
        r"which means(?: that)?|this means(?: that)?|that means(?: that)?|meaning(?: that)?|"
        r"it follows(?: that)?|we (?:can |may )?(?:conclude|infer|deduce)(?: that)?|"
        r"this (?:implies|shows|confirms)(?: that)?|in conclusion|as a result|"
        r"(?:which|this|that) suggests?(?: that)?|suggesting(?: that)?|"
        r"which implies(?: that)?|implying(?: that)?|we get(?: that)?|we have(?: that)?|"
        r"implies(?: that)?|means(?: that)?)\b\s*",
        "conclusion",
    ),
    (
        r"^(?:and\s+)?(?:since|because|given(?: that)?|as|considering(?: that)?|seeing that|"
        r"knowing(?: that)?)\b\s*",
        "reason",
    ),
    (
        r"^(?:and\s+)?(?:if|suppose|supposing|assuming|assume|unless|without|even if|"
        r"in case|whether)\b\s*",
        "condition",
    ),
    (r"^(?:but|however|yet|while|whereas|although)\b\s*", "contrast"),
    # "Nova is a zqbrurpus, which does not relate to brurpuses": a remark on what came before.
    (r"^(?:which|who)\b(?=\s+(?:does|do|is|are|has|have)\s+(?:not|n't|no)\b)\s*", "contrast"),
    (r"^(?:and|also)\b\s*", "main"),
)
_LEADERS = tuple((re.compile(pattern), role) for pattern, role in _LEADER_RULES)
_PREFIXES = re.compile(
    r"^(?:we know(?: that)?|it is (?:given|known|stated|true)(?: that)?|"
    r"(?:the )?premises? (?:state|states|says|say|tell us)(?: that)?|recall(?: that)?|"
    r"note(?: that)?|then|now|next|first|finally|clearly|indeed|also|in addition|"
    r"additionally)\b\s*",
    re.IGNORECASE,
)
_VERB = re.compile(
    r"\b(?:is|are|am|was|were|be|been|being|isn't|aren't|cannot|can't|can|could|would|must|"
    r"should|will|do|does|did|has|have|had|means|follows|implies|belongs?|conclude|know|need|"
    r"states?|say|says|said|connects?|establish\w*|determine\w*|appears?|seems?|remains?|"
    r"makes?|affects?|ends?|leads?|shows?|tells?|gives?|holds?)\b",
    re.IGNORECASE,
)
_CATEGORY_PATTERNS: dict[str, re.Pattern[str]] = {
    "question": re.compile(r"\?\s*$"),
    "answer": re.compile(
        r"\b(?:answer|statement|claim|query|question|conclusion|hypothesis)\b.*\b(?:is|would be|"
        r"must be)\s+[\"'“”‘’]?(?:true|false)\b|^(?:true|false)$|^answer\b|"
        r"\bthe answer is\s+[\"'“”‘’]?(?:yes|no)\b",
    ),
    "goal": re.compile(
        r"\b(?:we|i) (?:need|want|must|have|will need|should) to\b|\bthe question\b|\bwe need\b|"
        r"\blet'?s\b|\blet us\b|\bwe (?:will|should|can|must) (?:check|look|examine|consider|see|"
        r"trace|follow|start|now)\b|"
        r"\bto (?:determine|check|find out|answer|verify|see) (?:if|whether)\b|"
        r"\bwe are (?:asked|looking)\b|\bstart(?:ing)? (?:with|from)\b|\bis asked\b",
    ),
    "comment": re.compile(
        r"\b(?:cannot|can't|can not|could not|couldn't|unable to|impossible to|not possible to)\s+"
        r"(?:be\s+)?(?:directly\s+|definitively\s+|logically\s+)?(?:conclude|concluded|determine|"
        r"determined|infer|inferred|establish|established|say|said|confirm|confirmed|deduce|"
        r"deduced|know|known|prove|proven|proved|verify|verified|tell|assume|assumed|derive|"
        r"derived|link|connect|make|use|apply)\b|"
        r"\bno (?:\w+ )?(?:information|premise|premises|relation|relationship|connection|link|way|"
        r"evidence|indication|mention|statement|rule|path|chain|info|data|basis|reason|support|"
        r"conclusion|premise|connecting|direct)\b|"
        r"\bnot (?:explicitly |directly |clearly )?(?:stated|mentioned|given|provided|specified|"
        r"known|connected|related|linked|established|defined|determined|determinable|enough|"
        r"sufficient|clear|necessarily|possible|certain|part of the chain|affect\w*|relevant|"
        r"identified|applicable|needed|used|involved)\b|\bnone of the (?:premises|given|rules)\b|"
        r"\b(?:does|do|did)(?: not|n't)\b|\b(?:unknown|unclear|insufficient|undetermined|"
        r"indeterminate|ambiguous|irrelevant|unrelated|undefined|unsupported|unestablished)\b|"
        r"\bnot enough\b|\bnot relevant\b|\bthere (?:is|are|'s) no\b|\bno longer\b|"
        r"\bbreaks?\b|\bchain\b|\bdead end\b|\bnothing\b|\bunless\b|\bnot (?:be )?able to\b|"
        r"\bregardless\b|\bnot applicable\b|\bmissing\b|\bstatus\b|"
        # Remarks about a renamed word rather than reasoning with it: "zqbimpus is not the
        # same as bimpus", "the word zqbimpus contains bimpus", "we haven't established ...".
        r"\bnot the same\b|\bdifferent (?:from|than)\b|\bdistinct from\b|"
        r"\bapplies to\b|\bapply to\b|\bthe (?:word|term|name|string|symbol)s?\b|"
        r"\b(?:contains?|containing|includes?) (?:the )?(?:word|string|name|letters?|substring)\b|"
        r"\b(?:have|has|had)(?: not|n't)(?: yet)? (?:been )?(?:established|shown|proven|"
        r"proved|determined|found|seen|confirmed|derived|concluded)\b",
    ),
    "hypothetical": re.compile(
        r"\b(?:if|were|would|could|might|may|suppose|supposing|assuming|assume|hypothetically|"
        r"without|unless|whether)\b",
    ),
}

# One search rejects the common case (a plain assertion) before the ordered tests.
_ANY_CATEGORY = re.compile("|".join(f"(?:{p.pattern})" for p in _CATEGORY_PATTERNS.values()))


@dataclass(frozen=True, slots=True)
class Clause:
    """One clause of a step: its text (citations removed), role and reading."""

    text: str
    role: Role
    prop: Proposition | None
    category: str | None  # non-assertion category of this clause, if any


@dataclass(frozen=True, slots=True)
class StepReading:
    """What one CoT step asserts.

    ``status`` is ``assertion`` (``prop`` is the step's main conclusion), ``non_assertion``
    (``category`` says which: hypothetical, comment, goal, answer, question) or
    ``unparseable`` (neither read nor classified). ``cited_premises`` are the premise numbers
    named in the text ("premise 2", "(Premise 3)"); ``echoed_premises`` the premises (1-based,
    in the order given to :func:`read_step`) whose proposition one of the step's clauses
    states. ``clauses`` holds every clause with its role and reading, for certificates.
    """

    status: Status
    prop: Proposition | None
    category: str | None
    cited_premises: tuple[int, ...]
    echoed_premises: tuple[int, ...]
    clauses: tuple[Clause, ...]
    conclusion_index: int | None  # index into ``clauses`` of the clause read as the conclusion
    # The assertion rests on something the model made up: "X seems to be a kind of Y, so I
    # will treat E as a Y", "probably a typo for", "which suggests that E is a Y".
    assumed: bool = False

    @property
    def parsed(self) -> bool:
        """True when the step was read or positively classified (the parse-rate numerator)."""
        return self.status != "unparseable"


def cited_premises(text: str) -> tuple[int, ...]:
    """Premise numbers named in ``text``: "premise 2", "Premises 1 and 3", "(P4)",
    "premises 1 to 3" (a range cites each premise in it), "the second premise", "premise two"."""
    found: set[int] = set()
    if "premise" in text.lower():
        for match in _WORD_CITATION.finditer(text):
            ordinal, digits, cardinal = match.groups()
            word = (ordinal or cardinal or "").lower()
            found.add(int(digits) if digits else _WORD_NUMBER[word])
    for match in _CITATION.finditer(text):
        group = match.group(1)
        found.update(int(n) for n in re.findall(r"\d+", group))
        for low, high in _RANGE.findall(group):
            if int(high) - int(low) <= 100:  # a range, not a typo turning into thousands
                found.update(range(int(low), int(high) + 1))
    return tuple(sorted(found))


def split_clauses(text: str) -> list[tuple[str, Role]]:
    """Cut a cleaned step into (clause text, role) pairs; see the module docstring."""
    pieces: list[str] = []
    carry = ""
    for raw in _SPLIT.split(text):
        if not raw or not raw.strip():
            continue
        piece = f"{carry}{raw.strip()}"
        # A bare connective ("Therefore,", "and") introduces the piece after it.
        if not _strip_leader(piece)[0]:
            carry = f"{piece} "
            continue
        carry = ""
        pieces.append(piece)
    if carry:
        pieces.append(carry.strip())
    merged: list[str] = []
    for piece in pieces:
        piece = piece.strip()
        bare, role = _strip_leader(piece)
        relative = _OBJECT_RELATIVE.match(piece)
        antecedent = _POSITIVE_OBJECT.search(merged[-1]) if merged and relative else None
        if relative and antecedent and not _NEGATED.search(merged[-1]):
            # The object is a kind, and the clause states the rule that the step leans on:
            # "every cat is a feline", a reason of the clause before.
            merged.append(
                f"since every {antecedent.group(1)} {relative.group(1)} {relative.group(2)}"
            )
            continue
        subject_verb = _SUBJECT_VERB.match(merged[-1]) if merged else None
        elliptical = _ELLIPSIS.match(bare) or (
            # "Max is therefore not sour": the marker cut the predicate in two, and the piece
            # before is nothing but its subject and verb, so a bare word completes it. (After
            # a whole clause, "Max is not sour, so False", a bare word may be anything.)
            role == "conclusion"
            and subject_verb is not None
            and subject_verb.end() >= len(merged[-1])
            and _BARE_WORD.match(bare)
        )
        if subject_verb and bare and not _VERB.search(bare) and elliptical:
            # "Zara is a blolpus and therefore a blulpus", "Ink is a zqfrolpus, not a
            # frolpus": the elided subject and verb are those of the clause before.
            whole = subject_verb.end() >= len(merged[-1])
            # "Alex is (not) therefore a bimpus" was cut before "therefore": one clause.
            clause = f"{merged[-1]} {bare}" if whole else _elided(subject_verb, bare)
            if clause is not None:
                if whole:
                    merged.pop()
                merged.append(f"{piece[: len(piece) - len(bare)]}{clause}".strip())
                continue
        # A piece without a verb (a list item, "or bimpuses") belongs to the clause before it;
        # a bare connective ("Therefore,") introduces the next one.
        if merged and bare and not _VERB.search(bare) and not _is_bare_leader(merged[-1]):
            merged[-1] = f"{merged[-1]}, {piece}"
        else:
            merged.append(piece)
    clauses: list[tuple[str, Role]] = []
    pending: Role | None = None
    previous: Role | None = None
    for piece in merged:
        body, role = _strip_leader(piece)
        if not body:
            pending = role if role != "main" else pending
            continue
        predicate = _BARE_PREDICATE.match(body) if clauses else None
        if predicate is not None:
            # "Max is not a dumpus, and is therefore not a wumpus": a predicate without its
            # subject has the subject of the clause before (else "and" was read as one).
            subject = _subject_of(clauses[-1][0])
            if subject is not None:
                body = f"{subject} {predicate.group(1)}"
        if pending is not None and role == "main":
            role = pending
        pending = None
        if piece.lower().startswith("and ") and role == "main" and previous in ("reason",):
            role = "reason"
        elif role == "main" and previous == "condition":
            role = "consequent"
        clauses.append((body, role))
        previous = role
    return clauses


_NEGATED = re.compile(r"\b(?:not|n't|never|no)\b", re.IGNORECASE)
_POSITIVE = {"is not": "is", "isn't": "is", "are not": "are", "aren't": "are"}
_NEGATIVE = {"is": "is not", "are": "are not", "must be": "cannot be"}


def _elided(subject_verb: re.Match[str], bare: str) -> str | None:
    """The clause an elliptical piece stands for, or None when its polarity is unclear."""
    head = _strip_leader(subject_verb.group(1))[0]
    subject, verb = _split_verb(head)
    if subject is None:
        return None
    negated = bare.lower().startswith("not ")
    obj = bare[4:] if negated else bare
    if negated:
        verb = _NEGATIVE.get(verb, verb)
    elif verb in ("cannot be", "can't be"):
        return None
    else:
        verb = _POSITIVE.get(verb, verb)
    return f"{subject} {verb} {obj}"


# A predicate whose subject is the clause before's: "and is therefore a wumpus", "is not sour".
_BARE_PREDICATE = re.compile(
    r"^(?:and\s+)?((?:is|are|isn't|aren't|cannot be|can't be|must be)\b.*)$", re.IGNORECASE
)


def _subject_of(clause: str) -> str | None:
    """The subject of a clause of the ``E is ...`` / ``Xs are ...`` shape, else None."""
    subject_verb = _SUBJECT_VERB.match(clause)
    if subject_verb is None:
        return None
    subject, _ = _split_verb(_strip_leader(subject_verb.group(1))[0])
    return subject if subject and not _BARE_PREDICATE.match(subject) else None


def _split_verb(head: str) -> tuple[str | None, str]:
    lowered = head.lower()
    for verb in (
        "is not",
        "are not",
        "isn't",
        "aren't",
        "cannot be",
        "can't be",
        "must be",
        "is",
        "are",
    ):
        if lowered.endswith(" " + verb):
            return head[: -len(verb) - 1], verb
    return None, ""


def _is_bare_leader(piece: str) -> bool:
    return not _strip_leader(piece)[0]


@lru_cache(maxsize=65536)
def _strip_leader(piece: str) -> tuple[str, Role]:
    lowered = piece.lower()
    for pattern, role in _LEADERS:
        match = pattern.match(lowered)
        if match is not None:
            return piece[match.end() :].strip(), role
    return piece, "main"


_PRONOUN = re.compile(r"\b(?:" + "|".join(sorted(PRONOUNS)) + r")\b", re.IGNORECASE)
_SPACE_BEFORE_PUNCT = re.compile(r"\s+([,;:.])")
_REPEATED_PUNCT = re.compile(r"([,;:])(?:\s*[,;:])+")
_SPACES = re.compile(r"\s+")
_LEADING_PUNCT = re.compile(r"^[,;:]\s*")


_QUOTED = re.compile(r"[\"“”]([^\"“”]*)[\"“”]")
_WHOLE_BRACKETS = re.compile(r"^\s*[\[(]\s*([^\[\]()]+?)\s*[\])]\s*([.!?]?)\s*$")


def _unquote(match: re.Match[str]) -> str:
    return match.group(1).replace(",", " ").replace(";", " ")


def _clean(text: str) -> str:
    s = text.replace("**", "").replace("__", "").replace("`", "").strip()
    if '"' in s or "“" in s:
        # Quotation marks around words, and commas inside them, do not break a clause.
        s = _QUOTED.sub(_unquote, s)
    if s[:1] in "[(":
        # "[Fae is a galtus]." as small models copy it from the template: the step itself.
        s = _WHOLE_BRACKETS.sub(r"\1\2", s)
    lowered = s.lower()
    # The substitutions are skipped when their trigger word is absent: most steps have
    # none of them, and a million records must parse in seconds.
    if "(" in s or "[" in s:
        s = _PARENTHESES.sub(" ", s)
    if "premise" in lowered or "step" in lowered or " p" in lowered:
        s = _CITATION_PHRASE.sub(" ", s)
    if any(
        w in lowered
        for w in ("premises", "information", "facts", "rules", "chain", "steps", "reasoning")
    ):
        s = _SOURCE_PHRASE.sub(" ", s)
    if "," in s:
        s = _APPOSITIVE.sub(" ", s)
    if "if " in lowered:
        s = _GENERIC_IF.sub(r"every \1 ", s)
    if ":" in s:
        s = _RESTATED.sub("We need to determine whether ", s)
    s = _SPACE_BEFORE_PUNCT.sub(r"\1", s)
    s = _REPEATED_PUNCT.sub(r"\1", s)
    s = _SPACES.sub(" ", s).strip(" ,;:.")
    return _LEADING_PUNCT.sub("", s)


def _category(text: str) -> str | None:
    lowered = text.lower()
    if _ANY_CATEGORY.search(lowered) is None:
        return None
    for name in CATEGORIES:
        if _CATEGORY_PATTERNS[name].search(lowered):
            return name
    return None


def _entity_of(prop: Proposition | None) -> str | None:
    if prop is not None and prop.kind in ("is", "not_is"):
        return prop.subject
    return None


_HEDGE = re.compile(
    r"\b(?:seems?|appears?|seem) to be\b|\bprobably\b|\b(?:most )?likely\b|\bpresumably\b|"
    r"\bapparently\b|\btypo\b|\bmisspel|\b(?:treat|regard)\w* \S+ as\b|\bsuggest(?:s|ing)?\b",
    re.IGNORECASE,
)


@lru_cache(maxsize=262144)
def _read(text: str, entity: str | None) -> StepReading:
    reading = _read_plain(text, entity)
    if reading.status == "assertion" and _HEDGE.search(text) is not None:
        return replace(reading, assumed=True)
    return reading


def _read_plain(text: str, entity: str | None) -> StepReading:
    cleaned = _clean(text)
    parts = split_clauses(cleaned)
    clauses: list[Clause] = []
    current = entity
    for body, role in parts:
        body = _PREFIXES.sub("", body).strip()
        # A classified clause is never read as a proposition: "Alex would be a bimpus" and
        # "we cannot conclude that Alex is a bimpus" assert nothing.
        category = _category(body)
        prop = read_clause(body, current) if category is None else None
        if prop is not None:
            current = _entity_of(prop) or current
        clauses.append(Clause(body, role, prop, category))

    index = _conclusion_index(clauses)
    cites = cited_premises(text)
    echoes: tuple[int, ...] = ()  # filled per call by read_step: premises differ per problem
    if index is None:
        return StepReading("unparseable", None, None, cites, echoes, tuple(clauses), None)
    chosen = clauses[index]
    if chosen.role == "condition":
        # Nothing but conditions: "Suppose Max is sour." or "Assume Alex is a bempus." on its
        # own (a sentence of a proof by cases, the first of "... Then ..."), or an "If ..."
        # cut short. Once its leader is stripped the clause reads "Max is sour": asserted, it
        # would state the very claim the model only supposes.
        return StepReading(
            "non_assertion", None, "hypothetical", cites, echoes, tuple(clauses), index
        )
    if chosen.role == "consequent":
        category = chosen.category if chosen.category not in (None, "hypothetical") else None
        return StepReading(
            "non_assertion", None, category or "hypothetical", cites, echoes, tuple(clauses), index
        )
    if chosen.role == "contrast" and chosen.category in ("comment", "goal"):
        # "Stella is a zqbunkus, but nothing connects zqbunkuses to binduses": the remark
        # qualifies the assertion before it, which stays the step's conclusion.
        for i in range(index - 1, -1, -1):
            if clauses[i].role in ("main", "conclusion") and clauses[i].prop is not None:
                return StepReading(
                    "assertion", clauses[i].prop, None, cites, echoes, tuple(clauses), i
                )
            if clauses[i].role in ("main", "conclusion"):
                break
    if chosen.prop is None and chosen.category in ("goal", "question", "answer"):
        # "... so Max is a wumpus. Now I want to see whether ...": what follows an assertion
        # explores; "... Juno is not a ruminant. Therefore, the answer is False." states the
        # answer it leads to. Either way the step keeps the assertion.
        for i in range(index - 1, -1, -1):
            if clauses[i].role in ("main", "conclusion") and clauses[i].prop is not None:
                return StepReading(
                    "assertion", clauses[i].prop, None, cites, echoes, tuple(clauses), i
                )
    if chosen.prop is not None:
        return StepReading("assertion", chosen.prop, None, cites, echoes, tuple(clauses), index)
    if chosen.category is not None:
        return StepReading(
            "non_assertion", None, chosen.category, cites, echoes, tuple(clauses), index
        )
    # The main clause was not read; the step is still a non-assertion when another clause
    # positively classifies it (a hypothetical or comment split over several clauses).
    for clause in reversed(clauses):
        if clause.category is not None or clause.role in ("condition", "consequent"):
            category = clause.category or "hypothetical"
            return StepReading(
                "non_assertion", None, category, cites, echoes, tuple(clauses), index
            )
    return StepReading("unparseable", None, None, cites, echoes, tuple(clauses), index)


def _conclusion_index(clauses: Sequence[Clause]) -> int | None:
    for wanted in (("conclusion",), ("main", "contrast"), ("consequent",)):
        for i in range(len(clauses) - 1, -1, -1):
            if clauses[i].role in wanted:
                return i
    return len(clauses) - 1 if clauses else None


@lru_cache(maxsize=4096)
def _premise_props(
    premises: tuple[str, ...], vocabulary: Vocabulary | None = None
) -> tuple[Proposition | None, ...]:
    if vocabulary is None:
        return tuple(read_clause(premise, None) for premise in premises)
    props = (read_clause(vocabulary.join_phrases(premise), None) for premise in premises)
    return tuple(None if p is None else vocabulary.resolve_prop(p) for p in props)


def _echoes(
    clauses: Sequence[Clause], premises: Sequence[str], vocabulary: Vocabulary | None
) -> tuple[int, ...]:
    props = {c.prop for c in clauses if c.prop is not None}
    if not props:
        return ()
    return tuple(
        i
        for i, p in enumerate(_premise_props(tuple(premises), vocabulary), start=1)
        if p is not None and p in props
    )


def _against(reading: StepReading, vocabulary: Vocabulary) -> StepReading:
    """The reading with its names mapped to the problem's words; a conclusion naming a word
    the problem never uses is no assertion (``unknown_word``)."""
    changed = False
    clauses = []
    for clause in reading.clauses:
        if clause.prop is None:
            clauses.append(clause)
            continue
        resolved = vocabulary.resolve_prop(clause.prop)
        if resolved is not clause.prop:
            changed = True
            clause = replace(clause, prop=resolved)
        clauses.append(clause)
    if not changed:
        return reading
    index = reading.conclusion_index
    if reading.status == "assertion" and index is not None:
        prop = clauses[index].prop
        if prop is None:
            return replace(
                reading,
                status="non_assertion",
                prop=None,
                category=UNKNOWN_WORD,
                clauses=tuple(clauses),
            )
        return replace(reading, prop=prop, clauses=tuple(clauses))
    return replace(reading, clauses=tuple(clauses))


def read_step(
    text: str,
    *,
    premises: Sequence[str] | None = None,
    entity: str | None = None,
    vocabulary: Vocabulary | None = None,
) -> StepReading:
    """Read one step's text (without its ``Step k:`` header).

    ``premises`` (sentences, premise 1 first) enables echo detection; ``entity`` is the
    entity earlier steps were about, used to resolve a pronoun subject ("she is a blarpus");
    ``vocabulary`` the problem's words (``evaluator.canon.vocabulary``): names of several words
    are read as one, and a conclusion naming a word the problem never uses is no assertion.
    Readings are cached by text and entity (identical steps recur across probes, problems
    and samples); echoes and the vocabulary are applied per call, since they differ per
    problem.
    """
    text = normalise_letters(text)
    if vocabulary is not None:
        text = vocabulary.join_phrases(text)
    entity_key = entity.lower() if entity is not None and entity.lower() not in PRONOUNS else None
    if entity_key is not None and _PRONOUN.search(text) is None:
        entity_key = None  # the entity cannot matter: one cache entry per text
    reading = _read(text, entity_key)
    if vocabulary is not None:
        reading = _against(reading, vocabulary)
    if not premises:
        return reading
    echoes = _echoes(reading.clauses, premises, vocabulary)
    return replace(reading, echoed_premises=echoes) if echoes else reading
