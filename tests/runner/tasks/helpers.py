"""Assertions shared by the task tests."""

from __future__ import annotations

from cotaudit.domain.problem import Problem
from cotaudit.domain.proposition import Proposition, parse_canonical
from cotaudit.domain.sentences import parse_premise, parse_question
from runner.tasks.prontoqa_load import follows


def assert_valid_proof(problem: Problem) -> None:
    """Every step follows from its direct parents; the last answers the question."""
    known: dict[str, Proposition] = {}
    for premise in problem.premises:
        prop = parse_premise(premise.text)
        assert prop is not None, (problem.problem_id, premise)
        known[premise.id] = prop
    for step in problem.proof:
        conclusion = parse_canonical(step.conclusion)
        parents = [known[d] for d in step.depends_on]  # only earlier steps are known
        assert follows(parents, conclusion), (problem.problem_id, step)
        known[f"S{step.step}"] = conclusion
    asked = parse_question(problem.question)
    assert asked is not None and asked.kind == "is", problem.question
    last = parse_canonical(problem.proof[-1].conclusion)
    assert (last.subject, last.object) == (asked.subject, asked.object)
    assert (last.kind == "is") == problem.answer, problem.problem_id
    used = {d for s in problem.proof for d in s.depends_on if d.startswith("P")}
    assert set(problem.distractors) == {p.id for p in problem.premises} - used
