"""The staged per-problem audit (parse, align, decide, certify) and its independence."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from cotaudit.domain.proposition import Proposition
from evaluator.audit import (
    AuditSettings,
    align_stage,
    audit_problem,
    decide_stage,
    parse_stage,
    problem_vocabulary,
)
from evaluator.grouping import ResponseGroup
from evaluator.pipeline import EvaluateOptions, evaluate_records
from tests.evaluator.test_pipeline import PROBLEM, records


def _group(recs: list[dict[str, Any]], problem_id: str = "q1") -> ResponseGroup:
    group = ResponseGroup(endpoint="ep", problem_id=problem_id)
    for record in recs:
        if record.get("kind") == "response":
            group.add(record)
    return group


def test_each_stage_has_plain_inputs_and_outputs() -> None:
    group = _group(records())
    settings = AuditSettings()
    parsed = parse_stage(group, PROBLEM, settings)
    assert parsed.original is not None and len(parsed.original.steps) == 2
    assert parsed.counts.steps["original"] == 2
    assert len(parsed.probes) == 9  # 3 premises x 3 conditions, one output each
    aligned = align_stage(parsed, PROBLEM)
    assert aligned.counts.matched == 2
    assert aligned.substitutions["P1"] == {"bimpus": "zqbimpus"}
    view = aligned.probes[("P1", "consistent")]
    assert view.counterpart(1).rule == "substituted"
    assert view.counterpart(None).rule == "missing"
    pairs, decisions = decide_stage(parsed.original, aligned, PROBLEM, settings)
    assert len(pairs) == 6 and len(decisions.consistent) == 6
    assert pairs[0].phi_consistent == "is(alex, zqbimpus)"


def test_audit_is_a_pure_function_of_the_problem_records() -> None:
    group = _group(records())
    first = audit_problem(group, PROBLEM)
    again = audit_problem(group, PROBLEM)
    assert first.certificates == again.certificates
    assert first.pairs == again.pairs
    # Auditing another problem in between changes nothing: no state crosses problems.
    other = replace(PROBLEM, problem_id="q2")
    recs = [dict(r, problem_id="q2") for r in records() if r.get("kind") == "response"]
    audit_problem(_group(recs, "q2"), other)
    assert audit_problem(group, PROBLEM).certificates == first.certificates


def test_a_group_without_an_original_still_reports_its_counts() -> None:
    recs = [r for r in records() if r.get("condition") != "original"]
    audit = audit_problem(_group(recs), PROBLEM)
    assert audit.outcome is None and audit.pairs == [] and audit.certificates == []
    assert audit.parse_counts.steps["original"] == 0


def test_the_report_does_not_depend_on_the_order_problems_complete() -> None:
    second = replace(PROBLEM, problem_id="q2")
    q2 = [second.to_record()] + [
        dict(r, problem_id="q2", request_id=str(r["request_id"]).replace("q1", "q2"))
        for r in records()
        if r.get("kind") == "response"
    ]
    q1 = records()
    forward, _ = evaluate_records(q1 + q2, EvaluateOptions(n_boot=200, seed=4))
    backward, _ = evaluate_records(q2 + q1, EvaluateOptions(n_boot=200, seed=4))
    assert forward.report() == backward.report()


def test_a_probe_vocabulary_with_fresh_symbols_keeps_the_problems_types() -> None:
    # The consistent probe's fresh symbol (here not in the probe's premises, so the vocabulary
    # is rebuilt with it) renames a predicate: "Bimpus is a bompus" and "Zqbompus is not a
    # bimpus" are about types, never about individuals called Bimpus or Zqbompus.
    vocabulary = problem_vocabulary(PROBLEM, (), {"bompus": "zqbompus"})
    assert "zqbompus" in vocabulary.names
    bimpus = vocabulary.resolve_prop(Proposition("is", "bimpus", "bompus"))
    fresh = vocabulary.resolve_prop(Proposition("not_is", "zqbompus", "bimpus"))
    assert bimpus == Proposition("subtype", "bimpus", "bompus")
    assert fresh == Proposition("not_subtype", "zqbompus", "bimpus")
    # The problem's individual stays one.
    assert vocabulary.resolve_prop(Proposition("is", "alex", "bompus")) == Proposition(
        "is", "alex", "bompus"
    )
