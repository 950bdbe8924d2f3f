"""Certificates: one sealed record per (problem, CoT step, premise), and their verification.

A certificate holds everything a reader needs to re-check one verdict by hand: the ids, the
aligned proof step, every ``phi`` and delta, parse flags, the alignment rules, both verdicts
and their rules, the citation evidence, non-assertion categories, and the SHA-256 of each raw
output it was computed from (``sources``: request id -> text hash). ``sha256`` seals it: the
SHA-256 of ``runner.request_spec.canonical_json`` of the certificate without that field.

Verification (``cotaudit verify``) has three independent checks, so that one changed byte is
caught wherever it is:

1. every stored certificate's seal holds (a byte changed in ``certificates.jsonl``);
2. every source hash equals the hash of that request's text in the stream (a byte changed in
   a raw output);
3. the certificates recomputed from the stream equal the stored ones, field for field, and
   none is missing or extra (a verdict that no longer follows from the raw outputs).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from cotaudit.errors import UsageError
from cotaudit.schema import JSONDict, canonical_json, sha256_hex

CERTIFICATE_KIND = "certificate"
SEAL_FIELD = "sha256"
# The certificate format (docs/certificates.md): raised whenever a field is added, renamed or
# decided differently, so that `verify` can tell an older evaluation from a tampered one.
# 1 (no `format` field): until 2026-12; 2: step positions, vanished conclusions, attribution.
CERTIFICATE_FORMAT = 2
FORMAT_FIELD = "format"


def certificate_id(
    endpoint: str, problem_id: str, cot_step: int, premise_id: str, occurrence: int = 1
) -> str:
    """Stable id of a certificate within a run: ``ENDPOINT/PROBLEM/S<cot step>/P<j>``.

    ``occurrence`` > 1 for a step number the original output writes again (a restarted
    chain): ``S1.2`` is the second step written as ``Step 1``.
    """
    step = f"S{cot_step}" if occurrence == 1 else f"S{cot_step}.{occurrence}"
    return f"{endpoint}/{problem_id}/{step}/{premise_id}"


def text_hash(text: str | None) -> str | None:
    """SHA-256 of a raw output as UTF-8 (``None`` for a request that has no text)."""
    return None if text is None else sha256_hex(text)


def seal_digest(content: Mapping[str, Any]) -> str:
    """The seal of a certificate: SHA-256 of its canonical JSON without the seal field."""
    body = {k: v for k, v in content.items() if k != SEAL_FIELD}
    return sha256_hex(canonical_json(body))


def seal(content: Mapping[str, Any]) -> JSONDict:
    """A copy of ``content`` with its ``sha256`` seal set."""
    sealed = dict(content)
    sealed[SEAL_FIELD] = seal_digest(content)
    return sealed


def seal_holds(certificate: Mapping[str, Any]) -> bool:
    """True when the certificate's stored seal equals the recomputed one."""
    return certificate.get(SEAL_FIELD) == seal_digest(certificate)


def write_certificates(path: Path, certificates: Iterable[Mapping[str, Any]]) -> int:
    """Write certificates as JSONL (canonical key order); return how many were written."""
    n = 0
    with path.open("wb") as handle:
        for cert in certificates:
            handle.write(canonical_json(cert) + b"\n")
            n += 1
    return n


def read_certificates(path: Path) -> Iterator[tuple[int, JSONDict]]:
    """Yield (line number, certificate); a line that is not a JSON object is a ``UsageError``."""
    if not path.is_file():
        raise UsageError(
            "no certificates.jsonl",
            where=str(path),
            fix="Run `cotaudit evaluate RUN_DIR` first.",
        )
    with path.open("rb") as handle:
        for number, raw in enumerate(handle, start=1):
            if not raw.strip():
                continue
            try:
                value = orjson.loads(raw)
            except orjson.JSONDecodeError:
                value = None
            if not isinstance(value, dict):
                yield number, {"_unreadable": raw.decode("utf-8", "replace")[:80]}
                continue
            yield number, value


def stored_format(path: Path) -> int | None:
    """The format of the first certificate in ``path`` (1 when it has no ``format`` field);
    None when the file holds no readable certificate."""
    for _, cert in read_certificates(path):
        if "_unreadable" in cert:
            continue
        value = cert.get(FORMAT_FIELD, 1)
        return value if isinstance(value, int) else -1
    return None


def require_current_format(path: Path) -> None:
    """Refuse certificates of another format with a clear message (a ``UsageError``)."""
    found = stored_format(path)
    if found is None or found == CERTIFICATE_FORMAT:
        return
    raise UsageError(
        f"certificates of format {found}; this cotaudit writes and verifies format "
        f"{CERTIFICATE_FORMAT} (docs/certificates.md, 'Formats')",
        where=str(path),
        fix="Re-evaluate the run with `cotaudit evaluate RUN_DIR` (the raw outputs are "
        "unchanged), then run `cotaudit verify RUN_DIR` again.",
    )


@dataclass(slots=True)
class VerifyReport:
    """Outcome of a verification: every failure names its certificate and what differs."""

    checked: int = 0
    failures: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.failures


def _diff_fields(stored: Mapping[str, Any], fresh: Mapping[str, Any]) -> list[str]:
    keys = sorted(set(stored) | set(fresh))
    return [k for k in keys if k != SEAL_FIELD and stored.get(k) != fresh.get(k)]


def _check_stored(
    stored: Iterable[tuple[int, Mapping[str, Any]]],
    source_hashes: Mapping[str, str | None],
    report: VerifyReport,
    where: str,
) -> dict[str, tuple[int, str | None]]:
    """Checks 1 and 2 over the stored certificates; returns id -> (line, content digest)."""
    index: dict[str, tuple[int, str | None]] = {}
    for line, cert in stored:
        report.checked += 1
        cid = str(cert.get("id", f"<line {line}>"))
        label = f"{where}:{line} certificate {cid}"
        if "_unreadable" in cert:
            report.failures.append(f"{label}: line is not a JSON object")
            continue
        if cid in index:
            report.failures.append(f"{label}: duplicate certificate id")
        digest = seal_digest(cert)  # of the content as stored, whatever its seal says
        index[cid] = (line, digest)
        if cert.get(SEAL_FIELD) != digest:
            report.failures.append(f"{label}: seal (sha256) does not match its content")
        sources = cert.get("sources") or {}
        if isinstance(sources, dict):
            for request_id, digest in sorted(sources.items()):
                if request_id not in source_hashes:
                    report.failures.append(f"{label}: source {request_id} is not in the stream")
                elif source_hashes[request_id] != digest:
                    report.failures.append(
                        f"{label}: raw output of {request_id} does not match its hash"
                    )
    return index


def verify_certificates(
    stored: Iterable[tuple[int, Mapping[str, Any]]],
    recomputed: Iterable[Mapping[str, Any]],
    source_hashes: Mapping[str, str | None],
    *,
    where: str = "certificates.jsonl",
    reread: Callable[[], Iterable[tuple[int, Mapping[str, Any]]]] | None = None,
) -> VerifyReport:
    """Check stored certificates against their seals, the stream and a recomputation.

    ``source_hashes`` maps request id -> :func:`text_hash` of its raw text as found in the
    stream (last record wins). Memory stays small for large runs: the stored certificates
    are kept as (line, digest of their content) only, ``recomputed`` is consumed lazily and
    compared by digest (equal digests mean equal content), and only the recomputed certificates
    that differ are kept to name the differing fields - from ``reread()`` (a second pass over
    the stored certificates) when given, else from ``stored`` if it is a sequence.
    """
    report = VerifyReport()
    if reread is None and isinstance(stored, Sequence):
        kept = stored
        reread = lambda: kept  # noqa: E731  (a sequence can be read again as is)
    index = _check_stored(stored, source_hashes, report, where)
    seen: set[str] = set()
    differing: dict[str, Mapping[str, Any]] = {}
    missing: list[str] = []
    for fresh in recomputed:
        cid = str(fresh.get("id"))
        entry = index.get(cid)
        if entry is None:
            missing.append(cid)
            continue
        seen.add(cid)
        if fresh.get(SEAL_FIELD) != seal_digest(fresh) or fresh.get(SEAL_FIELD) != entry[1]:
            differing[cid] = fresh
    if differing:
        found: dict[str, tuple[int, Mapping[str, Any]]] = {}
        for line, cert in reread() if reread is not None else ():
            cid = str(cert.get("id"))
            if cid in differing and cid not in found:
                found[cid] = (line, cert)
        for cid, fresh in differing.items():
            line, cert = found.get(cid, (index[cid][0], {}))
            fields = _diff_fields(cert, fresh) if cert else []
            label = f"{where}:{line} certificate {cid}"
            if fields:
                report.failures.append(f"{label}: recomputation differs in {', '.join(fields)}")
            elif not cert:
                report.failures.append(f"{label}: recomputation differs")
    for cid in sorted(set(index) - seen):
        line = index[cid][0]
        report.failures.append(
            f"{where}:{line} certificate {cid}: not produced by recomputation from the stream"
        )
    for cid in sorted(missing):
        report.failures.append(f"{where}: certificate {cid} is missing (recomputation has it)")
    return report
