"""``eval/evaluation.json``: the manifest of one evaluation, written last.

It records what the evaluation was computed from and what it wrote, so that ``verify`` can
check all of it and a publisher can quote one hash for all of it (docs/certificates.md):

- ``stream``: the stream's name and path as given, and its digest as evaluated (``lines``,
  ``bytes``, ``root``: ``evaluator.stream_digest``); ``eval/stream.digests`` holds the short
  digest of every line, so that ``verify`` can name the lines that changed;
- ``run_manifest``: the SHA-256 and size of the run's ``manifest.json`` (the run's config),
  when there is one beside the stream, and its parts: the fields that decide the run's
  requests and their answers by value, the others by hash (:func:`manifest_parts`), so that
  ``verify`` tells a resume with other operational settings from another run;
- ``options``: every option the evaluation decided with (``verify`` recomputes with them);
- ``render``: what ``report.md`` was rendered with besides the report (figure names, the
  evidence pack whose published rows it shows), so that ``verify`` can render it again;
- ``extra_records``: the file of records fed beside the stream (an evidence pack's sample
  summaries), or null;
- ``files``: the SHA-256 and size of every other file of the evaluation.

The *root hash* of the evaluation is the SHA-256 of ``evaluation.json``'s bytes (canonical
JSON, one line), as ``sha256sum`` prints it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import orjson

from cotaudit import __version__
from cotaudit.errors import UsageError
from cotaudit.schema import MANIFEST_NAME, JSONDict, canonical_json
from evaluator.certificates import CERTIFICATE_FORMAT
from evaluator.evaldir import EVALUATION_FORMAT, EVALUATION_KIND, EVALUATION_NAME
from evaluator.pipeline import EvaluateOptions
from evaluator.source import STDIN
from evaluator.stream_digest import StreamDigest

DIGESTS_NAME = "stream.digests"
EXTRA_RECORDS_NAME = "extra_records.jsonl"


# Fields of a run's manifest that say how the run was run, not what it is: a resume with other
# operational settings (--max-concurrency, rates, timeouts, the cache), another cotaudit
# version, a moved config file or directory rewrites them and nothing else. What decides which
# requests are made and what their answers are (plan_hash, output_config, shard, extends, and
# an import's pack and model) is every other field; ``served`` is compared entry by entry.
OPERATIONAL_FIELDS = frozenset({"config", "config_source", "versions", "created_at", "updated_at"})
SERVED_FIELD = "served"


def _value_digest(value: Any) -> str:
    return hashlib.sha256(canonical_json(value)).hexdigest()


def manifest_parts(manifest: Mapping[str, Any]) -> JSONDict:
    """A run manifest as an evaluation records it: its ``identity`` (every field that decides
    the requests and their answers, by value), the SHA-256 of each ``served`` entry per
    endpoint, and the SHA-256 of each ``operational`` field."""
    served = manifest.get(SERVED_FIELD)
    parts: JSONDict = {
        "identity": {
            k: v for k, v in manifest.items() if k not in OPERATIONAL_FIELDS and k != SERVED_FIELD
        },
        "operational": {
            k: _value_digest(v) for k, v in manifest.items() if k in OPERATIONAL_FIELDS
        },
    }
    if isinstance(served, Mapping):
        parts[SERVED_FIELD] = {
            str(name): [_value_digest(entry) for entry in entries]
            for name, entries in served.items()
            if isinstance(entries, list)
        }
    elif served is not None:
        parts["identity"][SERVED_FIELD] = served
    return parts


def run_manifest_digest(source: Path | str) -> dict[str, Any] | None:
    """SHA-256 and size of the run's ``manifest.json`` beside the stream, if there is one, and
    its parts (:func:`manifest_parts`) when it is a JSON object."""
    if str(source) == STDIN:
        return None
    path = Path(source).parent / MANIFEST_NAME
    if not path.is_file():
        return None
    data = path.read_bytes()  # once: the hash and the parts are of the same bytes
    out: dict[str, Any] = {
        "name": MANIFEST_NAME,
        "sha256": hashlib.sha256(data).hexdigest(),
        "bytes": len(data),
    }
    try:
        manifest = orjson.loads(data)
    except orjson.JSONDecodeError:
        return out
    if isinstance(manifest, dict):
        out.update(manifest_parts(manifest))
    return out


def evaluation_manifest(
    source: Path | str,
    digest: StreamDigest,
    options: EvaluateOptions,
    *,
    figures: Mapping[str, Sequence[Any]],
    comparison_figure: Any,
    published_pack: Path | None,
    extra_records: bool,
) -> JSONDict:
    """The manifest of an evaluation, without ``files`` (``EvalBuild.commit`` adds them)."""
    name = "<stdin>" if str(source) == STDIN else Path(source).name
    return {
        "kind": EVALUATION_KIND,
        "format": EVALUATION_FORMAT,
        "certificate_format": CERTIFICATE_FORMAT,
        "cotaudit": __version__,
        "stream": {"name": name, "path": str(source), **digest.as_json()},
        "run_manifest": run_manifest_digest(source),
        "options": options.as_json(),
        "render": {
            "figures": {k: [figure_entry(f) for f in v] for k, v in figures.items()},
            "comparison_figure": None
            if comparison_figure is None
            else figure_entry(comparison_figure),
            "published_pack": None if published_pack is None else str(published_pack),
        },
        "extra_records": EXTRA_RECORDS_NAME if extra_records else None,
    }


def figure_entry(figure: Any) -> dict[str, str]:
    """A figure (``evaluator.figures.Figure``) as the manifest records it."""
    return {"name": str(figure.name), "caption": str(figure.caption)}


def figure_from_entry(entry: object, where: Path) -> Any:
    """The figure a manifest entry records, to render ``report.md`` again with."""
    from evaluator.figures import Figure

    if not isinstance(entry, Mapping) or not all(
        isinstance(entry.get(k), str) for k in ("name", "caption")
    ):
        raise UsageError(
            f"render: a figure entry is {entry!r}, not {{name, caption}}",
            where=str(where),
            fix="The evaluation's manifest was edited; re-evaluate the run with "
            "`cotaudit evaluate`.",
        )
    return Figure(str(entry["name"]), str(entry["caption"]))


def write_extra_records(path: Path, records: Iterable[Mapping[str, Any]]) -> None:
    """The records fed beside the stream, as canonical JSON lines."""
    with path.open("wb") as handle:
        for record in records:
            handle.write(canonical_json(record) + b"\n")


def read_extra_records(path: Path) -> Iterator[JSONDict]:
    with path.open("rb") as handle:
        for line in handle:
            if line.strip():
                yield orjson.loads(line)


def read_manifest(eval_dir: Path) -> tuple[JSONDict, str]:
    """The evaluation's manifest and its root hash; ``UsageError`` when it is missing (an
    evaluation made before manifests, or a half-built one) or unreadable."""
    path = eval_dir / EVALUATION_NAME
    if not path.is_file():
        raise UsageError(
            f"no {EVALUATION_NAME}: this evaluation was made before evaluations had a "
            "manifest, or is incomplete",
            where=str(eval_dir),
            fix="Re-evaluate the run with `cotaudit evaluate RUN_DIR` (the raw outputs are "
            "unchanged), then verify again.",
        )
    data = path.read_bytes()
    try:
        manifest = orjson.loads(data)
    except orjson.JSONDecodeError:
        manifest = None
    if not isinstance(manifest, dict) or manifest.get("kind") != EVALUATION_KIND:
        raise UsageError(
            f"{EVALUATION_NAME} is not an evaluation manifest",
            where=str(path),
            fix="Re-evaluate the run with `cotaudit evaluate RUN_DIR`.",
        )
    return manifest, hashlib.sha256(data).hexdigest()
