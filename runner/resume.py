"""What a resuming run needs from an existing ``results.jsonl``: its torn tail cut away, and
which requests, problems and per-endpoint records it already holds.

Only the very last line of a stream can be torn (the writer appends whole lines); reading
drops it (``cotaudit.schema.jsonl``), and a resuming run cuts it away
(:func:`truncate_torn_tail`) before appending.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from cotaudit.schema import JSONDict, read_records


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
