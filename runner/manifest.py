"""``RUN/manifest.json``: which config a run directory belongs to.

It holds the config (endpoint key variables by NAME only), the plan hash (SHA-256 of the
output-affecting part of the config: task table, endpoint names, providers, servers, models
and output parameters), the shard, versions and timestamps. A run directory belongs to one
plan hash: rerunning the same config resumes; a different one is refused, naming what
differs. Operational settings (rates, concurrency, timeouts, retries, cache dir) may change
between resumes.
"""

from __future__ import annotations

import functools
import os
import platform
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

import orjson

from cotaudit import __version__
from cotaudit.errors import UsageError
from cotaudit.schema import JSONDict
from runner.config import SweepConfig

MANIFEST_NAME = "manifest.json"
MANIFEST_SCHEMA = 1


@dataclass(frozen=True, slots=True)
class Shard:
    """``--shard i/N``: keep a request iff ``int(sha256(request_id)) % N == i``."""

    index: int
    count: int

    @classmethod
    def parse(cls, text: str) -> Shard:
        index_s, sep, count_s = text.partition("/")
        try:
            index, count = int(index_s), int(count_s)
        except ValueError:
            index, count = -1, 0
        if not sep or count < 1 or not 0 <= index < count:
            raise UsageError(
                f"bad shard {text!r}",
                where="--shard",
                fix="Use i/N with 0 <= i < N, e.g. --shard 0/4.",
            )
        return cls(index, count)

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"


@functools.cache
def _installed_versions() -> tuple[tuple[str, str], ...]:
    # Read once per process: importlib.metadata scans sys.path and parses each package's
    # METADATA, and the code already imported does not change.
    out = {"cotaudit": __version__, "python": platform.python_version()}
    for dist in ("aiohttp", "tenacity", "aiolimiter", "orjson", "diskcache", "numpy"):
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            out[dist] = "missing"
    return tuple(out.items())


def _versions() -> dict[str, str]:
    return dict(_installed_versions())


def _diff(old: Any, new: Any, path: str, out: list[str]) -> None:
    if isinstance(old, dict) and isinstance(new, dict):
        for key in sorted(set(old) | set(new)):
            _diff(old.get(key), new.get(key), f"{path}.{key}" if path else key, out)
    elif isinstance(old, list) and isinstance(new, list) and len(old) == len(new):
        for i, (a, b) in enumerate(zip(old, new, strict=True)):
            _diff(a, b, f"{path}[{i}]", out)
    elif old != new:
        out.append(f"{path}: {old!r} -> {new!r}")


def read_manifest(run_dir: Path) -> JSONDict | None:
    path = run_dir / MANIFEST_NAME
    if not path.exists():
        return None
    try:
        data = orjson.loads(path.read_bytes())
    except (OSError, orjson.JSONDecodeError) as exc:
        raise UsageError(
            f"unreadable manifest ({exc})",
            where=str(path),
            fix="Restore it, or start a fresh run directory.",
        ) from exc
    if not isinstance(data, dict):
        raise UsageError("manifest is not a JSON object", where=str(path), fix="Restore it.")
    return data


def check_manifest(run_dir: Path, config: SweepConfig, shard: Shard | None) -> JSONDict | None:
    """The existing manifest if it matches ``config``; ``UsageError`` naming what differs.

    Writes nothing.
    """
    existing = read_manifest(run_dir)
    if existing is None:
        if (run_dir / "results.jsonl").exists():
            raise UsageError(
                "results.jsonl exists but manifest.json does not",
                where=str(run_dir),
                fix="Point run_dir at a fresh directory (the stream's config is unknown).",
            )
        return None
    where = str(run_dir / MANIFEST_NAME)
    if existing.get("plan_hash") != config.plan_hash():
        diffs: list[str] = []
        _diff(existing.get("output_config"), config.output_config(), "", diffs)
        shown = "; ".join(diffs[:5]) + (f"; and {len(diffs) - 5} more" if len(diffs) > 5 else "")
        raise UsageError(
            f"this run directory belongs to another config (differs in: {shown or 'plan hash'})",
            where=where,
            fix="Use a new run_dir for a changed config, or restore the original config.",
        )
    old_shard = existing.get("shard")
    if old_shard != (str(shard) if shard else None):
        raise UsageError(
            f"this run directory was run with shard {old_shard}, now {shard}",
            where=where,
            fix="Resume with the same --shard, or use one run_dir per shard.",
        )
    return existing


def served_history(
    existing: JSONDict | None, served: dict[str, JSONDict] | None, now: str
) -> dict[str, list[JSONDict]]:
    """Per endpoint, what preflight found serving it, one entry per change.

    A resume whose preflight finds the same (listing, model, fingerprint) as the last entry
    adds nothing; one that finds another adds it, dated, so the manifest shows that the
    server behind an endpoint changed during the run's life (``served`` in docs/schema.md).
    """
    history: dict[str, list[JSONDict]] = {
        str(k): list(v) for k, v in ((existing or {}).get("served") or {}).items()
    }
    for name, found in (served or {}).items():
        entries = history.setdefault(name, [])
        last = {k: v for k, v in entries[-1].items() if k != "checked_at"} if entries else None
        if last != found:
            entries.append({**found, "checked_at": now})
    return history


def write_manifest(
    run_dir: Path,
    config: SweepConfig,
    shard: Shard | None,
    existing: JSONDict | None,
    *,
    served: dict[str, JSONDict] | None = None,
) -> JSONDict:
    """Write (atomically) the manifest of ``run_dir``; keeps ``created_at`` of a resumed run.

    ``served``: what preflight found serving each endpoint (:func:`served_history`)."""
    now = datetime.now(UTC).isoformat(timespec="seconds")
    manifest: JSONDict = {
        "kind": "manifest",
        "schema": MANIFEST_SCHEMA,
        "plan_hash": config.plan_hash(),
        "output_config": config.output_config(),
        "config": config.to_mapping(),
        "config_source": config.source,
        "shard": str(shard) if shard else None,
        "versions": _versions(),
        "created_at": (existing or {}).get("created_at", now),
        "updated_at": now,
    }
    history = served_history(existing, served, now)
    if history:
        manifest["served"] = history
    run_dir.mkdir(parents=True, exist_ok=True)
    path = run_dir / MANIFEST_NAME
    tmp = path.with_suffix(".json.tmp")
    tmp.write_bytes(orjson.dumps(manifest, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS))
    with tmp.open("rb") as f:
        os.fsync(f.fileno())
    os.replace(tmp, path)
    return manifest
