"""Reading a JSONL stream: whole lines only, a torn last line is dropped, never parsed.

A line is complete when it ends with ``\\n``; the writer only ever appends whole lines, so
only the very last line of a file can be torn (a crash or power loss mid-write). Readers skip
it; a resuming run cuts it away (``runner.resume``) before appending. A complete line that is
not a JSON object is corruption, not a torn write: it is reported with its line number rather
than guessed around.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

import orjson

from cotaudit.errors import UsageError
from cotaudit.schema.records import JSONDict, validate_record


def bad_line(
    number: int,
    where: str,
    parse_error: orjson.JSONDecodeError | None = None,
    *,
    require_kind: bool = True,
) -> UsageError:
    """The error for complete line ``number`` of the stream at ``where`` that is not valid
    JSON (``parse_error``) or not a record object: located ``PATH:LINE`` as a record whose
    fields break the schema is, whichever reader found it."""
    if parse_error is not None:
        return UsageError(
            f"line is not valid JSON ({parse_error})",
            where=f"{where}:{number}",
            fix="Only the last line may be incomplete: cut the stream at that line (a run "
            "resumes from there) or repair it.",
        )
    return UsageError(
        "line is not a record (a JSON object with a 'kind' field)"
        if require_kind
        else "line is not a JSON object",
        where=f"{where}:{number}",
        fix="A results.jsonl holds one record object per line; see docs/schema.md.",
    )


def numbered_records(
    stream: BinaryIO,
    *,
    where: str = "results.jsonl",
    require_kind: bool = False,
    validate: bool = False,
) -> Iterator[tuple[int, JSONDict]]:
    """``(1-based line number, record)`` for every complete line of an open binary stream.

    A last line without ``\\n`` is torn (its writer had not finished it): it ends the
    iteration, never parsed. Blank lines are skipped. A line that is not a JSON object (with
    a ``kind`` field, when ``require_kind``) raises ``UsageError`` naming it; with ``validate``,
    so does a record whose fields break :func:`~cotaudit.schema.records.validate_record`.
    """
    for number, line in enumerate(stream, start=1):
        if not line.endswith(b"\n"):
            return  # torn tail: never parsed
        if line.isspace():
            continue
        try:
            record = orjson.loads(line)
        except orjson.JSONDecodeError as exc:
            raise bad_line(number, where, exc) from exc
        if not isinstance(record, dict) or (require_kind and "kind" not in record):
            raise bad_line(number, where, require_kind=require_kind)
        if validate:
            validate_record(record, where=f"{where}:{number}")
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
