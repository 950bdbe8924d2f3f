"""The digest of a stream as it was evaluated: every complete line, in order.

``root`` is the SHA-256 of the concatenated SHA-256 digests (32 bytes each) of the stream's
complete lines, in order, blank lines included, the torn last line (if any) excluded: a hash
list over the stream, so any change to any record of any kind, a deletion, an insertion or a
reordering changes it. A third party recomputes it from the first ``lines`` lines of
``results.jsonl`` with nothing but SHA-256 (docs/certificates.md, "Checking a quoted root").

Beside it, the first :data:`LINE_DIGEST_BYTES` bytes of each line's digest are kept
(``eval/stream.digests``): not to prove anything (the root does), but so that ``verify`` can
name the lines that changed since the evaluation.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

LINE_DIGEST_BYTES = 8


@dataclass(slots=True)
class StreamDigest:
    """Accumulates the digest of a stream line by line (:meth:`add` every complete line)."""

    lines: int = 0
    size: int = 0  # bytes of the lines added
    _root: Any = field(default_factory=hashlib.sha256)  # a hashlib SHA-256 object
    _prefixes: bytearray = field(default_factory=bytearray)

    def add(self, raw: bytes) -> None:
        """Take the next complete line (with its newline)."""
        digest = hashlib.sha256(raw).digest()
        self._root.update(digest)
        self._prefixes += digest[:LINE_DIGEST_BYTES]
        self.lines += 1
        self.size += len(raw)

    @property
    def root(self) -> str:
        """The stream root (hex) of the lines added so far."""
        return str(self._root.hexdigest())

    @property
    def line_digests(self) -> bytes:
        """The short digest of every line added, in order (``LINE_DIGEST_BYTES`` each)."""
        return bytes(self._prefixes)

    def as_json(self) -> dict[str, object]:
        return {"lines": self.lines, "bytes": self.size, "root": self.root}


@dataclass(frozen=True, slots=True)
class LineChanges:
    """How a stream differs from the one evaluated, line by line (1-based line numbers)."""

    not_evaluated: tuple[int, ...]  # lines of the stream now whose content was not evaluated
    gone: tuple[int, ...]  # evaluated lines whose content is no longer in the stream


def line_changes(evaluated: Iterable[bytes], current: Iterable[bytes]) -> LineChanges:
    """Compare the short digests of the evaluated stream and of the stream now, as multisets
    (a moved line is neither added nor gone, but changes the root)."""
    before = list(evaluated)
    now = list(current)
    if before == now:
        return LineChanges((), ())
    left = Counter(before)
    not_evaluated = []
    for number, digest in enumerate(now, start=1):
        if left[digest] > 0:
            left[digest] -= 1
        else:
            not_evaluated.append(number)
    remaining = Counter(now)
    gone = []
    for number, digest in enumerate(before, start=1):
        if remaining[digest] > 0:
            remaining[digest] -= 1
        else:
            gone.append(number)
    return LineChanges(tuple(not_evaluated), tuple(gone))


def iter_digests(prefixes: bytes) -> Iterator[bytes]:
    """The short digests of a ``line_digests`` buffer, one per line."""
    n = LINE_DIGEST_BYTES
    for i in range(0, len(prefixes) - len(prefixes) % n, n):
        yield prefixes[i : i + n]
