"""Where an evaluated run's files are: ``RUN`` (holding ``eval/`` and ``results.jsonl``) or its
eval directory; read by ``cotaudit view`` and ``cotaudit compare``. Every problem is a
``UsageError`` naming what is missing and what to run."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from cotaudit.errors import UsageError
from cotaudit.schema import EVAL_DIRNAME, MANIFEST_NAME, RESULTS_NAME, JSONDict

REPORT_NAME = "report.json"
SELECTION_NAME = "selection.json"  # what `cotaudit selection` writes instead
CERTIFICATES_NAME = "certificates.jsonl"
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


def locate_run(target: Path) -> RunFiles:
    """The files of an evaluated run given as ``RUN`` (holding ``eval/``) or as its eval dir.

    Raises ``UsageError`` naming what is missing and what to run.
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
    elif (target / EVAL_DIRNAME / SELECTION_NAME).is_file():
        raise UsageError(
            "this is a selection-study run; the viewer shows grounding audits",
            where=str(target),
            fix=f"Read {target / EVAL_DIRNAME / 'selection.md'} for its results.",
        )
    elif target.is_dir():
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
        raise UsageError(
            "no results.jsonl for this evaluation (the viewer shows the raw outputs)",
            where=str(results),
            fix="Keep the run directory whole: view RUN, the directory holding results.jsonl.",
        )
    manifest = run_dir / MANIFEST_NAME
    return RunFiles(run_dir, eval_dir, results, manifest if manifest.is_file() else None)


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
        labels = ["/".join(p[-depth:]) for p in parts]
        if depth == 1 and any(label in GENERIC_RUN_NAMES for label in labels):
            depth += 1
            continue
        if len(set(labels)) == len(labels) or depth >= max(len(p) for p in parts):
            break
        depth += 1
    if len(set(labels)) < len(labels):  # the same directory twice
        labels = [f"{label} #{i + 1}" for i, label in enumerate(labels)]
    return labels


def headline_of(section: Mapping[str, Any], where: Path) -> Mapping[str, Any]:
    """The model section's ``headline``; a report written before it existed is refused."""
    headline = section.get("headline")
    if not isinstance(headline, Mapping) or not isinstance(headline.get("found"), Mapping):
        raise UsageError(
            "report.json has no headline (what the audit found): it was written by an older "
            "cotaudit",
            where=str(where),
            fix=f"Re-run `cotaudit evaluate {where.parent.parent}`, then this command again.",
        )
    return headline
