"""What a resuming run needs from an existing ``results.jsonl``: its torn tail cut away, and
which requests, problems and per-endpoint records it already holds.

Only the very last line of a stream can be torn (the writer appends whole lines); reading
drops it (``cotaudit.schema.jsonl``), and a resuming run cuts it away
(:func:`truncate_torn_tail`) before appending. Every complete line is checked by the schema's
validator as it is read: a bad one refuses the resume rather than being appended after.

The ids are kept as 12-byte BLAKE2b digests in sorted numpy arrays (:class:`DigestSet`): a
planned request costs the resume at most two of them (its id, its problem's id), where a
Python set of strings took ~230 bytes. Two different ids share a 96-bit digest with a
probability far below that of a disk error (about 1e-17 for a plan of a million requests over
a stream of a million); a shared digest would skip a request as already done.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import numpy.typing as npt

from cotaudit.errors import UsageError
from cotaudit.schema import JSONDict, numbered_records

DIGEST_BYTES = 12
DIGEST = np.dtype((np.void, DIGEST_BYTES))
# Digests added one at a time wait in a Python set until this many, then join the sorted array
# in one merge: a merge costs a pass over the array, so they stay rare.
MERGE_EVERY = 1 << 16


def digest(text: str) -> bytes:
    """The BLAKE2b digest of ``text`` that :class:`DigestSet` holds."""
    return hashlib.blake2b(text.encode("utf-8"), digest_size=DIGEST_BYTES).digest()


class DigestSet:
    """A set of strings held as their digests: ``add``, ``in``, ``len``."""

    def __init__(self, digests: bytes | bytearray = b"") -> None:
        self._sorted: npt.NDArray[np.void] = np.unique(np.frombuffer(bytes(digests), DIGEST))
        self._recent: set[bytes] = set()

    @classmethod
    def of(cls, texts: Iterable[str]) -> DigestSet:
        return cls(b"".join(digest(t) for t in texts))

    def __len__(self) -> int:
        return len(self._sorted) + len(self._recent)

    def __contains__(self, text: object) -> bool:
        if not isinstance(text, str) or not (self._recent or len(self._sorted)):
            return False
        return self._has(digest(text))

    def _has(self, key: bytes) -> bool:
        if key in self._recent:
            return True
        found = self._sorted
        if not len(found):
            return False
        probe = np.frombuffer(key, DIGEST)
        at = int(np.searchsorted(found, probe)[0])
        return at < len(found) and bool(found[at] == probe[0])

    def contains_many(self, texts: list[str]) -> npt.NDArray[np.bool_]:
        """Membership of each of ``texts``, in one vectorised lookup."""
        found = np.zeros(len(texts), dtype=bool)
        if not texts or not len(self):
            return found
        keys = [digest(t) for t in texts]
        if self._recent:
            found |= np.fromiter((k in self._recent for k in keys), bool, len(keys))
        if len(self._sorted):
            probe = np.frombuffer(b"".join(keys), DIGEST)
            at = np.minimum(np.searchsorted(self._sorted, probe), len(self._sorted) - 1)
            found |= self._sorted[at] == probe
        return found

    def add(self, text: str) -> bool:
        """Add ``text``; True when it was not in the set yet (one digest, one lookup)."""
        key = digest(text)
        if self._has(key):
            return False
        self._recent.add(key)
        if len(self._recent) >= MERGE_EVERY:
            self._merge()
        return True

    def _merge(self) -> None:
        recent = np.frombuffer(b"".join(self._recent), DIGEST)
        self._sorted = np.unique(np.concatenate([self._sorted, recent]))
        self._recent = set()

    def without(self, other: DigestSet) -> DigestSet:
        """The digests of this set that ``other`` lacks."""
        self._merge()
        other._merge()
        kept = self._sorted[~np.isin(self._sorted, other._sorted)]
        return DigestSet(kept.tobytes())

    @property
    def nbytes(self) -> int:
        """Memory the digests take (the array, and about 80 bytes per digest not merged)."""
        return int(self._sorted.nbytes) + 80 * len(self._recent)


def torn_tail_bytes(path: Path) -> int:
    """Length of the incomplete last line (0 when the file ends with a newline or is empty)."""
    if not path.exists():
        return 0
    size = path.stat().st_size
    if size == 0:
        return 0
    with path.open("rb") as f:
        # Walk back in blocks to the last newline; torn tails are at most one record long.
        pos, block = size, 65536
        while pos > 0:
            start = max(0, pos - block)
            f.seek(start)
            chunk = f.read(pos - start)
            at = chunk.rfind(b"\n")
            if at >= 0:
                return size - (start + at + 1)
            pos = start
    return size


def truncate_torn_tail(path: Path) -> int:
    """Cut an incomplete last line away; returns the number of bytes removed."""
    torn = torn_tail_bytes(path)
    if torn:
        size = path.stat().st_size
        fd = os.open(path, os.O_WRONLY)
        try:
            os.ftruncate(fd, size - torn)
            os.fsync(fd)
        finally:
            os.close(fd)
    return torn


@dataclass(slots=True)
class StreamState:
    """What a resuming run needs to know about an existing stream.

    ``succeeded`` and ``failed`` are fixed once the stream is read; the engine adds to
    ``problems`` and ``endpoint_records`` as it writes them.
    """

    succeeded: DigestSet = field(default_factory=DigestSet)  # request ids with a success
    failed: DigestSet = field(default_factory=DigestSet)  # ids whose records are all errors
    problems: DigestSet = field(default_factory=DigestSet)  # problem ids already written
    endpoint_records: DigestSet = field(default_factory=DigestSet)  # "kind/endpoint/problem"
    records: int = 0

    @property
    def nbytes(self) -> int:
        """Memory the state's ids take."""
        return sum(
            s.nbytes for s in (self.succeeded, self.failed, self.problems, self.endpoint_records)
        )


def appendable_records(path: Path) -> Iterator[tuple[int, JSONDict]]:
    """``(line number, record)`` of a stream a run is about to append to (none when it does
    not exist), each checked by the validator the evaluator reads with.

    A resume appends after every complete line, so a bad one (not JSON, not a record, a field
    missing or of the wrong type) would end up in the middle of the stream, where the
    evaluation refuses it; it is refused now instead, before anything is written.
    """
    if not path.exists():
        return
    try:
        with path.open("rb") as f:
            yield from numbered_records(f, where=str(path), require_kind=True, validate=True)
    except UsageError as exc:
        # The reader's own advice first (e.g. "Upgrade cotaudit" for a newer schema).
        first = f"{exc.fix} " if exc.fix else ""
        raise UsageError(
            exc.what,
            where=exc.where,
            fix=f"{first}Nothing was written. A run appends to its stream, so every complete "
            "line of it must be a record (docs/schema.md): repair that line, or cut "
            f"{path.name} just before it (the run resumes from there and redoes what was cut), "
            f"or move {path.name} aside (the run then starts its stream anew, answers already "
            "received coming from the response cache).",
        ) from exc


def endpoint_record_key(
    kind: str, endpoint: str, problem_id: str, trace: object | None = None
) -> str:
    """What identifies a per-endpoint record (``truth``, ...) of a problem in the state: with
    its ``trace`` where it has one (a reasoning model's answer and reasoning each have a truth
    record)."""
    key = f"{kind}\0{endpoint}\0{problem_id}"
    return key if trace is None else f"{key}\0{trace}"


def scan_stream(path: Path, watch: Callable[[int, JSONDict], None] | None = None) -> StreamState:
    """Read a stream (torn tail ignored) into a :class:`StreamState`.

    A request counts as done once any of its records is a success (a later error record
    never undoes it); otherwise as failed when it has an error record. ``watch`` sees every
    record with its 1-based line number, in the same pass (``runner.stream_plan``).
    """
    succeeded, errors, problems, extras = bytearray(), bytearray(), bytearray(), bytearray()
    records = 0
    for line, record in appendable_records(path):
        records += 1
        if watch is not None:
            watch(line, record)
        kind = record.get("kind")
        if kind == "response":
            rid = digest(str(record.get("request_id")))
            (succeeded if record.get("error") is None else errors).extend(rid)
        elif kind == "problem":
            problems.extend(digest(str(record.get("problem_id"))))
        else:
            key = endpoint_record_key(
                str(kind),
                str(record.get("endpoint")),
                str(record.get("problem_id")),
                record.get("trace"),
            )
            extras.extend(digest(key))
    done = DigestSet(succeeded)
    return StreamState(
        succeeded=done,
        failed=DigestSet(errors).without(done),
        problems=DigestSet(problems),
        endpoint_records=DigestSet(extras),
        records=records,
    )
