"""What a resuming run learns from an existing stream."""

from __future__ import annotations

from pathlib import Path

import orjson

from runner.resume import scan_stream


def _write(path: Path, records: list[dict[str, object]], tail: bytes = b"") -> None:
    path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in records) + tail)


def test_scan_separates_successes_errors_problems_and_extras(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    _write(
        path,
        [
            {"kind": "problem", "problem_id": "p1"},
            {"kind": "truth", "endpoint": "e", "problem_id": "p1"},
            {"kind": "response", "request_id": "e/p1/a", "error": None},
            {"kind": "response", "request_id": "e/p1/b", "error": {"type": "NotFound"}},
            {"kind": "response", "request_id": "e/p1/c", "error": {"type": "ServerError"}},
            {"kind": "response", "request_id": "e/p1/c", "error": None},  # retried later
        ],
        tail=b'{"kind": "response", "request_id": "e/p1/d", "err',
    )
    state = scan_stream(path)
    assert state.succeeded == {"e/p1/a", "e/p1/c"}
    assert state.failed == {"e/p1/b"}
    assert state.problems == {"p1"}
    assert state.endpoint_records == {("truth", "e", "p1")}
    assert state.records == 6


def test_scan_of_a_missing_stream_is_empty(tmp_path: Path) -> None:
    state = scan_stream(tmp_path / "none.jsonl")
    assert state.records == 0 and not state.succeeded
