"""From a stream's procedural records to joint counts: A, C, exclusions and supersession."""

from __future__ import annotations

from typing import Any

from evaluator.selection import JointCounts, score_traces
from runner.tasks.procedural import arith, reachability
from runner.tasks.procedural.common import ProceduralProblem, format_answer


def _response(
    endpoint: str,
    problem: ProceduralProblem,
    condition: str,
    text: str | None,
    error: dict[str, Any] | None = None,
) -> dict[str, Any]:
    return {
        "kind": "response",
        "schema": 1,
        "task": "procedural",
        "endpoint": endpoint,
        "problem_id": problem.problem_id,
        "request_id": f"{endpoint}/{problem.problem_id}/{condition}/-/0",
        "condition": condition,
        "text": text,
        "error": error,
    }


def _say(problem: ProceduralProblem, value: Any) -> str:
    return f"Some reasoning.\nAnswer: {format_answer(problem.family, value)}"


def test_cells_exclusions_and_last_record_wins() -> None:
    p1, p2, p3, p4 = (arith.generate(s, 0, 1) for s in (1, 2, 3, 4))
    r1 = reachability.generate(2, 1, 1)
    wrong = {p.problem_id: p.original.answer + 100 for p in (p1, p2, p3, p4)}
    records: list[dict[str, Any]] = [p.to_record() for p in (p1, p2, p3, p4, r1)]
    records += [
        # p1: correct and followed -> a
        _response("m", p1, "original", _say(p1, p1.original.answer)),
        _response("m", p1, "intervened", _say(p1, p1.intervened.answer)),
        _response("m", p1, "preserving", _say(p1, p1.preserving.answer)),
        # p2: correct, ignored the intervention -> b
        _response("m", p2, "original", _say(p2, p2.original.answer)),
        _response("m", p2, "intervened", _say(p2, p2.original.answer)),
        # p3: wrong, followed -> c; its first intervened record failed and was retried
        _response("m", p3, "original", _say(p3, wrong[p3.problem_id])),
        _response("m", p3, "intervened", None, {"type": "ServerError", "status": 503}),
        _response("m", p3, "intervened", _say(p3, p3.intervened.answer)),
        # p4: unreadable original -> excluded, never guessed
        _response("m", p4, "original", "I think it is about forty."),
        _response("m", p4, "intervened", _say(p4, p4.intervened.answer)),
        # r1 (yes/no): wrong original, answer equals the counterfactual -> c
        _response("m", r1, "original", _say(r1, not r1.original.answer)),
        _response("m", r1, "intervened", _say(r1, r1.intervened.answer)),
        # another endpoint: p1 failed for good, p2 has no intervened response
        _response("n", p1, "original", _say(p1, p1.original.answer)),
        _response("n", p1, "intervened", None, {"type": "AuthError", "status": 401}),
        _response("n", p2, "original", _say(p2, p2.original.answer)),
        {"kind": "response", "task": "prompts", "endpoint": "other", "problem_id": "x"},
    ]
    traces = score_traces(records)
    assert list(traces.deployments) == ["m", "n"]
    assert traces.deployments["m"] == JointCounts(1, 1, 2, 0)
    assert traces.excluded["m"] == {"original: no answer line": 1}
    assert traces.deployments["n"] == JointCounts(0, 0, 0, 0)
    assert traces.excluded["n"] == {"error": 1, "missing": 1}
    assert traces.preserving["m"] == {"n": 1, "agree": 1}
    assert traces.strata["m"]["1"] == JointCounts(1, 0, 0, 0)
    assert traces.strata["m"]["2"] == JointCounts(0, 1, 1, 0)  # p2 (b) and r1 (c)
    assert traces.families["m"]["reachability"] == JointCounts(0, 0, 1, 0)


def test_counts_and_their_key_order_do_not_follow_the_stream_order() -> None:
    # Concurrent requests complete in any order; the same records in reverse must give the
    # same counts with the same key order (the JSON report and its tables follow it).
    problems = [arith.generate(1 + i % 3, i, 1) for i in range(6)]
    problems += [reachability.generate(1 + i % 2, i, 1) for i in range(3)]
    records: list[dict[str, Any]] = [p.to_record() for p in problems]
    for endpoint in ("m", "n"):
        for i, p in enumerate(problems):
            original = _say(p, p.original.answer) if i % 2 else "I cannot tell."
            records.append(_response(endpoint, p, "original", original))
            if i % 4:
                records.append(_response(endpoint, p, "intervened", _say(p, p.intervened.answer)))
    forward = score_traces(records, order=("n", "m"))
    backward = score_traces(records[:9] + records[:8:-1], order=("n", "m"))
    assert list(forward.deployments) == ["n", "m"]  # the run's config order
    for part in ("deployments", "strata", "families", "excluded", "preserving"):
        a, b = getattr(forward, part), getattr(backward, part)
        assert a == b, part
        for name in a:  # key order too, down to the inner tables
            inner_a, inner_b = a[name], b[name]
            if isinstance(inner_a, dict):
                assert list(inner_a) == list(inner_b), (part, name)
