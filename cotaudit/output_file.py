"""Where a command writes its one output file: checked before any work, replaced in one step.

``cotaudit plan --out FILE``, ``view --out FILE``, ``rescore --json FILE`` and ``selection
--json FILE`` each write one file, and ``compare --out DIR`` and ``selection --out DIR`` write
named files into a directory (``comparison.json`` and ``.md``, ``selection.json``). Before any
work :func:`check_output_file` refuses (``UsageError``, exit 2) a path where writing could lose
a user's data:

- a directory; a path whose parent directory is missing (it is not created: a mistyped
  directory name must not become a new tree) or is a file; anything but a regular file;
- ``results.jsonl`` or ``manifest.json`` inside a run directory (one holding either of
  them), whatever they hold;
- an existing file that is not the command's own kind of output. :func:`identify` reads the
  file's first :data:`~cotaudit.constants.OUTPUT_IDENTIFY_BYTES` and tells the outputs apart
  by a cheap signature: a plan's JSONL lines (problem, truth and request records, a request
  among them), a view page's head (its security policy and data element), the top-level
  shape of a rescore report (``{"models": {M: {..., "published_comparison"}}}``) and of a
  selection report (``deployments``, ``pooled``, ``strata``...), a comparison's
  ``"kind": "comparison"`` and the head of its Markdown page. It names what else a file
  looks like where that is cheap: a run's stream or manifest, an evaluation's report,
  manifest or certificates, a sweep config.

A message names the flag that chose the path, or, where the user typed none and the path is
the command's default (``selection RUN`` writes into ``RUN/eval``), what the user gave and the
flag that would choose another. An empty file, and one the same command wrote before (a
rerun), are written over. The write itself (:func:`replacing`) goes to a new temporary file
beside the destination, is flushed to disk and renamed over it (``os.replace``): a failure
mid-write leaves the previous file whole. Files that must agree (``comparison.json`` and its
page, ``selection.json`` and its page) are written together (:func:`replacing_together`):
each to its temporary file, and only once all are whole on disk renamed over their
destinations; a rename that fails puts back the files already renamed, so a failure leaves
the earlier pair, never a new file beside an old one.

Output *directories* (``evaluate``, ``compare`` and ``selection --out DIR``, like ``demo``
and ``reproduce``) are created with their missing parents; :func:`check_output_dir` refuses
only a file at the path or above it (the files a command writes into one are checked as
above).
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shlex
import shutil
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

import orjson

from cotaudit.constants import OUTPUT_IDENTIFY_BYTES
from cotaudit.errors import UsageError
from cotaudit.schema import KINDS, MANIFEST_NAME, RESULTS_NAME


@dataclass(frozen=True, slots=True)
class FileKind:
    """What a file is, as a message names it; ``example``: a name for a new one."""

    description: str
    example: str = ""


PLAN = FileKind("a plan written by cotaudit plan", "plan.jsonl")
VIEW_PAGE = FileKind("a page written by cotaudit view", "view.html")
RESCORE_REPORT = FileKind("a report written by cotaudit rescore", "rescore.json")
SELECTION_REPORT = FileKind("a report written by cotaudit selection", "selection.json")
SELECTION_PAGE = FileKind("a page written by cotaudit selection", "selection.md")
COMPARISON_JSON = FileKind("a comparison written by cotaudit compare", "comparison.json")
COMPARISON_PAGE = FileKind("a comparison page written by cotaudit compare", "comparison.md")
STREAM = FileKind("a run's stream (results.jsonl)")
RUN_MANIFEST = FileKind("a run's manifest (manifest.json)")
EVALUATION_REPORT = FileKind("an evaluation's report (report.json of cotaudit evaluate)")
EVALUATION_MANIFEST = FileKind("an evaluation's manifest (evaluation.json)")
CERTIFICATES = FileKind("an evaluation's certificates (certificates.jsonl)")
SWEEP_CONFIG = FileKind("a sweep config (TOML)")
HTML_PAGE = FileKind("an HTML page")

PLAN_KINDS = frozenset({"problem", "truth", "request"})
SELECTION_KEYS = frozenset({"deployments", "ceiling", "pooled", "leave_one_out", "strata"})
# The view page's head (evaluator/viewer/assets/page.html and page.py): the policy that
# forbids every fetch, then the data element; the CSS between them is the page's own.
PAGE_POLICY = b'<meta http-equiv="Content-Security-Policy" content="default-src &#x27;none&#x27;;'
PAGE_INDEX = b'<script type="application/octet-stream" id="d-index">'
RUN_FILES = {RESULTS_NAME: "stream", MANIFEST_NAME: "manifest"}
# How comparison.md starts (evaluator/commands/compare.py, render_markdown): its title, then
# the first run's line.
COMPARISON_HEAD = b"# cotaudit comparison\n\n- run A: `"
# How selection.md starts (evaluator/selection_report.py, render_markdown): its title.
SELECTION_HEAD = b"# Selection study: correctness conditioning\n"


def identify(head: bytes, *, whole: bool) -> FileKind | None:
    """What a file that starts with ``head`` looks like (``whole``: ``head`` is all of it);
    ``None`` where it is none of the kinds above."""
    if head.startswith(COMPARISON_HEAD):
        return COMPARISON_PAGE
    if head.startswith(SELECTION_HEAD):
        return SELECTION_PAGE
    start = head[:1024].lstrip()
    if start[:1] == b"<":
        return _html(start, head)
    if whole and start[:1] == b"{":
        try:
            document = orjson.loads(head)
        except orjson.JSONDecodeError:
            document = None
        if isinstance(document, dict):
            kind = _json_document(document)
            if kind is not None:
                return kind
    kinds = _jsonl_kinds(head, whole=whole)
    if kinds:
        return _records(kinds)
    if whole:
        return _toml(head)
    return None


def _html(start: bytes, head: bytes) -> FileKind:
    if start[:15].lower() == b"<!doctype html>" and PAGE_POLICY in head and PAGE_INDEX in head:
        return VIEW_PAGE
    return HTML_PAGE


def _json_document(document: dict[str, Any]) -> FileKind | None:
    kind = document.get("kind")
    if kind == "manifest":
        return RUN_MANIFEST
    if kind == "report":
        return EVALUATION_REPORT
    if kind == "evaluation":
        return EVALUATION_MANIFEST
    if kind == "comparison":
        return COMPARISON_JSON
    models = document.get("models")
    if (
        document.keys() == {"models"}
        and isinstance(models, dict)
        and models
        and all(isinstance(m, dict) and "published_comparison" in m for m in models.values())
    ):
        return RESCORE_REPORT
    if document.keys() >= SELECTION_KEYS and isinstance(document["deployments"], dict):
        return SELECTION_REPORT
    return None


def _jsonl_kinds(head: bytes, *, whole: bool) -> set[str] | None:
    """The ``kind`` of every line, or ``None`` unless each line is a JSON object with one. The
    last line may be cut (where the read stopped, or a stream's torn tail): it is left out
    unless it parses."""
    *lines, last = head.split(b"\n")
    kinds: set[str] = set()
    for line in lines:
        if not line.strip():
            continue
        kind = _record_kind(line)
        if kind is None:
            return None
        kinds.add(kind)
    if whole and last.strip():
        kind = _record_kind(last)
        if kind is not None:
            kinds.add(kind)
    return kinds or None


def _record_kind(line: bytes) -> str | None:
    try:
        record = orjson.loads(line)
    except orjson.JSONDecodeError:
        return None
    kind = record.get("kind") if isinstance(record, dict) else None
    return kind if isinstance(kind, str) else None


def _records(kinds: set[str]) -> FileKind | None:
    if "request" in kinds and kinds <= PLAN_KINDS:
        return PLAN
    if kinds <= set(KINDS):
        return STREAM
    if kinds == {"certificate"}:
        return CERTIFICATES
    return None


def _toml(head: bytes) -> FileKind | None:
    try:
        document = tomllib.loads(head.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError):
        return None
    return SWEEP_CONFIG if "endpoints" in document or "task" in document else None


def _quoted(path: Path) -> str:
    return shlex.quote(str(path))


def _refusal(what: str, fix: str, *, flag: str, default_of: str | None) -> UsageError:
    """The error for a refused output path: named by ``flag``, or, where the user typed no
    flag, as the default for what they gave (``default_of``) that ``flag`` would change."""
    if default_of is None:
        return UsageError(what, where=flag, fix=fix)
    return UsageError(
        f"{what} (the default output for {default_of}; {flag} chooses another)", fix=fix
    )


def check_output_file(
    path: Path,
    writes: FileKind,
    *,
    flag: str,
    in_dir: bool = False,
    default_of: str | None = None,
) -> None:
    """Refuse a ``path`` where writing ``writes`` could lose data (see the module docstring),
    before anything is written; ``flag`` names the option in the messages.

    ``in_dir``: ``path`` is the file that ``flag DIR`` writes into its directory, not the
    flag's value. ``default_of``: the user typed no ``flag``, and ``path`` is the command's
    default for what they gave (e.g. ``"RUN_DIR runs/x"``); the messages name that.
    """

    def refused(what: str, fix: str) -> UsageError:
        return _refusal(what, fix, flag=flag, default_of=default_of)

    example = path.parent / (writes.example or "out")
    if in_dir:
        another = "another directory"
    elif example != path:
        another = f"another path (e.g. {flag} {_quoted(example)})"
    else:
        another = "another path"
    if path.is_dir():
        if in_dir:
            raise refused(
                f"{path} is a directory, not a file: {path.name} is written there",
                f"Move that directory away, or give {flag} {another}.",
            )
        raise refused(
            f"{path} is a directory; {flag} is one file",
            f"Give a file path, e.g. {flag} {_quoted(path / (writes.example or 'out'))}.",
        )
    parent = path.parent
    if not parent.is_dir():
        above = next((p for p in path.parents if p.exists()), None)
        if above is not None and not above.is_dir():
            raise refused(
                f"{path} is under {above}, which is a file, not a directory",
                f"Give {flag} a path in an existing directory.",
            )
        raise refused(
            f"the directory {parent} does not exist",
            f"Create it first (mkdir -p {_quoted(parent)}) or give {flag} a path in an "
            f"existing directory; {flag} does not create directories.",
        )
    role = RUN_FILES.get(path.name)
    if role is not None and any((parent / name).exists() for name in RUN_FILES):
        raise refused(
            f"{path} is the {role} of the run directory {parent}; only cotaudit run writes it",
            f"Give {flag} {another}.",
        )
    if not path.exists():
        return
    if not path.is_file():
        raise refused(f"{path} is not a regular file", f"Give {flag} {another}.")
    try:
        with path.open("rb") as handle:
            head = handle.read(OUTPUT_IDENTIFY_BYTES + 1)
    except OSError as exc:
        raise refused(
            f"{path} cannot be read ({exc.strerror or exc}), so nothing shows it is "
            f"{writes.description}",
            f"Give {flag} {another}.",
        ) from exc
    if not head:
        return  # an empty file: nothing to lose
    found = identify(head[:OUTPUT_IDENTIFY_BYTES], whole=len(head) <= OUTPUT_IDENTIFY_BYTES)
    if found == writes:
        return  # the command's own earlier output: a rerun replaces it
    what = (
        f"{path} is {found.description}, not {writes.description}"
        if found is not None
        else f"{path} exists and is not {writes.description}"
    )
    raise refused(
        f"{what}; it is left as it is",
        f"Give {flag} {another}, or remove the file first if it is not needed.",
    )


def check_output_dir(
    path: Path,
    *,
    flag: str,
    holds: str,
    example: str | None = None,
    default_of: str | None = None,
) -> None:
    """Refuse an output directory at or under a file, before anything is written (a missing
    directory and its missing parents are created by the command: it owns them); ``example``:
    a directory the message suggests; ``default_of`` as for :func:`check_output_file`."""
    for above in (path, *path.parents):
        if above.exists():
            if above.is_dir():
                return
            what = (
                f"{path} is a file, not a directory"
                if above == path
                else f"{path} is under {above}, which is a file, not a directory"
            )
            suggested = f", e.g. {flag} {example}" if example else ""
            raise _refusal(
                what,
                f"Give {flag} a directory for {holds} (created if missing){suggested}.",
                flag=flag,
                default_of=default_of,
            )


@contextlib.contextmanager
def replacing(path: Path) -> Iterator[BinaryIO]:
    """A new temporary file beside ``path`` to write into. When the block ends it is flushed
    to disk and renamed over ``path`` in one step, and the rename itself made durable (the
    directory flushed: a power loss after it leaves the new file, not the old one); when the
    block raises it is removed. Until then ``path`` is as it was, and a reader never sees half
    a file."""
    tmp, fd = _temporary(path)
    try:
        with os.fdopen(fd, "wb") as handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
        fsync_directory(path.parent)
    finally:
        # A failure to remove the temporary file must not hide the error that matters.
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)


def fsync_directory(path: Path) -> None:
    """Flush the directory ``path`` to disk: the names made, renamed or removed in it."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _temporary(path: Path) -> tuple[Path, int]:
    """A new temporary file beside ``path`` (a name no other file has), open for writing."""
    while True:
        tmp = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
        try:
            return tmp, os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o666)
        except FileExistsError:
            continue


@contextlib.contextmanager
def replacing_together(*paths: Path) -> Iterator[tuple[BinaryIO, ...]]:
    """One temporary file per path, in their order, to write into; when the block ends each is
    flushed to disk, and only then are they renamed over their paths. When the block raises,
    or a file cannot be written whole, none of ``paths`` changes. A rename that fails (a
    directory put at a path since it was checked) undoes the renames before it: the earlier
    files are put back from hard links kept until the last rename (copies where the
    filesystem has no hard links), paths that did not exist are removed again."""
    if len(set(paths)) != len(paths):
        raise ValueError(f"a path is given twice: {[str(p) for p in paths]}")
    temporaries: list[Path] = []
    keeps: dict[Path, Path] = {}  # destination -> hard link (or copy) of its earlier file
    with contextlib.ExitStack() as stack:
        try:
            handles: list[BinaryIO] = []
            for path in paths:
                tmp, fd = _temporary(path)
                temporaries.append(tmp)
                handles.append(stack.enter_context(os.fdopen(fd, "wb")))
            yield tuple(handles)
            for handle in handles:
                handle.flush()
                os.fsync(handle.fileno())
            stack.close()
            for path in paths:
                if path.is_file():
                    keeps[path] = _keep(path)
            done: list[Path] = []
            try:
                for tmp, path in zip(temporaries, paths, strict=True):
                    os.replace(tmp, path)
                    done.append(path)
            except BaseException:
                for path in reversed(done):
                    if path in keeps:
                        os.replace(keeps.pop(path), path)
                    else:
                        path.unlink(missing_ok=True)
                raise
        finally:
            for leftover in [*temporaries, *keeps.values()]:
                leftover.unlink(missing_ok=True)


def _keep(path: Path) -> Path:
    """A second name for ``path``'s current file, beside it, to put back if need be."""
    while True:
        keep = path.with_name(f".{path.name}.{secrets.token_hex(4)}.old")
        try:
            os.link(path, keep)
        except FileExistsError:
            continue
        except OSError:  # a filesystem without hard links: a copy does as well
            tmp, fd = _temporary(path)
            with os.fdopen(fd, "wb") as handle, path.open("rb") as source:
                shutil.copyfileobj(source, handle)
            return tmp
        return keep


__all__ = [
    "CERTIFICATES",
    "COMPARISON_JSON",
    "COMPARISON_PAGE",
    "EVALUATION_MANIFEST",
    "EVALUATION_REPORT",
    "HTML_PAGE",
    "PLAN",
    "RESCORE_REPORT",
    "RUN_MANIFEST",
    "SELECTION_PAGE",
    "SELECTION_REPORT",
    "STREAM",
    "SWEEP_CONFIG",
    "VIEW_PAGE",
    "FileKind",
    "check_output_dir",
    "check_output_file",
    "identify",
    "replacing",
    "replacing_together",
]
