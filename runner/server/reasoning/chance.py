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


class Dice:
    """Many stable draws from one key, numbered by slot: one hash per 32 slots.

    Cheaper than :func:`pick` per draw when a text makes a dozen choices (the wording of
    each step); slot ``s`` always gives the same draw for the same key.
    """

    __slots__ = ("_bytes", "_key")

    def __init__(self, *parts: object) -> None:
        self._key = _SEP.join(map(str, parts)).encode("utf-8")
        self._bytes = b""

    def pick(self, n: int, slot: int) -> int:
        """An index in ``range(n)`` for ``slot`` (>= 0); ``n`` must be positive."""
        if n <= 0:
            raise ValueError(f"pick needs a positive number of choices, got {n}")
        end = 2 * slot + 2
        while len(self._bytes) < end:
            block = len(self._bytes) // 64
            self._bytes += hashlib.blake2b(
                self._key + b"\x1e" + str(block).encode(), digest_size=64
            ).digest()
        return int.from_bytes(self._bytes[end - 2 : end], "big") * n >> 16
