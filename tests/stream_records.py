"""Complete stream records for tests that care about a few fields only.

The evaluator validates every record it reads (``cotaudit.schema``), so a test's hand-made
record carries every field a real one does; these fill in the rest with plain values.
"""

from __future__ import annotations

from typing import Any


def response_record(**fields: Any) -> dict[str, Any]:
    """A successful ``response`` record with ``fields`` set (request id made from them)."""
    endpoint = fields.get("endpoint", "ep")
    problem_id = fields.get("problem_id", "p1")
    condition = fields.get("condition", "original")
    premise = fields.get("target_premise")
    index = fields.get("sample_index", 0)
    record: dict[str, Any] = {
        "kind": "response",
        "schema": 1,
        "request_id": f"{endpoint}/{problem_id}/{condition}/{premise or '-'}/{index}",
        "cache_key": "0" * 64,
        "endpoint": endpoint,
        "task": "prontoqa",
        "problem_id": problem_id,
        "condition": condition,
        "target_premise": premise,
        "sample_index": index,
        "probe": None,
        "messages": [{"role": "user", "content": "prompt"}],
        "params": {"temperature": 0.0},
        "model": {"provider": "local", "model": "faithful", "host": "127.0.0.1:1"},
        "text": "t",
        "finish_reason": "stop",
        "usage": None,
        "latency_s": 0.0,
        "attempts": 1,
        "attempt_outcomes": ["ok"],
        "cached": False,
        "started_at": "2026-12-01T10:00:00.000Z",
        "finished_at": "2026-12-01T10:00:00.000Z",
        "error": None,
    }
    record.update(fields)
    return record
