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
   none is missing or extra (a verdict that no longer follows from the raw outputs), in the
   order the evaluation writes them (stream order).
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
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
# 1 (no `format` field): until 2026-12; 2: step positions, vanished conclusions, attribution;
# 3: the audited `trace` (answer or reasoning), evaluations sealed by eval/evaluation.json.
CERTIFICATE_FORMAT = 3
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


def _parse_line(raw: bytes) -> JSONDict:
    try:
        value = orjson.loads(raw)
    except orjson.JSONDecodeError:
        value = None
    if not isinstance(value, dict):
        return {"_unreadable": raw.decode("utf-8", "replace")[:80]}
    return value


class CertificateCheck:
    """The stored certificates checked against their recomputation, in step with it.

    ``feed`` takes the recomputed certificates as canonical JSON lines, in the order the
    evaluation wrote them (one problem's block at a time), while the stored file is read in
    step: a block equal byte for byte to the stored lines is verified at once (an untouched
    evaluation costs one read of the file). Where they differ, each stored line is parsed and
    checked on its own (1: its seal; 2: each source hash against the recomputation's, which
    hashed the stream as it is now; 3: its content, field by field), matched to its
    recomputation by id wherever it is in the file; ``finish`` names what was left over
    (certificates the recomputation does not produce, duplicates, missing ones) and whether
    the matched ones are in the evaluation's order: a file reordered (then resealed in the
    manifest) holds every certificate but is not what the evaluation wrote.
    """

    def __init__(self, path: Path, where: str | None = None) -> None:
        self.where = where or str(path)
        self.report = VerifyReport()
        self._path = path
        self._handle = path.open("rb")
        self._line = 0
        self._stored: dict[str, tuple[int, JSONDict]] = {}  # stored, not matched yet
        self._fresh: dict[str, tuple[int, JSONDict]] = {}  # recomputed, not matched yet
        self._fed = 0  # recomputed certificates fed so far: the next one's position - 1
        # (stored line, recomputed position) of each match; a block equal byte for byte is one
        # entry, its first line (its own lines are in order by being equal).
        self._order: list[tuple[int, int]] = []

    def _label(self, line: int, cid: str) -> str:
        return f"{self.where}:{line} certificate {cid}"

    def _next_stored(self) -> tuple[int, bytes] | None:
        while True:
            raw = self._handle.readline()
            if not raw:
                return None
            self._line += 1
            if raw.strip():
                return self._line, raw if raw.endswith(b"\n") else raw + b"\n"

    def feed(self, block: bytes) -> None:
        """Check the stored certificates against one block of recomputed lines."""
        if not block:
            return
        start = self._handle.tell()
        stored = self._handle.read(len(block))
        if stored == block:
            n = block.count(b"\n")
            self._order.append((self._line + 1, self._fed + 1))
            self.report.checked += n
            self._line += n
            self._fed += n
            return
        self._handle.seek(start)
        for fresh in block.splitlines(keepends=True):
            self._fed += 1
            found = self._next_stored()
            if found is not None and found[1] == fresh:
                self._order.append((found[0], self._fed))
                self.report.checked += 1
                continue
            if found is not None:
                self._take_stored(*found)
            self._take_fresh(orjson.loads(fresh), self._fed)

    def _take_stored(self, line: int, raw: bytes) -> None:
        self.report.checked += 1
        cert = _parse_line(raw)
        if "_unreadable" in cert:
            self.report.failures.append(
                f"{self._label(line, f'<line {line}>')}: line is not a JSON object"
            )
            return
        cid = str(cert.get("id", f"<line {line}>"))
        if not seal_holds(cert):
            self.report.failures.append(f"{self._label(line, cid)}: seal does not match")
        fresh = self._fresh.pop(cid, None)
        if fresh is not None:
            self._order.append((line, fresh[0]))
            self._compare(line, cert, fresh[1])
        elif cid in self._stored:
            self.report.failures.append(f"{self._label(line, cid)}: duplicate certificate id")
        else:
            self._stored[cid] = (line, cert)

    def _take_fresh(self, fresh: JSONDict, position: int) -> None:
        cid = str(fresh.get("id"))
        stored = self._stored.pop(cid, None)
        if stored is not None:
            self._order.append((stored[0], position))
            self._compare(stored[0], stored[1], fresh)
        else:
            self._fresh[cid] = (position, fresh)

    def _compare(self, line: int, stored: Mapping[str, Any], fresh: Mapping[str, Any]) -> None:
        if seal_digest(stored) == fresh.get(SEAL_FIELD):
            return  # the same content (however it was written)
        label = self._label(line, str(fresh.get("id")))
        fields = _diff_fields(stored, fresh)
        if "sources" in fields:
            raw_old, raw_new = stored.get("sources"), fresh.get("sources")
            old: Mapping[str, Any] = raw_old if isinstance(raw_old, Mapping) else {}
            new: Mapping[str, Any] = raw_new if isinstance(raw_new, Mapping) else {}
            for rid in sorted(set(old) | set(new)):
                if rid not in new:
                    self.report.failures.append(
                        f"{label}: raw output of {rid} is not in the stream"
                    )
                elif old.get(rid) != new[rid]:
                    self.report.failures.append(
                        f"{label}: raw output of {rid} does not match its hash"
                    )
        other = [f for f in fields if f != "sources"]
        if other:
            self.report.failures.append(f"{label}: recomputation differs in {', '.join(other)}")

    def finish(self) -> VerifyReport:
        """Read the stored certificates left and name everything unmatched."""
        while (found := self._next_stored()) is not None:
            self._take_stored(*found)
        self._handle.close()
        if self._stored:
            repeated = self._repeated_ids(set(self._stored))
            for cid, (line, _) in sorted(self._stored.items(), key=lambda item: item[1][0]):
                what = (
                    "duplicate certificate id"
                    if cid in repeated
                    else "not produced by recomputation from the stream"
                )
                self.report.failures.append(f"{self._label(line, cid)}: {what}")
        for cid in sorted(self._fresh):
            self.report.failures.append(
                f"{self.where}: certificate {cid} is missing (recomputation has it)"
            )
        self._check_order()
        return self.report

    def _check_order(self) -> None:
        # Matched certificates read in file order must come in the evaluation's order; a
        # missing, extra or duplicated one shifts lines but keeps this order.
        self._order.sort()
        for (before, earlier), (line, position) in itertools.pairwise(self._order):
            if position < earlier:
                ids = self._ids_at({line, before})
                self.report.failures.append(
                    f"{self._label(line, ids.get(line, '?'))}: out of order: the evaluation "
                    f"writes it before certificate {ids.get(before, '?')} (line {before}): "
                    "certificates are in stream order (the first such line; there may be more)"
                )
                return

    def _ids_at(self, lines: set[int]) -> dict[int, str]:
        return {
            number: str(cert.get("id", f"<line {number}>"))
            for number, cert in read_certificates(self._path)
            if number in lines
        }

    def _repeated_ids(self, ids: set[str]) -> set[str]:
        # A leftover id that the file holds twice: one copy matched, this one repeats it.
        seen: Counter[str] = Counter()
        for _, cert in read_certificates(self._path):
            cid = cert.get("id")
            if isinstance(cid, str) and cid in ids:
                seen[cid] += 1
        return {cid for cid, n in seen.items() if n > 1}

    def close(self) -> None:
        self._handle.close()


def verify_certificates(
    path: Path, recomputed: Iterable[Mapping[str, Any]], where: str | None = None
) -> VerifyReport:
    """Check the certificates stored in ``path`` against ``recomputed`` (in evaluation order):
    :class:`CertificateCheck` over canonical lines of the recomputed certificates."""
    check = CertificateCheck(path, where)
    try:
        for cert in recomputed:
            check.feed(canonical_json(cert) + b"\n")
        return check.finish()
    finally:
        check.close()
