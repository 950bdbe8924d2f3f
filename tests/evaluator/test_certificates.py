"""Certificate sealing and the three verification checks (seal, source hash, recomputation)."""

from __future__ import annotations

from pathlib import Path

from cotaudit.schema import canonical_json, sha256_hex
from evaluator.certificates import (
    certificate_id,
    read_certificates,
    seal,
    seal_digest,
    seal_holds,
    text_hash,
    verify_certificates,
    write_certificates,
)

TEXTS = {"ep/p1/original/-/0": "Step 1: Alex is a bimpus.", "ep/p1/consistent/P1/0": "Step 1: x"}
HASHES = {rid: text_hash(text) for rid, text in TEXTS.items()}


def _cert(step: int = 1, verdict: str = "GROUNDED") -> dict[str, object]:
    return seal(
        {
            "id": certificate_id("ep", "p1", step, "P1"),
            "verdict": verdict,
            "phi": {"original": "is(alex, bimpus)"},
            "sources": {rid: text_hash(t) for rid, t in TEXTS.items()},
        }
    )


def test_seal_is_sha256_of_canonical_json_without_the_seal() -> None:
    cert = _cert()
    body = {k: v for k, v in cert.items() if k != "sha256"}
    assert cert["sha256"] == sha256_hex(canonical_json(body))
    assert seal_holds(cert)
    assert seal_digest(cert) == cert["sha256"]  # the stored seal is ignored when digesting


def test_any_changed_value_breaks_the_seal() -> None:
    cert = _cert()
    assert not seal_holds(dict(cert, verdict="INSENSITIVE"))
    assert not seal_holds(dict(cert, extra=None))


def test_roundtrip_through_file(tmp_path: Path) -> None:
    path = tmp_path / "certificates.jsonl"
    assert write_certificates(path, [_cert(1), _cert(2)]) == 2
    stored = list(read_certificates(path))
    assert [line for line, _ in stored] == [1, 2]
    report = verify_certificates(path, [_cert(1), _cert(2)])
    assert report.ok and report.checked == 2


def test_one_changed_byte_in_a_certificate_file_is_caught(tmp_path: Path) -> None:
    path = tmp_path / "certificates.jsonl"
    write_certificates(path, [_cert(1), _cert(2)])
    data = path.read_bytes()
    path.write_bytes(data.replace(b"GROUNDED", b"GROUNDEE", 1))
    # The recomputation is consumed lazily, as verify streams it.
    report = verify_certificates(path, iter([_cert(1), _cert(2)]))
    assert not report.ok
    assert any("ep/p1/S1/P1" in f and "seal" in f for f in report.failures)
    assert any(
        "ep/p1/S1/P1" in f and "recomputation differs in verdict" in f for f in report.failures
    )
    assert not any("S2" in f for f in report.failures)


def test_the_same_content_written_otherwise_holds(tmp_path: Path) -> None:
    path = tmp_path / "certificates.jsonl"
    write_certificates(path, [_cert(1), _cert(2)])
    lines = path.read_bytes().splitlines(keepends=True)
    path.write_bytes(lines[0].replace(b'"verdict":', b'"verdict": ') + lines[1])
    assert verify_certificates(path, [_cert(1), _cert(2)]).ok


def test_one_changed_byte_in_a_raw_output_is_caught(tmp_path: Path) -> None:
    path = tmp_path / "certificates.jsonl"
    write_certificates(path, [_cert(1)])
    # Recomputed from a stream whose original output changed by one byte.
    fresh = dict(_cert(1))
    fresh["sources"] = dict(
        HASHES, **{"ep/p1/original/-/0": text_hash("Step 1: Alex is a bimpuz.")}
    )
    report = verify_certificates(path, [seal({k: v for k, v in fresh.items() if k != "sha256"})])
    assert [f for f in report.failures if "does not match its hash" in f]
    assert "ep/p1/original/-/0" in report.failures[0]


def test_missing_extra_duplicate_and_unreadable_certificates(tmp_path: Path) -> None:
    path = tmp_path / "certificates.jsonl"
    write_certificates(path, [_cert(1), _cert(1)])
    with path.open("ab") as handle:
        handle.write(b"not json\n")
    report = verify_certificates(path, [_cert(1), _cert(3)])
    text = "\n".join(report.failures)
    assert "duplicate certificate id" in text
    assert "line is not a JSON object" in text
    assert "ep/p1/S3/P1 is missing" in text


def test_a_deleted_certificate_is_named_and_the_rest_still_match(tmp_path: Path) -> None:
    path = tmp_path / "certificates.jsonl"
    write_certificates(path, [_cert(1), _cert(3)])  # S2 deleted from the file
    report = verify_certificates(path, [_cert(1), _cert(2), _cert(3)])
    assert report.failures == [f"{path}: certificate ep/p1/S2/P1 is missing (recomputation has it)"]


def test_source_absent_from_stream_is_named(tmp_path: Path) -> None:
    path = tmp_path / "certificates.jsonl"
    write_certificates(path, [_cert()])
    fresh = {k: v for k, v in _cert().items() if k != "sha256"}
    fresh["sources"] = {"ep/p1/original/-/0": HASHES["ep/p1/original/-/0"]}
    report = verify_certificates(path, [seal(fresh)])
    assert any("is not in the stream" in f for f in report.failures)


def test_a_line_sealed_in_one_pass_is_the_canonical_json_of_the_sealed_certificate() -> None:
    from evaluator.certify import sealed_line

    content = {k: v for k, v in _cert(2).items() if k != "sha256"}
    content.update({"a": 1, "zz": {"sha256": "inner", "b": [1, None]}, "schema": 1})
    line = sealed_line(dict(content))
    assert line == canonical_json(seal(content)) + b"\n"


def test_reordered_certificates_are_named_out_of_order(tmp_path: Path) -> None:
    path = tmp_path / "certificates.jsonl"
    write_certificates(path, [_cert(2), _cert(1), _cert(3)])
    report = verify_certificates(path, [_cert(1), _cert(2), _cert(3)])
    assert report.checked == 3
    assert report.failures == [
        f"{path}:2 certificate ep/p1/S1/P1: out of order: the evaluation writes it before "
        "certificate ep/p1/S2/P1 (line 1): certificates are in stream order (the first such "
        "line; there may be more)"
    ]


def test_a_certificate_moved_to_the_end_is_out_of_order_and_a_missing_one_is_not(
    tmp_path: Path,
) -> None:
    path = tmp_path / "certificates.jsonl"
    write_certificates(path, [_cert(2), _cert(3), _cert(1)])
    report = verify_certificates(path, [_cert(1), _cert(2), _cert(3)])
    assert (
        len(report.failures) == 1
        and ":3 certificate ep/p1/S1/P1: out of order" in report.failures[0]
    )
    write_certificates(path, [_cert(1), _cert(3), _cert(4)])  # S2 missing: the rest move up
    report = verify_certificates(path, [_cert(1), _cert(2), _cert(3), _cert(4)])
    assert report.failures == [f"{path}: certificate ep/p1/S2/P1 is missing (recomputation has it)"]
