"""What a resuming run learns from an existing stream."""

from __future__ import annotations

from pathlib import Path

import orjson

from runner.resume import DigestSet, endpoint_record_key, scan_stream


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
    ids = ["e/p1/a", "e/p1/b", "e/p1/c", "e/p1/d"]
    assert [i in state.succeeded for i in ids] == [True, False, True, False]
    assert [i in state.failed for i in ids] == [False, True, False, False]
    assert len(state.succeeded) == 2 and len(state.failed) == 1
    assert "p1" in state.problems and "p2" not in state.problems
    assert endpoint_record_key("truth", "e", "p1") in state.endpoint_records
    assert endpoint_record_key("truth", "f", "p1") not in state.endpoint_records
    assert state.records == 6


def test_scan_of_a_missing_stream_is_empty(tmp_path: Path) -> None:
    state = scan_stream(tmp_path / "none.jsonl")
    assert state.records == 0 and not state.succeeded


def test_a_digest_set_grows_merges_and_answers_membership() -> None:
    ids = [f"ep/q{i:07d}/prompt/-/0" for i in range(3 * 65_536 + 17)]  # three merges and more
    grown = DigestSet()
    added = [grown.add(rid) for rid in ids[::2]]
    assert all(added)
    assert grown.add(ids[0]) is False  # already there: no duplicate
    assert grown.add(ids[::2][-1]) is False  # already there, in the part not merged yet
    assert len(grown) == len(ids[::2])
    assert all(rid in grown for rid in ids[::2])
    assert not any(rid in grown for rid in ids[1::2])
    built = DigestSet.of(ids)
    assert len(built.without(grown)) == len(ids[1::2])
    assert 1 not in grown  # not a string: not a member


def test_the_resume_state_takes_at_most_32_bytes_per_request(tmp_path: Path) -> None:
    import tracemalloc

    n = 40_000
    path = tmp_path / "r.jsonl"
    with path.open("wb") as f:
        for i in range(n):
            f.write(orjson.dumps({"kind": "problem", "problem_id": f"q{i:07d}"}) + b"\n")
            record = {"kind": "response", "request_id": f"ep/q{i:07d}/prompt/-/0", "error": None}
            f.write(orjson.dumps(record) + b"\n")
    tracemalloc.start()
    try:
        state = scan_stream(path)
        held, _ = tracemalloc.get_traced_memory()  # what the state keeps, numpy's arrays too
    finally:
        tracemalloc.stop()
    assert len(state.succeeded) == len(state.problems) == n
    assert held / n <= 32, f"{held / n:.1f} bytes per request"
