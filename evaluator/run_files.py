"""Where an evaluated run's files are: ``RUN`` (holding ``eval/`` and ``results.jsonl``) or its
eval directory; read by ``cotaudit view`` and ``cotaudit compare``. Every problem is a
``UsageError`` naming what is missing and what to run."""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePath
from typing import Any

import orjson

from cotaudit.errors import UsageError
from cotaudit.schema import EVAL_DIRNAME, MANIFEST_NAME, RESULTS_NAME, JSONDict

REPORT_NAME = "report.json"
SELECTION_NAME = "selection.json"  # what `cotaudit selection` writes instead
CERTIFICATES_NAME = "certificates.jsonl"
RUNS_NAMED = 5  # evaluated runs inside a directory that an error names
GENERIC_RUN_NAMES = frozenset({"run", "eval", "results"})  # labels that need their parent


@dataclass(frozen=True, slots=True)
class RunFiles:
    """Where one evaluated run's files are."""

    run_dir: Path
    eval_dir: Path
    results: Path
    manifest: Path | None

    @property
    def report(self) -> Path:
        return self.eval_dir / REPORT_NAME

    @property
    def certificates(self) -> Path:
        return self.eval_dir / CERTIFICATES_NAME


# Why a command needs the stream beside the evaluation (for the message when it is missing).
NEEDS_RESULTS = {
    "view": "the viewer shows the raw outputs",
    "compare": "compare checks from its problem records that runs audited the same problems",
}


def locate_run(target: Path, *, command: str = "view") -> RunFiles:
    """The files of an evaluated run given as ``RUN`` (holding ``eval/``) or as its eval dir.

    Raises ``UsageError`` naming what is missing and what to run; ``command`` (``view`` or
    ``compare``) is the command that asked, as the messages name it.
    """
    if (target / EVAL_DIRNAME / REPORT_NAME).is_file():
        run_dir, eval_dir = target, target / EVAL_DIRNAME
        results = run_dir / RESULTS_NAME
    elif (target / REPORT_NAME).is_file():
        eval_dir = target
        source = read_json(target / REPORT_NAME).get("source")
        results = (
            Path(source)
            if isinstance(source, str) and Path(source).is_file()
            else target.parent / RESULTS_NAME
        )
        run_dir = results.parent
    elif (target / EVAL_DIRNAME / SELECTION_NAME).is_file() or (target / SELECTION_NAME).is_file():
        selection = target if (target / SELECTION_NAME).is_file() else target / EVAL_DIRNAME
        raise UsageError(
            f"this is a selection-study run (it holds {selection / SELECTION_NAME}); cotaudit "
            f"{command} reads grounding audits",
            where=str(target),
            fix=f"Read {selection / 'selection.md'} for its results.",
        )
    elif target.is_file():
        raise _a_file(target, command)
    elif target.is_dir():
        if not (target / RESULTS_NAME).is_file():
            raise UsageError(
                "not a run directory: it holds neither eval/report.json nor results.jsonl",
                where=str(target),
                fix=_runs_inside(target, command)
                or "Give an evaluated run directory (one holding eval/report.json) or its "
                "eval directory.",
            )
        raise UsageError(
            "no eval/report.json: this run has not been evaluated",
            where=str(target),
            fix=f"Run `cotaudit evaluate {target}` first, then this command again.",
        )
    else:
        raise UsageError(
            "no such run directory",
            where=str(target),
            fix="Give an evaluated run directory (one holding eval/report.json).",
        )
    if not (eval_dir / CERTIFICATES_NAME).is_file():
        raise UsageError(
            "no certificates.jsonl beside report.json",
            where=str(eval_dir),
            fix=f"Re-run `cotaudit evaluate {run_dir}`.",
        )
    if not results.is_file():
        why = NEEDS_RESULTS.get(command, f"cotaudit {command} reads it")
        raise UsageError(
            f"no results.jsonl for this evaluation ({why})",
            where=str(results),
            fix=f"Keep the run directory whole, and give cotaudit {command} the directory "
            "holding results.jsonl and eval/.",
        )
    manifest = run_dir / MANIFEST_NAME
    return RunFiles(run_dir, eval_dir, results, manifest if manifest.is_file() else None)


def _a_file(target: Path, command: str) -> UsageError:
    """A file given where a run directory goes (its stream, its report): the directory to pass
    instead, where the file's directory is one."""
    parent = target.parent
    if (parent / EVAL_DIRNAME / REPORT_NAME).is_file() or (parent / REPORT_NAME).is_file():
        fix = f"Give cotaudit {command} the directory holding it: {parent}."
    elif target.name == RESULTS_NAME:
        fix = (
            f"Give cotaudit {command} the run directory {parent} once it is evaluated "
            f"(`cotaudit evaluate {parent}`)."
        )
    else:
        fix = f"Give cotaudit {command} an evaluated run directory (one holding eval/report.json)."
    return UsageError("a file, not a run directory", where=str(target), fix=fix)


def _runs_inside(target: Path, command: str) -> str | None:
    """The advice for a directory that holds evaluated runs rather than being one: a
    ``demo`` or ``reproduce`` ``--out`` (its run is ``OUT/run``), a folder of sweeps."""
    try:
        runs = sorted(
            child
            for child in target.iterdir()
            if child.is_dir() and (child / EVAL_DIRNAME / REPORT_NAME).is_file()
        )
    except OSError:
        return None
    if not runs:
        return None
    shown = " ".join(shlex.quote(str(run)) for run in runs[:RUNS_NAMED])
    more = f" (and {len(runs) - RUNS_NAMED:,} more)" if len(runs) > RUNS_NAMED else ""
    one = "it" if len(runs) == 1 else "one or more of them"
    return (
        f"It holds evaluated run{'s' if len(runs) > 1 else ''}{more}: give {one}, "
        f"as in `cotaudit {command} {shown}`."
    )


def read_json(path: Path) -> JSONDict:
    try:
        value = orjson.loads(path.read_bytes())
    except orjson.JSONDecodeError as exc:
        raise UsageError(
            f"not valid JSON ({exc})", where=str(path), fix="Re-run `cotaudit evaluate`."
        ) from exc
    if not isinstance(value, dict):
        raise UsageError("not a JSON object", where=str(path), fix="Re-run `cotaudit evaluate`.")
    return value


def run_labels(runs: Sequence[Path]) -> list[str]:
    """Short distinct labels: the directory name, with parents added until labels differ."""
    parts = [r.resolve().parts for r in runs]
    depth = 1
    while True:
        # PurePath: a label reaching the root is "/tmp/run", not "//tmp/run" (parts[0] is "/").
        labels = [str(PurePath(*p[-depth:])) for p in parts]
        if depth == 1 and any(label in GENERIC_RUN_NAMES for label in labels):
            depth += 1
            continue
        if len(set(labels)) == len(labels) or depth >= max(len(p) for p in parts):
            break
        depth += 1
    if len(set(labels)) < len(labels):  # the same directory twice
        labels = [f"{label} #{i + 1}" for i, label in enumerate(labels)]
    return labels


def model_sections(report: Mapping[str, Any], run: RunFiles) -> dict[str, Mapping[str, Any]]:
    """The report's ``models``: one object per model, at least one; a report without them,
    or with a section that is not an object (edited, or of another program), is refused."""
    sections = report.get("models")
    if not isinstance(sections, dict) or not sections:
        raise UsageError(
            "report.json has no models",
            where=str(run.report),
            fix=f"Re-run `cotaudit evaluate {run.run_dir}`.",
        )
    for endpoint, section in sections.items():
        if not isinstance(section, Mapping):
            raise UsageError(
                f"not a report of cotaudit evaluate: model {endpoint} is not an object",
                where=str(run.report),
                fix=f"Check the evaluation with `cotaudit verify {run.run_dir}`; re-run "
                f"`cotaudit evaluate {run.run_dir}` to write it again.",
            )
    return sections


def headline_of(section: object, where: Path) -> Mapping[str, Any]:
    """The model section's ``headline``; a report written before it existed is refused, and so
    is a section that is not an object (a report edited or of another program)."""
    if not isinstance(section, Mapping):
        raise UsageError(
            "not a report of cotaudit evaluate: a model's section is not an object",
            where=str(where),
            fix=f"Re-run `cotaudit evaluate {where.parent.parent}`, then this command again.",
        )
    headline = section.get("headline")
    if not isinstance(headline, Mapping) or not isinstance(headline.get("found"), Mapping):
        raise UsageError(
            "report.json has no headline (what the audit found): it was written by an older "
            "cotaudit",
            where=str(where),
            fix=f"Re-run `cotaudit evaluate {where.parent.parent}`, then this command again.",
        )
    return headline
