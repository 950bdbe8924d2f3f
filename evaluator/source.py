"""Where the evaluator reads a stream from: a run directory, a file, or standard input mid-run.

A run may still be writing the stream, so a last line without its newline is *torn*: it is
dropped, never parsed. Every other line must be a record of ``cotaudit.schema`` (validated
as it is read); a line that is not is an error naming the file and line number (a damaged
stream must not be half-evaluated). Grouping the records per problem is
:mod:`evaluator.grouping`.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any, BinaryIO, TypeVar

import orjson

from cotaudit.caller_terms import current, option
from cotaudit.errors import UsageError
from cotaudit.schema import (
    EVAL_DIRNAME,
    MANIFEST_NAME,
    RESULTS_NAME,
    JSONDict,
    bad_line,
    numbered_records,
)

STDIN = "-"
V = TypeVar("V")


def run_endpoint_order(stream: Path | str) -> tuple[str, ...]:
    """The endpoint names in the order of the run's config, read from the manifest beside the
    stream; empty for standard input or a stream without a readable manifest.

    Reports list endpoints in this order, not in the order their records happen to reach the
    stream, which depends on how concurrent requests finished.
    """
    try:
        endpoints = _run_manifest(stream)["config"]["endpoints"]
        return tuple(str(ep["name"]) for ep in endpoints)
    except (KeyError, TypeError):
        return ()


def run_planned_requests(stream: Path | str) -> dict[str, int]:
    """Per endpoint, the requests the run's plan holds (``planned_requests`` of the manifest
    beside the stream); empty for standard input, a stream without a readable manifest, or
    a run that did not count its plan (``docs/schema.md``)."""
    try:
        planned = _run_manifest(stream)["planned_requests"]
        return {str(name): int(count) for name, count in planned.items()}
    except (KeyError, TypeError, ValueError, AttributeError):
        return {}


def run_source(stream: Path | str) -> str | None:
    """The ``source`` the manifest beside the stream records (``import-evidence`` writes one;
    ``cotaudit run``'s manifest has none); None for standard input or without a manifest."""
    manifest = _run_manifest(stream)
    value = manifest.get("source") if isinstance(manifest, dict) else None
    return value if isinstance(value, str) else None


def _run_manifest(stream: Path | str) -> Any:
    """The manifest beside a stream, parsed; {} for standard input or one not readable."""
    if str(stream) == STDIN:
        return {}
    try:
        return orjson.loads((Path(stream).parent / MANIFEST_NAME).read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return {}


def ordered_by_run(mapping: Mapping[str, V], order: Iterable[str]) -> dict[str, V]:
    """``mapping`` re-keyed in run order: names in ``order`` first, as there, then the rest
    by name (deterministic whatever order the stream gave)."""
    rank = {name: i for i, name in enumerate(order)}
    keys = sorted(mapping, key=lambda name: (rank.get(name, len(rank)), name))
    return {name: mapping[name] for name in keys}


def iter_records(source: str | Path) -> Iterator[JSONDict]:
    """Yield every complete record of a stream file, or of stdin when ``source`` is ``"-"``.

    The torn last line, if any, is skipped. Raises ``UsageError`` for a missing file or a
    damaged line (with file and line number).
    """
    for _, record in iter_numbered_records(source):
        yield record


def iter_numbered_records(source: str | Path) -> Iterator[tuple[int, JSONDict]]:
    """Like :func:`iter_records`, with the 1-based line number of each record."""
    if str(source) == STDIN:
        yield from numbered_records(
            sys.stdin.buffer, where="<stdin>", require_kind=True, validate=True
        )
        return
    path = Path(source)
    if not path.is_file():
        raise UsageError(
            "no such stream file",
            where=str(path),
            fix="Give a run directory holding results.jsonl, a results.jsonl path, or '-'.",
        )
    with path.open("rb") as handle:
        yield from numbered_records(handle, where=str(path), require_kind=True, validate=True)


RawRecord = tuple[int, bytes, JSONDict | None]


def iter_raw_records(source: str | Path) -> Iterator[RawRecord]:
    """``(line number, raw line, record)`` for every complete line of a stream file, or of
    stdin when ``source`` is ``"-"``; ``record`` is None for a blank line.

    Unlike :func:`iter_records`, records are parsed but not validated: the evaluation checks
    the fields it groups by as it reads and every field where the record is audited (so that
    the check runs in parallel). The torn last line, if any, is never yielded; a complete
    line that is not a JSON object with a ``kind`` is a ``UsageError`` naming the line.
    """
    if str(source) == STDIN:
        yield from _raw_lines(sys.stdin.buffer, "<stdin>")
        return
    path = Path(source)
    if not path.is_file():
        raise UsageError(
            "no such stream file",
            where=str(path),
            fix="Give a run directory holding results.jsonl, a results.jsonl path, or '-'.",
        )
    with path.open("rb") as handle:
        yield from _raw_lines(handle, str(path))


def _raw_lines(handle: BinaryIO, where: str) -> Iterator[RawRecord]:
    loads = orjson.loads
    for number, line in enumerate(handle, start=1):
        if not line.endswith(b"\n"):
            return  # torn tail: never parsed
        if line.isspace():
            yield number, line, None
            continue
        try:
            record = loads(line)
        except orjson.JSONDecodeError as exc:
            raise bad_line(number, where, exc) from exc
        if type(record) is not dict or "kind" not in record:
            raise bad_line(number, where)
        yield number, line, record


def _require_piped_stdin() -> None:
    """Refuse ``"-"`` where standard input is the terminal (nobody types a JSONL stream: the
    command would sit waiting for one) or closed."""
    stdin = sys.stdin
    if stdin is None or stdin.isatty():
        raise UsageError(
            f"standard input is {'closed' if stdin is None else 'the terminal here'}, and "
            "'-' reads the stream from it",
            where=STDIN,
            fix="Pipe the stream in (... - < RUN_DIR/results.jsonl), or give the run "
            "directory or the stream file instead of '-'.",
        )


def resolve_stream(target: str | Path) -> Path | str:
    """Map ``RUN_DIR`` to ``RUN_DIR/results.jsonl``; keep a file path or ``"-"`` as is
    (refused where standard input is the terminal or closed: :func:`_require_piped_stdin`).

    A directory without ``results.jsonl`` is refused naming what it is where that is plain: an
    evaluation of ``cotaudit evaluate`` or the output of ``cotaudit selection`` (users give
    ``RUN/eval`` for ``RUN``), pointing at the run directory it was computed from.
    """
    if str(target) == STDIN:
        _require_piped_stdin()
        return STDIN
    path = Path(target)
    if path.is_dir():
        stream = path / RESULTS_NAME
        if not stream.is_file():
            raise _no_stream_in(path)
        return stream
    if not path.exists():
        raise UsageError(
            "no such run directory or stream file",
            where=str(path),
            fix="Give a run directory holding results.jsonl, a results.jsonl path, or '-'.",
        )
    return path


def _no_stream_in(path: Path) -> UsageError:
    # Imported here: evaluator.verification reads streams through this module.
    from evaluator.run_files import REPORT_NAME, SELECTION_NAME
    from evaluator.verification import EVALUATION_FILES

    marker = next((name for name in EVALUATION_FILES if (path / name).is_file()), None)
    if marker is not None:
        what = f"this is an evaluation directory (cotaudit evaluate wrote it: it holds {marker})"
    elif (path / SELECTION_NAME).is_file():
        what = f"this is the output directory of cotaudit selection (it holds {SELECTION_NAME})"
    else:
        return UsageError(
            "run directory has no results.jsonl",
            where=str(path),
            fix="Run `cotaudit run` or `cotaudit import-evidence` into it first.",
        )
    run = _run_of(path, path / REPORT_NAME)
    if run is None:
        fix = "Give the run directory it was computed from instead (the directory holding "
        fix += "results.jsonl)."
    else:
        fix = f"Give its run directory instead: {run}, the directory holding results.jsonl"
        # Written with --out elsewhere: the run alone does not lead back to this directory.
        away = (run / EVAL_DIRNAME).resolve() != path.resolve()
        verify = "verify" if current().api else "cotaudit verify"
        fix += f" (and this directory as {option('eval_dir')} to {verify})." if away else "."
    return UsageError(
        f"{what}, not a run directory: it has no results.jsonl", where=str(path), fix=fix
    )


def _run_of(path: Path, report: Path) -> Path | None:
    """The run directory an output directory was computed from: the directory above it when
    that holds a stream (the default ``RUN/eval``), else the stream its report names."""
    if (path.parent / RESULTS_NAME).is_file():
        return path.parent
    try:
        source = orjson.loads(report.read_bytes()).get("source")
    except (OSError, orjson.JSONDecodeError, AttributeError):
        return None
    if isinstance(source, str) and source != STDIN and Path(source).is_file():
        return Path(source).parent
    return None
