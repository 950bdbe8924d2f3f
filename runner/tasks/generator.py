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

``ontology`` (ProntoQA's settings, :mod:`cotaudit.domain.ontology`) chooses the words, with
the same proof trees, distractor shapes and probes:

- ``fictional`` (default, the paper's): made-up type names;
- ``true``: a chain of real categories, each the next one's child ("Every cat is a feline.
  Felines are carnivores."), so every premise is true of the world; a False answer's last
  premise names a category that is truly disjoint ("Mammals are not reptiles."); distractors
  are true facts off the chain;
- ``false``: real categories in wrong places: no chain premise is true of the world ("Every
  cat is a reptile."), and a False answer's last premise denies a true fact ("Reptiles are not
  vertebrates" where the chain's category truly is one, when there is such a category);
- ``number``: the true ontology of numbers, entities written as numerals and categories in
  several words ("7 is a prime number. Every prime number is a natural number.").
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Sequence

from cotaudit.domain.ontology import (
    ANIMALS,
    NUMBERS,
    NUMERALS,
    ONTOLOGIES,
    Ontology,
    ancestors,
    related,
)
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


def _fictional_distractor(
    rng: random.Random, chain: Sequence[str], spare: Sequence[str], d: int, answer: bool
) -> Proposition:
    """Distractor ``d`` over made-up names (drawn in the order every earlier version drew it,
    so a seed gives the problems it always gave)."""
    subject = spare[2 * d]
    flavour = rng.randrange(3)
    if flavour == 0:  # points into the chain
        return Proposition("subtype", subject, rng.choice(chain[1:]))
    if flavour == 1:  # says the opposite about the queried type
        return Proposition("subtype" if not answer else "not_subtype", subject, chain[-1])
    return Proposition("subtype", subject, spare[2 * d + 1])  # unrelated


def _true_words(
    rng: random.Random, hops: int, answer: bool, distractors: int, ontology: Ontology
) -> tuple[list[str], str, list[Proposition]]:
    """A chain up a real taxonomy: every premise true of the world (see the module doc)."""
    taxonomy = NUMBERS if ontology == "number" else ANIMALS
    starts = sorted(NUMERALS) if ontology == "number" else sorted(taxonomy)
    options: list[tuple[list[str], str | None]] = []
    nodes = sorted(set(taxonomy) | set(taxonomy.values()))
    for start in starts:
        path = [start, *ancestors(start)]
        if answer and len(path) >= hops + 1:
            options.append((path[: hops + 1], None))
        elif not answer and len(path) >= hops:
            above = path[hops - 1]
            disjoint = [n for n in nodes if not related(n, above)]
            if disjoint:
                options.append((path[:hops], rng.choice(disjoint)))
    if not options:
        raise ValueError(f"the {ontology} ontology has no chain of {hops} hops; use at most 5 hops")
    chain, last = options[rng.randrange(len(options))]
    if last is not None:
        chain = [*chain, last]
    if ontology == "number":
        entity = rng.choice(NUMERALS[chain[0]])
    else:
        entity = rng.choice(ENTITIES).lower()
    on_chain = set(chain)
    props: list[Proposition] = []
    used = set(on_chain)
    for _ in range(distractors):
        flavour = rng.randrange(3)
        goal = chain[-1]
        if flavour == 0:  # a true fact pointing into the chain (shares a chain object)
            found = [
                Proposition("subtype", x, target)
                for target in chain[1:]
                for x in nodes
                if x not in used and target in set(ancestors(x))
            ]
        elif flavour == 1:  # a true fact about the queried type
            kind: Kind = "not_subtype" if answer else "subtype"
            found = [
                Proposition(kind, x, goal)
                for x in nodes
                if x not in used
                and (related(x, goal) if not answer else not related(x, goal))
                and (answer or goal in set(ancestors(x)))
            ]
        else:  # an unrelated true fact
            found = [
                Proposition("subtype", x, taxonomy[x])
                for x in sorted(taxonomy)
                if x not in used and taxonomy[x] not in on_chain
            ]
        if not found:
            continue
        prop = found[rng.randrange(len(found))]
        used.add(prop.subject)
        props.append(prop)
    return chain, entity, props


def _false_words(
    rng: random.Random, hops: int, answer: bool, distractors: int
) -> tuple[list[str], str, list[Proposition]]:
    """Real categories in wrong places: no chain premise is true of the world."""
    words = sorted(set(ANIMALS) | set(ANIMALS.values()))
    for _ in range(1000):
        chain = rng.sample(words, hops + 1)
        rules_false = all(
            not related(chain[k], chain[k + 1]) or chain[k] in set(ancestors(chain[k + 1]))
            for k in range(hops)
        )
        if not rules_false:
            continue
        if not answer:
            # "T(h-1)s are not Ths" false of the world: Th truly above T(h-1), when possible.
            above = [a for a in ancestors(chain[hops - 1]) if a not in chain[: hops - 1]]
            if above:
                chain[hops] = rng.choice(sorted(above))
        break
    entity = rng.choice(ENTITIES).lower()
    spare = [w for w in words if w not in chain]
    rng.shuffle(spare)
    props = []
    for d in range(distractors):
        subject = spare[2 * d]
        flavour = rng.randrange(3)
        if flavour == 0:
            prop = Proposition("subtype", subject, rng.choice(chain[1:]))
        elif flavour == 1:
            prop = Proposition("subtype" if not answer else "not_subtype", subject, chain[-1])
        else:
            prop = Proposition("subtype", subject, spare[2 * d + 1])
        props.append(prop)
    return chain, entity, props


def generate_problem(
    problem_id: str,
    *,
    hops: int,
    answer: bool,
    distractors: int,
    rng: random.Random,
    styles: Sequence[str] = ("plural",),
    shuffle: bool = True,
    ontology: Ontology = "fictional",
) -> Problem:
    """One problem with exactly ``hops`` proof steps and the given answer."""
    if hops < 1:
        raise ValueError(f"hops must be at least 1, got {hops}")
    drawn: list[Proposition] = []
    if ontology == "fictional":
        names = type_names(rng, hops + 1 + 2 * distractors)
        chain, spare = names[: hops + 1], names[hops + 1 :]
        entity = rng.choice(ENTITIES).lower()
    elif ontology == "false":
        chain, entity, drawn = _false_words(rng, hops, answer, distractors)
    elif ontology in ("true", "number"):
        chain, entity, drawn = _true_words(rng, hops, answer, distractors, ontology)
    else:
        raise ValueError(f"ontology {ontology!r} unknown; use one of {', '.join(ONTOLOGIES)}")

    rules: list[tuple[str, str]] = []  # (role, text): "R<k>" for chain rule k, "D" else
    for k in range(hops):
        last = k == hops - 1
        kind: Kind = "not_subtype" if last and not answer else "subtype"
        rules.append((f"R{k + 1}", _rule(rng, Proposition(kind, chain[k], chain[k + 1]), styles)))
    if ontology == "fictional":
        for d in range(distractors):
            prop = _fictional_distractor(rng, chain, spare, d, answer)
            rules.append(("D", _rule(rng, prop, styles)))
    else:
        rules += [("D", _rule(rng, prop, styles)) for prop in drawn]
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
        extra={} if ontology == "fictional" else {"ontology": ontology},
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
    ontology: Ontology = "fictional",
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
    if ontology not in ONTOLOGIES:
        raise ValueError(f"ontology {ontology!r} unknown; use one of {', '.join(ONTOLOGIES)}")
    if ontology != "fictional" and hops_hi > 5:
        raise ValueError(f"the {ontology} ontology has chains of at most 5 hops, not {hops_hi}")
    return _iter_generated(
        n, hops_lo, hops_hi, dist_lo, dist_hi, seed, balance, styles, shuffle, ontology
    )


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
    ontology: Ontology = "fictional",
) -> Iterator[Problem]:
    prefix = f"g{seed}-" if ontology == "fictional" else f"g{seed}-{ontology}-"
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
            f"{prefix}{i + 1:05d}",
            hops=problem_hops,
            answer=answer,
            distractors=rng.randint(dist_lo, dist_hi),
            rng=rng,
            styles=styles,
            shuffle=shuffle,
            ontology=ontology,
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
    ontology: Ontology = "fictional",
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
            ontology=ontology,
        )
    )
