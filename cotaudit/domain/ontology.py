"""The real-word ontologies of ProntoQA's ``true``, ``false`` and number settings.

ProntoQA generates problems over three kinds of ontology: fictional words (``bempus``), a true
ontology of real categories ("Every cat is a feline. Felines are carnivores."), and a false
one with the same words in wrong places ("Every cat is a reptile."); its number domain writes
entities as numerals and categories in several words ("7 is a prime number."). This module
holds the real categories as taxonomies (child -> parent: every child is a parent), which the
generator (``runner.tasks.generator``) draws chains from and the world-knowledge reasoner
(``runner.server.reasoning``) believes. Both halves speak of these words, so they live in the
domain; :func:`is_noun` is what renders "Fae is a cat" with an article and "Cats are felines"
in the plural.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from functools import lru_cache
from typing import Literal, TypeAlias

Ontology: TypeAlias = Literal["fictional", "true", "false", "number"]
ONTOLOGIES: tuple[Ontology, ...] = ("fictional", "true", "false", "number")

# child -> parent. Kept to well-known, uncontroversial ranks: a reader should not have to
# look anything up to see that "Every cat is a feline" is true and "Every cat is a reptile"
# false. Irregular plurals on purpose: mice, geese, wolves, foxes, fish, sheep, butterflies.
ANIMALS: Mapping[str, str] = {
    "cat": "feline",
    "lion": "feline",
    "feline": "carnivore",
    "dog": "canine",
    "wolf": "canine",
    "fox": "canine",
    "canine": "carnivore",
    "carnivore": "mammal",
    "mouse": "rodent",
    "rodent": "mammal",
    "sheep": "bovid",
    "cow": "bovid",
    "bovid": "ruminant",
    "ruminant": "mammal",
    "mammal": "vertebrate",
    "goose": "waterfowl",
    "duck": "waterfowl",
    "waterfowl": "bird",
    "sparrow": "songbird",
    "songbird": "bird",
    "bird": "vertebrate",
    "snake": "reptile",
    "lizard": "reptile",
    "reptile": "vertebrate",
    "frog": "amphibian",
    "amphibian": "vertebrate",
    "salmon": "fish",
    "shark": "fish",
    "fish": "vertebrate",
    "vertebrate": "chordate",
    "chordate": "animal",
    "butterfly": "insect",
    "bee": "insect",
    "insect": "arthropod",
    "spider": "arachnid",
    "arachnid": "arthropod",
    "arthropod": "invertebrate",
    "invertebrate": "animal",
    "animal": "organism",
    "rose": "flower",
    "tulip": "flower",
    "flower": "plant",
    "oak": "tree",
    "pine": "tree",
    "tree": "plant",
    "plant": "organism",
}
NUMBERS: Mapping[str, str] = {
    "prime number": "natural number",
    "composite number": "natural number",
    "natural number": "integer",
    "negative integer": "integer",
    "integer": "rational number",
    "fraction": "rational number",
    "rational number": "real number",
    "irrational number": "real number",
    "real number": "complex number",
    "imaginary number": "complex number",
    "complex number": "number",
}
# Numerals that are members of a number category (the entities of the number domain).
NUMERALS: Mapping[str, tuple[str, ...]] = {
    "prime number": ("2", "3", "5", "7", "11", "13", "17", "19", "23", "29", "31", "37"),
    "composite number": ("4", "6", "8", "9", "10", "12", "14", "15", "16", "18", "20", "21"),
    "negative integer": ("-1", "-2", "-3", "-5", "-7", "-8", "-12", "-20"),
}
TAXONOMY: Mapping[str, str] = {**ANIMALS, **NUMBERS}
NOUNS: frozenset[str] = frozenset(TAXONOMY) | frozenset(TAXONOMY.values())
FRESH_PREFIX = "zq"  # the probe builder's prefix for fresh symbols (runner.tasks.probes)


def base_name(name: str) -> str:
    """``name`` without the fresh-symbol prefix (``zqxcat`` -> ``cat``)."""
    while name.startswith(FRESH_PREFIX):
        name = name[len(FRESH_PREFIX) :].lstrip("x")
    return name


def is_noun(name: str) -> bool:
    """True for a real category of these ontologies, or a fresh symbol made from one."""
    return base_name(name) in NOUNS


def ancestors(category: str) -> Iterator[str]:
    """The categories above ``category``, nearest first (``cat``: feline, carnivore, ...)."""
    node = TAXONOMY.get(category)
    while node is not None:
        yield node
        node = TAXONOMY.get(node)


@lru_cache(maxsize=4096)
def believed(subject: str, obj: str) -> bool | None:
    """What the world says of "every ``subject`` is a ``obj``": True, False (``obj`` is not
    above ``subject``, and both are known categories), or None when either is unknown."""
    if subject not in NOUNS or obj not in NOUNS:
        return None
    return obj in set(ancestors(subject))


def related(a: str, b: str) -> bool:
    """One category is above the other (or they are the same)."""
    return a == b or b in set(ancestors(a)) or a in set(ancestors(b))
