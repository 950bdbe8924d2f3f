"""Reading ``results.jsonl``: whole lines only, a torn last line is dropped, never parsed.

A line is complete when it ends with ``\\n``; the writer only ever appends whole lines, so
only the very last line of a file can be torn (a crash or power loss mid-write). Readers skip
it; a resuming run cuts it away (:func:`truncate_torn_tail`) before appending. A complete line
that is not a JSON object is corruption, not a torn write: it is reported with its line
number rather than guessed around.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

import orjson

from runner.errors import UsageError
from runner.records import JSONDict


def numbered_records(
    stream: BinaryIO, *, where: str = "results.jsonl", require_kind: bool = False
) -> Iterator[tuple[int, JSONDict]]:
    """``(1-based line number, record)`` for every complete line of an open binary stream.

    A last line without ``\\n`` is torn (its writer had not finished it): it ends the
    iteration, never parsed. Blank lines are skipped. A line that is not a JSON object (with
    a ``kind`` field, when ``require_kind``) raises ``UsageError`` naming it.
    """
    for number, line in enumerate(stream, start=1):
        if not line.endswith(b"\n"):
            return  # torn tail: never parsed
        if line.isspace():
            continue
        try:
            record = orjson.loads(line)
        except orjson.JSONDecodeError as exc:
            raise UsageError(
                f"line {number} is not valid JSON ({exc})",
                where=where,
                fix="Only the last line may be incomplete: cut the stream at that line (a run "
                "resumes from there) or repair it.",
            ) from exc
        if not isinstance(record, dict) or (require_kind and "kind" not in record):
            raise UsageError(
                f"line {number} is not a record (a JSON object with a 'kind' field)"
                if require_kind
                else f"line {number} is not a JSON object",
                where=where,
                fix="A results.jsonl holds one record object per line; see docs/schema.md.",
            )
        yield number, record


def iter_records(stream: BinaryIO, *, where: str = "results.jsonl") -> Iterator[JSONDict]:
    """Parse complete lines of an open binary stream; a last line without ``\\n`` is ignored."""
    for _, record in numbered_records(stream, where=where):
        yield record


def read_records(path: Path) -> Iterator[JSONDict]:
    """Every complete record of a stream file (none when the file does not exist)."""
    if not path.exists():
        return
    with path.open("rb") as f:
        yield from iter_records(f, where=str(path))


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
    """What a resuming run needs to know about an existing stream."""

    succeeded: set[str] = field(default_factory=set)  # request ids with a successful record
    failed: set[str] = field(default_factory=set)  # request ids whose last record is an error
    problems: set[str] = field(default_factory=set)  # problem ids already written
    endpoint_records: set[tuple[str, str, str]] = field(default_factory=set)  # (kind, ep, pid)
    records: int = 0

    def add(self, record: JSONDict) -> None:
        self.records += 1
        kind = record.get("kind")
        if kind == "response":
            rid = str(record.get("request_id"))
            if record.get("error") is None:
                self.succeeded.add(rid)
                self.failed.discard(rid)
            elif rid not in self.succeeded:
                self.failed.add(rid)
        elif kind == "problem":
            self.problems.add(str(record.get("problem_id")))
        else:
            self.endpoint_records.add(
                (str(kind), str(record.get("endpoint")), str(record.get("problem_id")))
            )


def scan_stream(path: Path) -> StreamState:
    """Read a stream (torn tail ignored) into a :class:`StreamState`."""
    state = StreamState()
    for record in read_records(path):
        state.add(record)
    return state
