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
merge into one run directory of the whole plan (:func:`merge_shards`).

Nothing here writes before it has checked: symlinked stream or manifest files and a run
directory under a file are refused before the stream is touched.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import os
import platform
from collections.abc import Iterator, Mapping
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
from cotaudit.schema import MANIFEST_NAME, RESULTS_NAME, JSONDict, canonical_json, numbered_records
from runner.config import SweepConfig
from runner.resume import appendable_records
from runner.run_lock import RunDirBusy, locked_run_dir, run_dir_lock_for_reading

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


def _recorded_as(value: object) -> str | None:
    """A manifest's ``shard`` as :func:`recorded_shard` writes it now: one written before it
    recorded ``0/1`` as the whole plan holds ``"0/1"``."""
    if not value:
        return None
    text = str(value)
    return None if text == str(Shard(0, 1)) else text


def _shard_field(existing: JSONDict | None, shard: Shard | None) -> object:
    """What ``write_manifest`` records as the shard: an older manifest's ``"0/1"`` stays as it
    is when this run is the whole plan too, so that a resume changing nothing else leaves the
    file untouched (an evaluation's record of its hash stays true)."""
    if existing is not None and _recorded_as(existing.get("shard")) == recorded_shard(shard):
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


def config_differences(existing: JSONDict, config: SweepConfig) -> str:
    """What differs between a manifest's output config and ``config``, in one phrase."""
    diffs: list[str] = []
    _diff(existing.get("output_config"), config.output_config(), "", diffs)
    shown = "; ".join(diffs[:DIFFS_SHOWN])
    if len(diffs) > DIFFS_SHOWN:
        shown += f"; and {len(diffs) - DIFFS_SHOWN} more"
    return shown or "the plan hash"


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
                fix="Point run_dir at a fresh directory (the stream's config is unknown).",
                in_run_terms=True,
            )
        return None
    where = str(run_dir / MANIFEST_NAME)
    old_shard = _recorded_as(existing.get("shard"))
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


@dataclass(frozen=True, slots=True)
class ShardMerge:
    """What :func:`merge_shards` wrote."""

    out: Path  # the merged run directory
    shards: tuple[str, ...]  # "i/N" of each shard merged, in the order of the merged stream
    records: int  # complete lines of the merged stream
    torn_bytes: int  # bytes of the shards' torn last lines, left out


def _shard_run(run_dir: Path) -> tuple[Shard, JSONDict]:
    """The shard and manifest of one shard's run directory; ``UsageError`` for anything else."""
    check_run_dir(run_dir)
    manifest = read_manifest(run_dir)
    if manifest is None or "plan_hash" not in manifest:
        raise UsageError(
            "not the run directory of a `cotaudit run --shard i/N` (it has no run manifest)",
            where=str(run_dir),
            fix="Give the run directories the shards were run into (their --run-dir).",
        )
    shard_text = _recorded_as(manifest.get("shard"))
    if shard_text is None:
        raise UsageError(
            "this run is the whole plan (it was run without --shard): there is nothing to "
            "merge it with",
            where=str(run_dir / MANIFEST_NAME),
            fix="Evaluate it as it is, or give only the run directories of --shard runs.",
        )
    if not (run_dir / RESULTS_NAME).is_file():
        raise UsageError(
            "the shard's run directory has no results.jsonl",
            where=str(run_dir),
            fix="Run the shard (`cotaudit run CONFIG --shard i/N --run-dir DIR`), then merge.",
        )
    return Shard.parse(shard_text), manifest


def _merged_served(manifests: list[JSONDict]) -> dict[str, list[JSONDict]]:
    """Every shard's ``served`` history per endpoint, by date, an entry that only repeats the
    one before it dropped (shards run apart, so each checked the server itself)."""
    entries: dict[str, list[JSONDict]] = {}
    for manifest in manifests:
        for name, found in (manifest.get("served") or {}).items():
            entries.setdefault(str(name), []).extend(found)
    merged: dict[str, list[JSONDict]] = {}
    for name, found in entries.items():
        kept = merged[name] = []
        for entry in sorted(found, key=lambda e: str(e.get("checked_at"))):
            bare = {k: v for k, v in entry.items() if k != "checked_at"}
            if not kept or {k: v for k, v in kept[-1].items() if k != "checked_at"} != bare:
                kept.append(entry)
    return merged


def merged_manifest(manifests: list[JSONDict]) -> JSONDict:
    """The manifest of the whole plan that the shards' manifests (all of one run, every shard
    once, in shard order) make together: the first one's, with no shard, the shards' planned
    requests added up (absent when a shard did not count its plan), their ``served`` histories
    joined, the earliest ``created_at``."""
    first = manifests[0]
    merged: JSONDict = {
        **first,
        "shard": None,
        "created_at": min(str(m.get("created_at", "")) for m in manifests),
        "updated_at": datetime.now(UTC).isoformat(timespec="seconds"),
    }
    merged.pop("planned_requests", None)
    counts = [m.get("planned_requests") for m in manifests]
    if all(isinstance(c, dict) for c in counts):
        total: dict[str, int] = {}
        for count in counts:
            assert isinstance(count, dict)
            for name, n in count.items():
                total[str(name)] = total.get(str(name), 0) + int(n)
        merged["planned_requests"] = total
    served = _merged_served(manifests)
    merged.pop("served", None)
    if served:
        merged["served"] = served
    return merged


def _refuse_a_run_in(out_dir: Path) -> None:
    """Refuse a merge into ``out_dir`` if it cannot hold a run or holds one already."""
    check_run_dir(out_dir)
    for name in (RESULTS_NAME, MANIFEST_NAME):
        if (out_dir / name).exists():
            raise UsageError(
                f"{name} exists: the directory holds a run already, which a merge would replace",
                where=str(out_dir / name),
                fix="Merge into a new directory, or move that run aside.",
            )


@contextlib.contextmanager
def _merging_into(out_dir: Path) -> Iterator[None]:
    """Hold ``out_dir``'s run lock (``runner.run_lock``), made if missing, while the merge
    checks it again and writes: a ``cotaudit run --run-dir OUT_DIR`` or a second merge started
    meanwhile would otherwise write its stream and manifest in among this one's, or over them.
    The lock held by another is a ``UsageError``; a directory this merge made is removed again
    if it writes nothing into it."""
    with contextlib.ExitStack() as stack:
        try:
            stack.enter_context(locked_run_dir(out_dir))
        except UsageError as exc:
            raise UsageError(
                exc.what,
                where=exc.where,
                fix="Merge into a new directory: this one is being written (by a run, or "
                "another merge), and a merge writes only into a directory that holds no run.",
            ) from None
        yield


def _ordered_shards(shard_dirs: list[Path]) -> list[tuple[Path, Shard, JSONDict]]:
    """The shards' run directories, shards and manifests in shard order; ``UsageError`` unless
    they are the shards ``0/N`` .. ``N-1/N`` of one plan, each once."""
    runs = [(Path(d), *_shard_run(Path(d))) for d in shard_dirs]
    first_dir, first_shard, first_manifest = runs[0]
    by_index: dict[int, tuple[Path, JSONDict]] = {}
    for run_dir, shard, manifest in runs:
        if manifest.get("plan_hash") != first_manifest.get("plan_hash"):
            diffs: list[str] = []
            _diff(first_manifest.get("output_config"), manifest.get("output_config"), "", diffs)
            raise UsageError(
                f"the shards are of different runs: {run_dir} was run with another config "
                f"than {first_dir} (it differs in: {'; '.join(diffs[:DIFFS_SHOWN]) or 'plan'})",
                where=str(run_dir / MANIFEST_NAME),
                fix="Give the shard run directories of one config only.",
            )
        if shard.count != first_shard.count:
            raise UsageError(
                f"{run_dir} is shard {shard}, {first_dir} shard {first_shard}: shards of one "
                "merge split the plan the same way",
                where=str(run_dir / MANIFEST_NAME),
                fix="Give the shards of one --shard i/N split (the same N).",
            )
        if shard.index in by_index:
            raise UsageError(
                f"shard {shard} is given twice ({by_index[shard.index][0]} and {run_dir}): its "
                "records would be in the merged stream twice",
                where=str(run_dir),
                fix="Give each shard's run directory once.",
            )
        by_index[shard.index] = (run_dir, manifest)
    missing = [f"{i}/{first_shard.count}" for i in range(first_shard.count) if i not in by_index]
    if missing:
        raise UsageError(
            f"{'shard' if len(missing) == 1 else 'shards'} {', '.join(missing)} "
            f"{'is' if len(missing) == 1 else 'are'} missing: the merged run would not be the "
            f"whole plan but {len(by_index)} of its {first_shard.count} shards",
            where=", ".join(str(d) for d in shard_dirs),
            fix=f"Give every shard's run directory; run a missing one first (`cotaudit run "
            f"CONFIG --shard {missing[0]} --run-dir DIR`).",
        )
    return [
        (by_index[i][0], Shard(i, first_shard.count), by_index[i][1])
        for i in range(first_shard.count)
    ]


@contextlib.contextmanager
def _reading_shards(shards: list[tuple[Path, Shard, JSONDict]]) -> Iterator[None]:
    """Hold every shard's run lock (``runner.run_lock.run_dir_lock_for_reading``) while the
    merge checks and copies the shards' streams: a shard that its ``cotaudit run --shard`` is
    still writing would gain lines between the check and the copy (copied unchecked), and the
    merged run would lack what it writes after. A shard whose lock is held is refused, naming
    its pid; a ``cotaudit run`` into a shard started meanwhile is refused, naming the merge's.
    Taken before ``OUT``'s lock, so a refused merge has not touched ``OUT``."""
    with contextlib.ExitStack() as stack:
        for run_dir, shard, _ in shards:
            try:
                stack.enter_context(run_dir_lock_for_reading(run_dir))
            except RunDirBusy as exc:
                raise UsageError(
                    f"shard {shard} is being written: another cotaudit process holds its run "
                    f"directory's lock (pid {exc.holder}), its `cotaudit run --shard {shard}` "
                    "or another merge reading it",
                    where=str(run_dir),
                    fix="Wait for that run to finish, or stop it (Ctrl-C), then rerun the "
                    "merge: merged now, the merged run would lack what the shard writes after. "
                    "Nothing was written.",
                ) from None
            except UsageError as exc:
                raise UsageError(exc.what, where=exc.where, fix="Rerun the merge.") from None
        yield


def merge_shards(out_dir: Path, shard_dirs: list[Path]) -> ShardMerge:
    """Merge the run directories of every shard of one run into ``out_dir``, a run directory
    of the whole plan: its stream is the shards' streams concatenated in shard order (each
    one's torn last line, if any, left out), its manifest :func:`merged_manifest`.

    Refused (``UsageError``, nothing written) unless the directories are the shards
    ``0/N`` .. ``N-1/N`` of one plan, each once, none of them being written, and ``out_dir``
    holds no run yet, nor is being written: the merge holds every shard's run lock while it
    checks and copies them (:func:`_reading_shards`), and ``out_dir``'s while it writes, as
    ``cotaudit run`` does. The merged directory is evaluated, verified and viewed as a run of
    the whole plan, and resumed as one by ``cotaudit run CONFIG --run-dir OUT_DIR``.
    """
    if not shard_dirs:
        raise UsageError(
            "no shard run directories to merge", where="merge", fix="Give every shard's."
        )
    # Checked before a lock file is made in any of them: only in a shard's run directory.
    ordered = _ordered_shards([Path(d) for d in shard_dirs])
    _refuse_a_run_in(out_dir)
    with _reading_shards(ordered):
        # Again, under the shards' locks: a shard's run may have ended (and rewritten its
        # manifest) since. From here to the end of the copy no run writes to a shard.
        ordered = _ordered_shards([d for d, _, _ in ordered])
        for run_dir, _, _ in ordered:
            # Checked before anything is written: a damaged shard named by its own file and
            # line, not by a line of the merged stream.
            stream = run_dir / RESULTS_NAME
            with stream.open("rb") as f:
                for _ in numbered_records(f, where=str(stream), require_kind=True, validate=True):
                    pass
        with _merging_into(out_dir):
            _refuse_a_run_in(out_dir)  # again, under the lock: a run may have written since
            path = out_dir / RESULTS_NAME
            tmp = path.with_suffix(".jsonl.tmp")
            records = torn = 0
            try:
                with tmp.open("wb") as out:
                    for run_dir, _, _ in ordered:
                        with (run_dir / RESULTS_NAME).open("rb") as f:
                            for line in f:
                                if not line.endswith(b"\n"):
                                    # A shard that crashed mid-write (or, where its lock could
                                    # not be taken, one still writing).
                                    torn += len(line)
                                    break
                                out.write(line)
                                records += not line.isspace()
                    out.flush()
                    os.fsync(out.fileno())
                os.replace(tmp, path)
            except OSError:
                with contextlib.suppress(OSError):
                    tmp.unlink(missing_ok=True)
                raise
            manifest = merged_manifest([m for _, _, m in ordered])
            data = orjson.dumps(manifest, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS)
            _replace(out_dir, data)
    return ShardMerge(
        out=out_dir,
        shards=tuple(str(shard) for _, shard, _ in ordered),
        records=records,
        torn_bytes=torn,
    )
