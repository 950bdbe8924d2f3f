"""What a resuming run learns from an existing stream."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from cotaudit.errors import UsageError
from runner.resume import DigestSet, endpoint_record_key, scan_stream
from tests.stream_records import response_record


def _write(path: Path, records: list[dict[str, object]], tail: bytes = b"") -> None:
    path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in records) + tail)


def _problem(problem_id: str) -> dict[str, object]:
    """A valid problem record (of a task no reader audits)."""
    return {"kind": "problem", "schema": 2, "task": "toy", "problem_id": problem_id}


def _truth(endpoint: str, problem_id: str) -> dict[str, object]:
    return {
        "kind": "truth",
        "schema": 2,
        "endpoint": endpoint,
        "problem_id": problem_id,
        "model": "faithful",
        "answer": True,
        "steps": [],
    }


def _failed(request_id: str, error_type: str) -> dict[str, Any]:
    error = {"type": error_type, "status": 500, "message": "m", "body": None, "attempts": 1}
    return response_record(request_id=request_id, text=None, error=error)


def test_scan_separates_successes_errors_problems_and_extras(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    _write(
        path,
        [
            _problem("p1"),
            _truth("e", "p1"),
            response_record(request_id="e/p1/a"),
            _failed("e/p1/b", "NotFound"),
            _failed("e/p1/c", "ServerError"),
            response_record(request_id="e/p1/c"),  # retried later
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


def _without_text(record: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in record.items() if k != "text"}


@pytest.mark.parametrize(
    ("line", "message"),
    [
        (
            orjson.dumps(_without_text(response_record(request_id="e/p1/b"))),
            ":3: missing field 'text'",
        ),
        (b'{"problem_id": "p2"}', ":3: line is not a record"),
        (b"[1, 2]", ":3: line is not a record"),
        (b'{"kind": "response", "request_id": "e/p1/b"', ":3: line is not valid JSON"),
    ],
    ids=["schema", "no kind", "not an object", "not JSON"],
)
def test_a_bad_complete_line_before_the_last_is_refused_naming_it(
    tmp_path: Path, line: bytes, message: str
) -> None:
    # A resume would append after it, burying it mid-stream where an evaluation refuses it.
    path = tmp_path / "results.jsonl"
    good = [_problem("p1"), response_record(request_id="e/p1/a")]
    path.write_bytes(
        b"".join(orjson.dumps(r) + b"\n" for r in good)
        + line
        + b"\n"
        + orjson.dumps(_problem("p2"))
        + b"\n"
    )
    with pytest.raises(UsageError) as refused:
        scan_stream(path)
    assert f"{path}{message}" in str(refused.value)
    assert "cut results.jsonl just before it" in str(refused.value)
    assert "move results.jsonl aside" in str(refused.value)


def test_a_record_of_a_newer_schema_keeps_the_readers_advice_to_upgrade(tmp_path: Path) -> None:
    path = tmp_path / "results.jsonl"
    newer = {**response_record(request_id="e/p1/a"), "schema": 99}
    path.write_bytes(
        b"".join(orjson.dumps(r) + b"\n" for r in (_problem("p1"), newer, _problem("p2")))
    )
    with pytest.raises(UsageError) as refused:
        scan_stream(path)
    assert "newer than this cotaudit reads" in str(refused.value)
    assert "Upgrade cotaudit to read this stream. Nothing was written." in str(refused.value)


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
            f.write(orjson.dumps(_problem(f"q{i:07d}")) + b"\n")
            record = response_record(request_id=f"ep/q{i:07d}/prompt/-/0")
            f.write(orjson.dumps(record) + b"\n")
    tracemalloc.start()
    try:
        state = scan_stream(path)
        held, _ = tracemalloc.get_traced_memory()  # what the state keeps, numpy's arrays too
    finally:
        tracemalloc.stop()
    assert len(state.succeeded) == len(state.problems) == n
    assert held / n <= 32, f"{held / n:.1f} bytes per request"
