"""``RUN/manifest.json``: which config a run directory belongs to.

It holds the config (endpoint key variables by NAME only), the plan hash (SHA-256 of the
output-affecting part of the config: task table, endpoint names, providers, servers, models
and output parameters), the shard, versions and timestamps. Rerunning the same config
resumes. A changed config that only *extends* the plan (more problems, another endpoint:
every request and problem already in the stream is planned again, unchanged) grows the run
directory: the manifest takes the new plan hash and keeps the old ones in ``extends``. A
change that would alter or drop what the stream holds is refused, naming what differs.
Operational settings (rates, concurrency, timeouts, retries, cache dir) may change between
resumes. That the stream beside the manifest is this config's run is checked as the resume
reads it (``runner.stream_plan``). The run directories of every ``--shard i/N`` of one config
merge into one run directory of the whole plan (``runner.shard_merge``).

Nothing here writes before it has checked: symlinked stream or manifest files and a run
directory under a file are refused before the stream is touched.
"""

from __future__ import annotations

import functools
import hashlib
import os
import platform
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

import orjson

from cotaudit import __version__
from cotaudit.caller_terms import key_or_option, label, option, without
from cotaudit.errors import UsageError
from cotaudit.output_file import replacing
from cotaudit.schema import MANIFEST_NAME, RESULTS_NAME, JSONDict, canonical_json
from runner.config import SweepConfig
from runner.resume import appendable_records

MANIFEST_SCHEMA = 1
DIFFS_SHOWN = 5


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
                where=label("shard"),
                fix=f"Use i/N with 0 <= i < N, e.g. {option('shard', '0/4')}.",
            )
        return cls(index, count)

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"

    @property
    def whole(self) -> bool:
        """Whether the shard is the whole plan (``0/1``): it keeps every request."""
        return self.count == 1

    def keeps(self, request_id: str) -> bool:
        """Whether the request ``request_id`` is this shard's."""
        if self.whole:
            return True
        digest = hashlib.sha256(request_id.encode("utf-8")).hexdigest()
        return int(digest, 16) % self.count == self.index


def recorded_shard(shard: Shard | None) -> str | None:
    """The manifest's ``shard``: ``None`` for the whole plan, which ``--shard 0/1`` plans too.

    Recorded alike, a run started with ``--shard 0/1`` resumes without it and the other way
    round: the two plan the same requests, so nothing tells their run directories apart.
    """
    return None if shard is None or shard.whole else str(shard)


def manifest_shard(value: object) -> str | None:
    """A manifest's ``shard`` (None: the whole plan) as :func:`recorded_shard` writes it now:
    one written before it recorded ``0/1`` as the whole plan holds ``"0/1"``."""
    if not value:
        return None
    text = str(value)
    return None if text == str(Shard(0, 1)) else text


def _shard_field(existing: JSONDict | None, shard: Shard | None) -> object:
    """What ``write_manifest`` records as the shard: an older manifest's ``"0/1"`` stays as it
    is when this run is the whole plan too, so that a resume changing nothing else leaves the
    file untouched (an evaluation's record of its hash stays true)."""
    if existing is not None and manifest_shard(existing.get("shard")) == recorded_shard(shard):
        return existing.get("shard")
    return recorded_shard(shard)


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


def _shown(value: Any) -> str:
    """A config value as a reader writes it: JSON-like, ``unset`` for absent, never a repr."""
    if value is None:
        return "unset"
    if isinstance(value, str):
        return f'"{value}"'
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list) and all(isinstance(v, dict) and "name" in v for v in value):
        return "endpoints " + ", ".join(str(v["name"]) for v in value)
    if isinstance(value, dict | list):
        return canonical_json(value).decode("utf-8")
    return str(value)


def _diff(old: Any, new: Any, path: str, out: list[str]) -> None:
    if isinstance(old, dict) and isinstance(new, dict):
        for key in sorted(set(old) | set(new)):
            _diff(old.get(key), new.get(key), f"{path}.{key}" if path else key, out)
    elif isinstance(old, list) and isinstance(new, list) and len(old) == len(new):
        for i, (a, b) in enumerate(zip(old, new, strict=True)):
            label = (
                a.get("name")
                if isinstance(a, dict)
                and a.get("name") == (b.get("name") if isinstance(b, dict) else None)
                else i
            )
            _diff(a, b, f"{path}[{label}]", out)
    elif old != new:
        out.append(f"{path}: {_shown(old)} -> {_shown(new)}")


def output_config_differences(old: Any, new: Any, *, none: str = "the plan hash") -> str:
    """What differs between two output configs, in one phrase (``none`` if nothing does)."""
    diffs: list[str] = []
    _diff(old, new, "", diffs)
    shown = "; ".join(diffs[:DIFFS_SHOWN])
    if len(diffs) > DIFFS_SHOWN:
        shown += f"; and {len(diffs) - DIFFS_SHOWN} more"
    return shown or none


def config_differences(existing: JSONDict, config: SweepConfig) -> str:
    """What differs between a manifest's output config and ``config``, in one phrase."""
    return output_config_differences(existing.get("output_config"), config.output_config())


def check_run_dir(run_dir: Path) -> None:
    """Refuse, before anything is written, a run directory that cannot hold a run: one under
    a file, a file itself, or whose stream or manifest is a symlink (resuming edits the
    stream in place: it would edit whatever file the link points to)."""
    for parent in [run_dir, *run_dir.parents]:
        if parent.exists() or parent.is_symlink():
            if not parent.is_dir():
                where = "is a file" if parent == run_dir else f"is under {parent}, a file"
                raise UsageError(
                    f"the run directory {where}, not a directory",
                    where=str(run_dir),
                    fix=f"Choose a run directory ({key_or_option('run_dir', 'run_dir')}) that "
                    "is a directory or does not exist yet.",
                    in_run_terms=True,
                )
            break
    for name in (RESULTS_NAME, MANIFEST_NAME):
        path = run_dir / name
        if path.is_symlink():
            raise UsageError(
                f"{name} is a symlink (to {os.readlink(path)}); a run edits its stream and "
                "manifest in place and would edit that file",
                where=str(path),
                fix="Replace the link with a copy of the file, or start a new run directory.",
                in_run_terms=True,
            )
        if path.exists() and not path.is_file():
            raise UsageError(
                f"{name} is not a regular file",
                where=str(path),
                fix="Move it away, or start a new run directory.",
                in_run_terms=True,
            )


def extension_conflict(run_dir: Path, config: SweepConfig, shard: Shard | None) -> str | None:
    """Why ``config`` cannot grow the run in ``run_dir`` (None: its plan extends the stream).

    The new plan extends the run when every request the stream holds is planned again with
    the same cache key (the same messages, model and output parameters) and every problem the
    stream holds is planned again with the same record. Reads the stream and walks the new
    plan once; only a run whose config changed pays for it.
    """
    from runner.engine import iter_plan  # the engine imports this module

    requests: dict[str, str] = {}
    problems: dict[str, bytes] = {}
    for _, record in appendable_records(run_dir / RESULTS_NAME):
        kind = record.get("kind")
        if kind == "response":
            requests[record["request_id"]] = record["cache_key"]
        elif kind == "problem":
            problems[record["problem_id"]] = canonical_json(record)
    if not requests and not problems:
        return None
    task = config.build_task()
    seen_requests = 0
    seen_problems: set[str] = set()
    for ep in config.endpoints:
        for problem, spec in iter_plan(task, ep.identity(), shard):
            pid = problem.problem_id
            if pid in problems and pid not in seen_problems:
                seen_problems.add(pid)
                if canonical_json(problem.to_record()) != problems[pid]:
                    return f"problem {pid} would change"
            stored = requests.get(spec.request_id)
            if stored is None:
                continue
            if stored != spec.cache_key:
                return f"request {spec.request_id} would be sent differently"
            seen_requests += 1
    if seen_requests < len(requests):
        dropped = len(requests) - seen_requests
        if not seen_requests:
            return f"none of the {len(requests):,} requests the stream holds is planned any more"
        return (
            f"{dropped:,} of the {len(requests):,} requests the stream holds are no longer planned"
        )
    missing = set(problems) - seen_problems
    if missing:
        return f"problem {sorted(missing)[0]} is no longer planned"
    return None


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
            in_run_terms=True,
        ) from exc
    if not isinstance(data, dict):
        raise UsageError("manifest is not a JSON object", where=str(path), fix="Restore it.")
    return data


def check_manifest(run_dir: Path, config: SweepConfig, shard: Shard | None) -> JSONDict | None:
    """The existing manifest if it matches ``config``; ``UsageError`` naming what differs.

    Writes nothing.
    """
    check_run_dir(run_dir)
    existing = read_manifest(run_dir)
    if existing is None:
        if (run_dir / RESULTS_NAME).exists():
            raise UsageError(
                "results.jsonl exists but manifest.json does not",
                where=str(run_dir),
                fix="Point run_dir at a fresh directory (the stream's config is unknown). A "
                "`cotaudit merge` into this directory that was cut off is finished by running "
                "the same merge again.",
                in_run_terms=True,
            )
        return None
    where = str(run_dir / MANIFEST_NAME)
    old_shard = manifest_shard(existing.get("shard"))
    if old_shard != recorded_shard(shard):
        before = f"shard {old_shard}" if old_shard else f"{without('shard')} (the whole plan)"
        now = option("shard", str(shard)) if shard else f"{without('shard')} (the whole plan)"
        raise UsageError(
            f"this run directory was run with {before}, this run with {now}",
            where=where,
            fix=f"Resume with the same {option('shard')} as before, or use one run directory "
            "per shard.",
            in_run_terms=True,
        )
    if existing.get("plan_hash") != config.plan_hash():
        conflict = extension_conflict(run_dir, config, shard)
        if conflict is not None:
            raise UsageError(
                "this run directory belongs to another config (it differs in: "
                f"{config_differences(existing, config)}), and {conflict}",
                where=where,
                fix="Start a new run directory "
                f"({key_or_option('run_dir', 'run_dir', sep=', or ', value='DIR')}) for the "
                "changed config: requests already answered are read from the response cache, not "
                "sent again. A config that only adds problems or endpoints grows this one.",
                in_run_terms=True,
            )
    return existing


def _extends(existing: JSONDict | None, config: SweepConfig) -> list[str]:
    """The plan hashes this run directory grew from, oldest first."""
    if existing is None:
        return []
    history = [str(h) for h in existing.get("extends") or []]
    old = existing.get("plan_hash")
    if old is not None and old != config.plan_hash() and old not in history:
        history.append(str(old))
    return history


def planned_requests(
    existing: JSONDict | None, config: SweepConfig, planned: Mapping[str, int] | None
) -> dict[str, int] | None:
    """The manifest's ``planned_requests``: per endpoint, the requests its plan holds (this
    shard's), so that an evaluation can say how much of the plan a stream holds.

    A function of the plan: a manifest of the same plan keeps the value it has, or its
    absence (a manifest written before the field existed does not change on a rerun, so an
    evaluation of it still verifies); a new run or a grown one records ``planned``, counted
    where the run walks its plan anyway: before it starts, for its progress, or else (under
    ``--quiet``) once its dispatchers have walked all of it (:func:`record_planned_requests`).
    """
    if existing is not None and existing.get("plan_hash") == config.plan_hash():
        kept = existing.get("planned_requests")
        return dict(kept) if isinstance(kept, dict) else None
    return dict(planned) if planned is not None else None


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
    planned: Mapping[str, int] | None = None,
) -> JSONDict:
    """Write (atomically) the manifest of ``run_dir``; keeps ``created_at`` of a resumed run.

    A resume that would change nothing but ``updated_at`` (same config, versions and served
    models) leaves the file as it is: ``updated_at`` is when the manifest last changed, and
    an evaluation's record of the manifest's hash stays true (``cotaudit verify``).
    ``served``: what preflight found serving each endpoint (:func:`served_history`).
    ``planned``: the plan's requests per endpoint, where the run counted them
    (:func:`planned_requests`)."""
    now = datetime.now(UTC).isoformat(timespec="seconds")
    manifest: JSONDict = {
        "kind": "manifest",
        "schema": MANIFEST_SCHEMA,
        "plan_hash": config.plan_hash(),
        "output_config": config.output_config(),
        "config": config.to_mapping(),
        "config_source": config.source,
        "shard": _shard_field(existing, shard),
        "versions": _versions(),
        "extends": _extends(existing, config),
        "created_at": (existing or {}).get("created_at", now),
        "updated_at": now,
    }
    counted = planned_requests(existing, config, planned)
    if counted is not None:
        manifest["planned_requests"] = counted
    history = served_history(existing, served, now)
    if history:
        manifest["served"] = history
    data = orjson.dumps(manifest, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS)
    if existing is not None and {**existing, "updated_at": now} == orjson.loads(data):
        return existing
    _replace(run_dir, data)
    return manifest


def record_planned_requests(
    run_dir: Path,
    config: SweepConfig,
    before: JSONDict | None,
    written: JSONDict,
    planned: Mapping[str, int],
) -> JSONDict:
    """Add ``planned`` to the manifest this run wrote (``written``) when the run could count
    its plan only as its dispatchers walked it (``--quiet`` does not count it
    before the sweep, which on a large plan would hold up the start) and they walked all of it.

    Only where :func:`write_manifest` would have recorded it at the start: a new run or a
    grown one (``before``: the manifest as the run found it). A rerun of the same plan keeps
    what its manifest has, so a manifest written before the field existed stays as it is.
    Nothing else changes; the file is replaced atomically."""
    same_plan = before is not None and before.get("plan_hash") == config.plan_hash()
    if same_plan or written.get("planned_requests") is not None:
        return written
    manifest = {
        **written,
        "planned_requests": dict(planned),
        "updated_at": datetime.now(UTC).isoformat(timespec="seconds"),
    }
    _replace(run_dir, orjson.dumps(manifest, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS))
    return manifest


def _replace(run_dir: Path, data: bytes) -> None:
    """Write ``data`` as ``run_dir``'s manifest: a whole new file, or the old one untouched (a
    full disk leaves nothing of the new one behind)."""
    run_dir.mkdir(parents=True, exist_ok=True)
    with replacing(run_dir / MANIFEST_NAME) as out:
        out.write(data)
