"""``cotaudit merge``: the run directories of every shard of one sharded run as one run
directory of the whole plan (docs/engine.md, "Sharding").

The merged stream is the shards' streams concatenated in shard order (each one's torn last
line, if any, left out), and its manifest :func:`merged_manifest`. Nothing is written before
everything is checked, and the merge holds the locks of the shards and of ``OUT``
(``runner.run_lock``) while it checks and writes.

The stream and the manifest are two files, each replaced whole, the stream first: a merge cut
off between the two (a crash, a full disk) leaves ``OUT`` with the merged stream and no
manifest, which ``cotaudit run`` refuses (the stream's config is unknown). The same merge run
again recognises that stream as its own (byte for byte what it would write) and writes both
again, so the way on after such a crash is to rerun the merge.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import orjson

from cotaudit.errors import UsageError
from cotaudit.output_file import replacing
from cotaudit.schema import MANIFEST_NAME, RESULTS_NAME, JSONDict, numbered_records
from runner.manifest import (
    Shard,
    check_run_dir,
    manifest_shard,
    output_config_differences,
    read_manifest,
)
from runner.run_lock import RunDirBusy, locked_run_dir, run_dir_lock_for_reading


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
    shard_text = manifest_shard(manifest.get("shard"))
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


def _refuse_a_run_in(out_dir: Path, shards: list[tuple[Path, Shard, JSONDict]]) -> None:
    """Refuse a merge into ``out_dir`` if it cannot hold a run or holds one already; a stream
    without a manifest that is byte for byte this merge's (:func:`_merged_bytes`) is this merge
    cut off between its two files, which it writes again."""
    check_run_dir(out_dir)
    stream, manifest = out_dir / RESULTS_NAME, out_dir / MANIFEST_NAME
    if stream.exists() and not manifest.exists() and _holds_merged(stream, shards):
        return
    for path in (stream, manifest):
        if path.exists():
            raise UsageError(
                f"{path.name} exists: the directory holds a run already, which a merge would "
                "replace",
                where=str(path),
                fix="Merge into a new directory, or move that run aside.",
            )


def _complete_lines(stream: Path) -> Iterator[bytes]:
    """A shard's stream, line by line; its torn last line (a shard that crashed mid-write) is
    not part of it."""
    with stream.open("rb") as f:
        for line in f:
            if line.endswith(b"\n"):
                yield line


def _holds_merged(stream: Path, shards: list[tuple[Path, Shard, JSONDict]]) -> bool:
    """Whether ``stream`` is, byte for byte, what merging ``shards`` writes."""
    with stream.open("rb") as merged:
        for run_dir, _, _ in shards:
            for line in _complete_lines(run_dir / RESULTS_NAME):
                if merged.read(len(line)) != line:
                    return False
        return merged.read(1) == b""


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
            differs = output_config_differences(
                first_manifest.get("output_config"), manifest.get("output_config"), none="plan"
            )
            raise UsageError(
                f"the shards are of different runs: {run_dir} was run with another config "
                f"than {first_dir} (it differs in: {differs})",
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
    _refuse_a_run_in(out_dir, ordered)
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
            # Again, under the lock: a run may have written since.
            _refuse_a_run_in(out_dir, ordered)
            records = torn = 0
            stream_path = out_dir / RESULTS_NAME
            tmp = stream_path.with_suffix(".jsonl.tmp")
            try:
                with tmp.open("wb") as out:
                    for run_dir, _, _ in ordered:
                        stream = run_dir / RESULTS_NAME
                        copied = 0
                        for line in _complete_lines(stream):
                            out.write(line)
                            copied += len(line)
                            records += not line.isspace()
                        torn += stream.stat().st_size - copied
                    out.flush()
                    os.fsync(out.fileno())
                merged = merged_manifest([m for _, _, m in ordered])
                with replacing(out_dir / MANIFEST_NAME) as manifest:
                    manifest.write(
                        orjson.dumps(merged, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS)
                    )
                    manifest.flush()
                    os.fsync(manifest.fileno())
                    # Both files are on disk before either is renamed into place, the stream
                    # first (the module's docstring: a merge cut off between the renames).
                    os.replace(tmp, stream_path)
            finally:
                with contextlib.suppress(OSError):
                    tmp.unlink(missing_ok=True)
    return ShardMerge(
        out=out_dir,
        shards=tuple(str(shard) for _, shard, _ in ordered),
        records=records,
        torn_bytes=torn,
    )
