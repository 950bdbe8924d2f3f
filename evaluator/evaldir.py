"""The evaluation directory (``RUN/eval``) as one atomic unit.

An evaluation is built beside its destination, in a hidden sibling ``.eval.partial-<id>``
(held by an advisory lock on ``.eval.partial-<id>.lock`` while its builder lives). When every
file is written, each is flushed to disk (``fsync``), the manifest ``evaluation.json`` is
written last (the hash and size of every other file, the digest of the stream evaluated,
the options; docs/certificates.md), the directory is flushed, and it takes the destination's
place in one step: on Linux ``renameat2(RENAME_EXCHANGE)`` swaps the two directories
atomically, elsewhere the old one is renamed aside first. The old evaluation is removed only
after the new one is in place. A reader therefore sees the old evaluation or the new one,
never a mix, and never a file cut short.

Whatever stops a build (an error, a full disk, Ctrl-C or SIGTERM) removes the partial
directory; a SIGKILL or a power loss leaves it, and the next evaluation into the same place
recognises it (its lock is free) and removes it before it starts. A full disk is reported
naming the file that did not fit.

A destination that exists must be an evaluation (it holds ``evaluation.json``,
``report.json`` or ``certificates.jsonl``) or empty: an evaluation replaces the whole
directory, so it refuses to replace one that holds anything else (``--out RUN`` would
otherwise take the stream with it).
"""

from __future__ import annotations

import ctypes
import errno
import fcntl
import hashlib
import os
import secrets
import shutil
import sys
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType
from typing import Any, BinaryIO

from cotaudit.caller_terms import option
from cotaudit.errors import UsageError
from cotaudit.output_file import fsync_directory
from cotaudit.schema import canonical_json

EVALUATION_NAME = "evaluation.json"  # the manifest, written last
EVALUATION_KIND = "evaluation"
EVALUATION_FORMAT = 1
EVALUATION_MARKERS = (EVALUATION_NAME, "report.json", "certificates.jsonl")
_PARTIAL = ".partial-"
_DISK_FULL = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)
_RENAME_EXCHANGE = 2  # linux/fs.h


def file_digest(path: Path) -> tuple[str, int]:
    """(SHA-256 hex, size in bytes) of a file."""
    digest = hashlib.sha256()
    size = 0
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
            size += len(block)
    return digest.hexdigest(), size


def _partials(out: Path) -> list[Path]:
    prefix = f".{out.name}{_PARTIAL}"
    if not out.parent.is_dir():
        return []
    return [p for p in out.parent.iterdir() if p.name.startswith(prefix) and p.is_dir()]


def _locked(lock: Path) -> bool:
    """True while the builder that holds ``lock`` is alive."""
    try:
        handle = lock.open("rb")
    except OSError:
        return False  # no lock file: no builder
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return True
    finally:
        handle.close()
    return False


def remove_stale_builds(out: Path) -> list[Path]:
    """Remove the partial evaluations of ``out`` whose builder is gone (killed, power loss);
    return what was removed. Builds in progress (their lock is held) are left alone."""
    removed = []
    for partial in _partials(out):
        lock = partial.with_name(partial.name + ".lock")
        if _locked(lock):
            continue
        shutil.rmtree(partial, ignore_errors=True)
        lock.unlink(missing_ok=True)
        removed.append(partial)
    return removed


def _check_replaceable(out: Path) -> None:
    if not out.exists():
        return
    if not out.is_dir():
        raise UsageError(
            "the output exists and is not a directory",
            where=str(out),
            fix=f"Give {option('out')} a new or empty directory, or an earlier evaluation's.",
        )
    names = sorted(p.name for p in out.iterdir())
    if names and not any(marker in names for marker in EVALUATION_MARKERS):
        shown = ", ".join(names[:3]) + (", ..." if len(names) > 3 else "")
        raise UsageError(
            f"the output directory holds files that are no evaluation ({shown}); an "
            "evaluation replaces the whole directory",
            where=str(out),
            fix=f"Give {option('out')} a new or empty directory, or an earlier evaluation's.",
        )


def _exchange(a: Path, b: Path) -> bool:
    """Swap two directories atomically (Linux ``renameat2``); False where unavailable."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        renameat2 = libc.renameat2
    except (OSError, AttributeError):
        return False
    at_fdcwd = -100
    result = renameat2(
        at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), ctypes.c_uint(_RENAME_EXCHANGE)
    )
    if result == 0:
        return True
    code = ctypes.get_errno()
    if code in (errno.EINVAL, errno.ENOSYS, errno.EPERM, errno.ENOTSUP):
        return False  # the filesystem or kernel cannot exchange: rename aside instead
    raise OSError(code, os.strerror(code), str(a))


class DiskFull(UsageError):
    """The disk filled up while the evaluation was written (the machine, not the input)."""

    exit_code = 1


class EvalBuild:
    """An evaluation being written beside ``out``; ``commit`` puts it in place.

    Use as a context manager: leaving it without ``commit`` (an exception, a signal turned
    into one) removes everything it wrote. ``path(name)`` is where a file of the evaluation
    is written. The advice names ``out`` as the caller does (``--out``, the Python API's
    ``out=``: ``cotaudit.caller_terms``).
    """

    def __init__(self, out: Path) -> None:
        out = Path(out)
        if out.is_symlink():
            out = out.resolve()
        self.out = out.absolute()
        self.out.parent.mkdir(parents=True, exist_ok=True)
        _check_replaceable(self.out)
        remove_stale_builds(self.out)
        token = f"{os.getpid()}-{secrets.token_hex(4)}"
        self.dir = self.out.with_name(f".{self.out.name}{_PARTIAL}{token}")
        self._lock_path = self.dir.with_name(self.dir.name + ".lock")
        self._lock: BinaryIO | None = self._lock_path.open("wb")
        fcntl.flock(self._lock, fcntl.LOCK_EX)
        self.dir.mkdir()
        self.committed = False
        self._known: dict[str, dict[str, Any]] = {}

    def path(self, name: str) -> Path:
        return self.dir / name

    def __enter__(self) -> EvalBuild:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        # Named before the partial directory goes: the file being filled is its newest.
        full = None
        if isinstance(error, OSError) and error.errno in _DISK_FULL:
            full = self._disk_full(error)
        if not self.committed:
            shutil.rmtree(self.dir, ignore_errors=True)
        self._release()
        if full is not None:
            raise full from error

    def _release(self) -> None:
        if self._lock is not None:
            self._lock.close()
            self._lock = None
            self._lock_path.unlink(missing_ok=True)

    def _disk_full(self, error: OSError, name: str | None = None) -> DiskFull:
        if name is None and error.filename:
            name = Path(str(error.filename)).name
        if name is None:
            name = self._newest_file() or "?"
        return DiskFull(
            f"the disk is full, or a size limit reached, while writing {name} of the "
            f"evaluation ({error.strerror})",
            where=str(self.out / name),
            fix=f"Free space there (or give {option('out')} another disk) and evaluate again; the "
            "previous evaluation, if any, is unchanged and nothing half-written was left.",
        )

    def _newest_file(self) -> str | None:
        # The file a writer was filling when the disk filled up is the last one it touched.
        try:
            files = [p for p in self.dir.iterdir() if p.is_file()]
        except OSError:
            return None
        if not files:
            return None
        return max(files, key=lambda p: p.stat().st_mtime_ns).name

    def known(self, name: str, sha256: str, size: int) -> None:
        """The digest of a file hashed while it was written (saves reading it back)."""
        self._known[name] = {"sha256": sha256, "bytes": size}

    def files(self) -> dict[str, dict[str, Any]]:
        """Name -> {sha256, bytes} of every file written so far, flushed to disk."""
        out: dict[str, dict[str, Any]] = {}
        for path in sorted(self.dir.iterdir()):
            if not path.is_file() or path.name == EVALUATION_NAME:
                continue
            try:
                with path.open("rb") as handle:
                    os.fsync(handle.fileno())
            except OSError as exc:
                if exc.errno in _DISK_FULL:
                    raise self._disk_full(exc, path.name) from exc
                raise
            known = self._known.get(path.name)
            if known is not None and known["bytes"] == path.stat().st_size:
                out[path.name] = dict(known)
                continue
            digest, size = file_digest(path)
            out[path.name] = {"sha256": digest, "bytes": size}
        return out

    def commit(self, manifest: Mapping[str, Any]) -> str:
        """Write the manifest (with the hashes of every file), flush, and put the evaluation
        in place of ``out``. Returns the evaluation's root hash (of the manifest's bytes)."""
        body = dict(manifest)
        body["files"] = self.files()
        data = canonical_json(body) + b"\n"
        target = self.path(EVALUATION_NAME)
        try:
            with target.open("wb") as handle:
                handle.write(data)
                handle.flush()
                os.fsync(handle.fileno())
            fsync_directory(self.dir)
        except OSError as exc:
            if exc.errno in _DISK_FULL:
                raise self._disk_full(exc, EVALUATION_NAME) from exc
            raise
        if self.out.exists():
            if not _exchange(self.dir, self.out):
                aside = self.dir.with_name(self.dir.name + "-old")
                os.rename(self.out, aside)
                os.rename(self.dir, self.out)
                os.rename(aside, self.dir)  # so that it is removed below, under the lock
        else:
            os.rename(self.dir, self.out)
        self.committed = True
        fsync_directory(self.out.parent)
        shutil.rmtree(self.dir, ignore_errors=True)  # the previous evaluation, if any
        self._release()
        return hashlib.sha256(data).hexdigest()
