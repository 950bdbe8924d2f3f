"""The evaluator's stream reader: torn tails, damaged lines, last record wins, early release."""

from __future__ import annotations

import io
import sys
from pathlib import Path

import orjson
import pytest

from cotaudit.errors import UsageError
from evaluator.grouping import GroupCollector
from evaluator.source import iter_records, ordered_by_run, resolve_stream, run_endpoint_order


def _response(
    problem: str, condition: str, premise: str | None, **extra: object
) -> dict[str, object]:
    rid = f"ep/{problem}/{condition}/{premise or '-'}/{extra.get('sample_index', 0)}"
    record: dict[str, object] = {
        "kind": "response",
        "request_id": rid,
        "endpoint": "ep",
        "problem_id": problem,
        "condition": condition,
        "target_premise": premise,
        "sample_index": 0,
        "text": "t",
        "error": None,
    }
    record.update(extra)
    return record


def _toy(name: str) -> dict[str, object]:
    """A valid record that no reader audits: a problem of a task the evaluator does not know."""
    return {"kind": "problem", "schema": 1, "task": "toy", "problem_id": name}


def _write(path: Path, records: list[dict[str, object]], tail: bytes = b"") -> Path:
    path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in records) + tail)
    return path


def test_torn_last_line_is_dropped_not_parsed(tmp_path: Path) -> None:
    path = _write(tmp_path / "r.jsonl", [_toy("a")], b'{"kind": "resp')
    assert [r["problem_id"] for r in iter_records(path)] == ["a"]


def test_complete_last_line_without_damage_is_kept(tmp_path: Path) -> None:
    path = _write(tmp_path / "r.jsonl", [_toy("a"), _toy("b")])
    assert [r["problem_id"] for r in iter_records(path)] == ["a", "b"]


def test_damaged_middle_line_names_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    path.write_bytes(orjson.dumps(_toy("a")) + b"\n{oops\n" + orjson.dumps(_toy("b")) + b"\n")
    with pytest.raises(UsageError, match=r"r\.jsonl:2: line is not valid JSON"):
        list(iter_records(path))


def test_line_without_kind_is_rejected(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    path.write_bytes(orjson.dumps(_toy("a")) + b"\n[1, 2]\n")
    with pytest.raises(UsageError, match=r"r\.jsonl:2: line is not a record"):
        list(iter_records(path))


def test_stdin_is_read_and_its_torn_tail_ignored(monkeypatch: pytest.MonkeyPatch) -> None:
    data = orjson.dumps(_toy("a")) + b"\n" + orjson.dumps(_toy("b")) + b'\n{"kind": "c'
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data)))
    assert [r["problem_id"] for r in iter_records("-")] == ["a", "b"]


def test_resolve_stream_maps_run_dir_and_rejects_missing(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match=r"no results\.jsonl"):
        resolve_stream(tmp_path)
    (tmp_path / "results.jsonl").write_bytes(b"")
    assert resolve_stream(tmp_path) == tmp_path / "results.jsonl"
    assert resolve_stream("-") == "-"
    with pytest.raises(UsageError, match="no such"):
        resolve_stream(tmp_path / "absent")


def _complete_set(problem: str) -> list[dict[str, object]]:
    records = [_response(problem, "original", None)]
    for condition in ("consistent", "local", "surface"):
        records.append(_response(problem, condition, "P1"))
    return records


def test_group_released_as_soon_as_complete() -> None:
    collector = GroupCollector(samples=1)
    collector.set_problem("p1", ["P1"])
    released = [collector.add(r) for r in _complete_set("p1")]
    assert released == [None, None, None, None]  # the sample is still missing
    group = collector.add(_response("p1", "sample", None))
    assert group is not None and group.problem_id == "p1"
    assert len(group.responses) == 5
    assert not collector.open
    # A record for a released group is counted, not silently merged.
    assert collector.add(_response("p1", "sample", None, sample_index=3)) is None
    assert collector.late == 1


def test_error_record_keeps_group_open_until_superseded() -> None:
    collector = GroupCollector(samples=0)
    collector.set_problem("p1", ["P1"])
    records = _complete_set("p1")
    failed = dict(records[1], error={"type": "rate_limit"})
    assert collector.add(records[0]) is None
    assert collector.add(failed) is None
    assert collector.add(records[2]) is None
    assert collector.add(records[3]) is None  # all conditions seen, but one is an error
    group = collector.add(records[1])  # the retried request: same request_id, later record
    assert group is not None
    assert group.superseded == 1
    assert group.responses[str(records[1]["request_id"])]["error"] is None
    assert group.errors() == []


def test_drain_releases_incomplete_groups_in_first_seen_order() -> None:
    collector = GroupCollector(samples=5)
    collector.add(_response("p2", "original", None))
    collector.add(_response("p1", "original", None))
    assert [g.problem_id for g in collector.drain()] == ["p2", "p1"]
    assert not collector.open


def test_ok_orders_by_premise_and_sample_and_skips_errors() -> None:
    collector = GroupCollector(samples=5)
    collector.add(_response("p", "sample", None, sample_index=1, request_id="s1"))
    collector.add(_response("p", "sample", None, sample_index=0, request_id="s0"))
    collector.add(_response("p", "sample", None, sample_index=2, request_id="s2", error={"x": 1}))
    (group,) = list(collector.drain())
    assert [r["request_id"] for r in group.ok("sample")] == ["s0", "s1"]
    assert len(group.errors()) == 1


def test_plan_in_the_problem_record_waits_for_every_probe_repeat() -> None:
    collector = GroupCollector(samples=99)  # the plan, when given, overrides the option
    collector.set_problem("p1", ["P1"], {"samples": 0, "probe_repeats": 2})
    assert [collector.add(r) for r in _complete_set("p1")] == [None] * 4
    second = [_response("p1", c, "P1", sample_index=1) for c in ("consistent", "local", "surface")]
    assert collector.add(second[0]) is None
    assert collector.add(second[1]) is None
    group = collector.add(second[2])
    assert group is not None and len(group.responses) == 7
    assert collector.late == 0


def test_plan_with_a_sample_summary_waits_for_it() -> None:
    collector = GroupCollector(samples=5)
    collector.set_problem("p1", ["P1"], {"samples": 0, "sample_summary": True})
    assert [collector.add(r) for r in _complete_set("p1")] == [None] * 4
    summary = {"kind": "sample_summary", "endpoint": "ep", "problem_id": "p1", "steps": []}
    group = collector.add(summary)
    assert group is not None and group.summaries == [summary]


def test_reports_follow_the_run_config_order_not_the_stream_order(tmp_path: Path) -> None:
    # Concurrent endpoints reach the stream in whatever order their requests finish; the
    # report order comes from the manifest's config, then names not in it, sorted.
    run = tmp_path / "run"
    run.mkdir()
    (run / "results.jsonl").write_bytes(b"")
    manifest = {"config": {"endpoints": [{"name": "zeta"}, {"name": "alpha"}]}}
    (run / "manifest.json").write_bytes(orjson.dumps(manifest))
    order = run_endpoint_order(run / "results.jsonl")
    assert order == ("zeta", "alpha")
    seen_in_stream = {"extra-b": 1, "alpha": 2, "extra-a": 3, "zeta": 4}
    assert list(ordered_by_run(seen_in_stream, order)) == ["zeta", "alpha", "extra-a", "extra-b"]
    assert ordered_by_run(seen_in_stream, order)["alpha"] == 2
    assert run_endpoint_order("-") == ()  # standard input: no manifest, names sorted
    (run / "manifest.json").write_bytes(b"{not json")
    assert run_endpoint_order(run / "results.jsonl") == ()


@pytest.mark.parametrize(
    ("marker", "what"),
    [
        ("evaluation.json", "this is an evaluation directory"),
        ("certificates.jsonl", "this is an evaluation directory"),
        ("selection.json", "this is the output directory of cotaudit selection"),
    ],
)
def test_an_output_directory_given_for_its_run_is_named_with_the_run(
    tmp_path: Path, marker: str, what: str
) -> None:
    # `RUN/eval` for `RUN` used to be told to `cotaudit run` into it: advice that makes a run
    # inside the evaluation.
    run = tmp_path / "run"
    (run / "eval").mkdir(parents=True)
    (run / "results.jsonl").write_bytes(b"")
    (run / "eval" / marker).write_bytes(b"{}\n")
    with pytest.raises(UsageError) as caught:
        resolve_stream(run / "eval")
    message = str(caught.value)
    assert message.startswith(f"{run / 'eval'}: {what}")
    assert f"Give its run directory instead: {run}, the directory holding results.jsonl." in (
        message
    )
    assert "cotaudit run" not in message


def test_an_evaluation_written_elsewhere_points_at_the_stream_its_report_names(
    tmp_path: Path,
) -> None:
    run = tmp_path / "run"
    run.mkdir()
    (run / "results.jsonl").write_bytes(b"")
    elsewhere = tmp_path / "evals" / "e1"
    elsewhere.mkdir(parents=True)
    (elsewhere / "evaluation.json").write_bytes(b"{}\n")
    report = {"kind": "report", "source": str(run / "results.jsonl")}
    (elsewhere / "report.json").write_bytes(orjson.dumps(report))
    with pytest.raises(UsageError, match=rf"instead: {run}, .*--eval-dir to cotaudit verify"):
        resolve_stream(elsewhere)
    (elsewhere / "report.json").write_bytes(b"[not a report")
    with pytest.raises(UsageError, match="the run directory it was computed from instead"):
        resolve_stream(elsewhere)
