"""A seedable generator of ProntoQA-style problems in the paper's shape.

A problem with ``h`` hops over fictional types ``T0 .. Th`` (``bempus``, ``bimpus``, ...)::

    E is a T0                       the entity premise, placed last as in the paper's 50
    T0s are T1, ..., T(h-2)s are T(h-1)
    T(h-1)s are Th                  answer True   (or: T(h-1)s are not Ths -> answer False)
    question: Is E a Th?

The proof has one step per hop: ``S1 = is(e, T1)`` from the entity premise and the first
rule, then ``Sk`` from ``S(k-1)`` and rule ``k``; the last step concludes ``is`` or
``not_is`` of ``Th``. Distractor premises share names with the chain but are off it: their
subjects are fresh types nothing on the chain leads to (``Xs are T2``, ``Xs are not Th``,
``Xs are Ys``), so the proof stays the only derivation.

Defaults follow the paper's 50 problems: 3 to 5 hops, 0 to 2 distractors, only the plural
sentence forms (``Xs are Ys``, ``Xs are not Ys``, ``Alex is a Y``); ``styles`` adds the
other ProntoQA forms (``Each X is a Y``, ``Every X is not a Y``). Rules are shuffled.

Deterministic for a seed, and prefix-stable: the first ``k`` of ``generate_problems(n)`` are
``generate_problems(k)``. With ``balance``, answers alternate True/False within each
consecutive pair (order drawn per pair), and hop counts cycle through the range.
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Sequence

from cotaudit.domain.problem import Premise, Problem, ProofStep
from cotaudit.domain.proposition import Kind, Proposition
from cotaudit.domain.sentences import STYLES, render_premise, render_question

ONSETS: tuple[str, ...] = (
    "b", "bl", "br", "ch", "cl", "cr", "d", "dr", "f", "fl", "fr", "g", "gl", "gr", "j", "l",
    "n", "r", "sh", "st", "t", "v", "w", "y", "z",
)  # fmt: skip
VOWELS: tuple[str, ...] = ("a", "e", "i", "o", "u")
CODAS: tuple[str, ...] = ("mp", "lp", "rp", "np", "ln", "lv", "nk", "nd", "lt")
ENTITIES: tuple[str, ...] = (
    "Alex", "Fae", "Rex", "Stella", "Max", "Zara", "Pip", "Luna", "Sam", "Eve", "Kai", "Nova",
    "Leo", "Iris", "Ash", "Wren", "Juno", "Bolt", "Cleo", "Drake", "Finn", "Gale", "Haze",
    "Ivy", "Jade", "Knox", "Lark", "Milo", "Nyx", "Opal", "Quinn", "Rune", "Sage", "Tarn",
    "Uma", "Vale", "Xara", "Yuki", "Zion", "Polly", "Sally",
)  # fmt: skip
RULE_STYLES: tuple[str, ...] = ("plural", "each", "every")


def type_names(rng: random.Random, k: int) -> list[str]:
    """``k`` distinct fictional type names (onset + vowel + coda + ``us``: ``bempus``)."""
    # Rejection sampling stays fast while at most half of the name space is taken.
    capacity = len(ONSETS) * len(VOWELS) * len(CODAS) // 2
    if k > capacity:
        raise ValueError(
            f"a problem needs {k} type names but at most {capacity} are available; "
            "use fewer hops or distractors"
        )
    names: list[str] = []
    seen: set[str] = set()
    while len(names) < k:
        coda = rng.choice(CODAS)
        name = rng.choice(ONSETS) + rng.choice(VOWELS) + coda + "us"
        if name not in seen:
            seen.add(name)
            names.append(name)
    return names


def _range(value: int | tuple[int, int], name: str) -> tuple[int, int]:
    lo, hi = (value, value) if isinstance(value, int) else value
    if lo > hi or lo < 0:
        raise ValueError(f"{name} range ({lo}, {hi}) is empty or negative")
    return lo, hi


def _rule(rng: random.Random, prop: Proposition, styles: Sequence[str]) -> str:
    style = rng.choice(styles)
    return render_premise(prop, style)


def generate_problem(
    problem_id: str,
    *,
    hops: int,
    answer: bool,
    distractors: int,
    rng: random.Random,
    styles: Sequence[str] = ("plural",),
    shuffle: bool = True,
) -> Problem:
    """One problem with exactly ``hops`` proof steps and the given answer."""
    if hops < 1:
        raise ValueError(f"hops must be at least 1, got {hops}")
    names = type_names(rng, hops + 1 + 2 * distractors)
    chain, spare = names[: hops + 1], names[hops + 1 :]
    entity = rng.choice(ENTITIES).lower()

    rules: list[tuple[str, str]] = []  # (role, text): "R<k>" for chain rule k, "D" else
    for k in range(hops):
        last = k == hops - 1
        kind: Kind = "not_subtype" if last and not answer else "subtype"
        rules.append((f"R{k + 1}", _rule(rng, Proposition(kind, chain[k], chain[k + 1]), styles)))
    for d in range(distractors):
        subject = spare[2 * d]
        flavour = rng.randrange(3)
        if flavour == 0:  # points into the chain
            prop = Proposition("subtype", subject, rng.choice(chain[1:]))
        elif flavour == 1:  # says the opposite about the queried type
            prop = Proposition("subtype" if not answer else "not_subtype", subject, chain[-1])
        else:  # unrelated
            prop = Proposition("subtype", subject, spare[2 * d + 1])
        rules.append(("D", _rule(rng, prop, styles)))
    if shuffle:
        rng.shuffle(rules)

    premises = [Premise(f"P{i}", text) for i, (_, text) in enumerate(rules, start=1)]
    entity_id = f"P{len(premises) + 1}"
    premises.append(Premise(entity_id, render_premise(Proposition("is", entity, chain[0]))))
    rule_ids: dict[str, str] = {}
    distractor_ids: list[str] = []
    for (role, _), premise in zip(rules, premises, strict=False):
        if role == "D":
            distractor_ids.append(premise.id)
        else:
            rule_ids[role] = premise.id

    proof = []
    for k in range(1, hops + 1):
        step_kind: Kind = "not_is" if k == hops and not answer else "is"
        first = entity_id if k == 1 else f"S{k - 1}"
        proof.append(
            ProofStep(k, str(Proposition(step_kind, entity, chain[k])), (first, rule_ids[f"R{k}"]))
        )
    return Problem(
        problem_id=problem_id,
        premises=tuple(premises),
        question=render_question(Proposition("is", entity, chain[-1])),
        answer=answer,
        proof=tuple(proof),
        distractors=tuple(distractor_ids),
        source="generate",
    )


def iter_generated(
    n: int,
    *,
    hops: int | tuple[int, int] = (3, 5),
    distractors: int | tuple[int, int] = (0, 2),
    seed: int = 0,
    balance: bool = True,
    styles: Sequence[str] = ("plural",),
    shuffle: bool = True,
) -> Iterator[Problem]:
    """Lazily, the problems of :func:`generate_problems` (parameters checked up front)."""
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}")
    hops_lo, hops_hi = _range(hops, "hops")
    if hops_lo < 1:
        raise ValueError("hops must be at least 1")
    dist_lo, dist_hi = _range(distractors, "distractors")
    unknown = [s for s in styles if s not in RULE_STYLES]
    if unknown or not styles:
        raise ValueError(
            f"rule styles {unknown or '(none)'} unknown; use some of {RULE_STYLES} (of {STYLES})"
        )
    return _iter_generated(n, hops_lo, hops_hi, dist_lo, dist_hi, seed, balance, styles, shuffle)


def _iter_generated(
    n: int,
    hops_lo: int,
    hops_hi: int,
    dist_lo: int,
    dist_hi: int,
    seed: int,
    balance: bool,
    styles: Sequence[str],
    shuffle: bool,
) -> Iterator[Problem]:
    for i in range(n):
        rng = random.Random(f"prontoqa-generator:{seed}:{i}")
        if balance:
            pair_first = random.Random(f"prontoqa-generator:{seed}:pair:{i // 2}").random() < 0.5
            answer = pair_first if i % 2 == 0 else not pair_first
            problem_hops = hops_lo + (i % (hops_hi - hops_lo + 1))
        else:
            answer = rng.random() < 0.5
            problem_hops = rng.randint(hops_lo, hops_hi)
        yield generate_problem(
            f"g{seed}-{i + 1:05d}",
            hops=problem_hops,
            answer=answer,
            distractors=rng.randint(dist_lo, dist_hi),
            rng=rng,
            styles=styles,
            shuffle=shuffle,
        )


def generate_problems(
    n: int,
    *,
    hops: int | tuple[int, int] = (3, 5),
    distractors: int | tuple[int, int] = (0, 2),
    seed: int = 0,
    balance: bool = True,
    styles: Sequence[str] = ("plural",),
    shuffle: bool = True,
) -> list[Problem]:
    """``n`` problems, deterministic for ``seed`` (ids ``g<seed>-00001`` ...).

    ``hops`` and ``distractors`` are a count or an inclusive ``(min, max)`` range; ``styles``
    are the sentence styles rules are drawn from (see :func:`render_premise`). Raises
    ``ValueError`` naming a bad parameter.
    """
    return list(
        iter_generated(
            n,
            hops=hops,
            distractors=distractors,
            seed=seed,
            balance=balance,
            styles=styles,
            shuffle=shuffle,
        )
    )
