"""Stable pseudo-random draws: a hash of string parts mapped to [0, 1).

The reasoners are deterministic functions of their inputs, so every "random" choice is a
hash of the inputs it may depend on. Which parts go into a key decides what a choice is stable
across (e.g. the question text only: the same for every probe of a problem).
"""

from __future__ import annotations

import hashlib

_SEP = "\x1f"
_SCALE = float(1 << 64)


def unit(*parts: object) -> float:
    """A uniform-looking number in [0, 1) determined by ``parts`` (their ``str``)."""
    data = _SEP.join(map(str, parts)).encode("utf-8")
    digest = hashlib.blake2b(data, digest_size=8).digest()
    return int.from_bytes(digest, "big") / _SCALE


def pick(n: int, *parts: object) -> int:
    """An index in ``range(n)`` determined by ``parts``; ``n`` must be positive."""
    if n <= 0:
        raise ValueError(f"pick needs a positive number of choices, got {n}")
    return int(unit(*parts) * n)
