from __future__ import annotations

from collections import Counter

import pytest

from cotaudit.domain.sentences import parse_premise, parse_premise_styled
from runner.tasks.generator import generate_problems
from runner.tasks.probes import build_probes
from runner.tasks.prompts import parse_prompt, render_prompt
from tests.runner.tasks.helpers import assert_valid_proof


def test_deterministic_for_a_seed_and_prefix_stable() -> None:
    a = generate_problems(40, seed=7)
    assert a == generate_problems(40, seed=7)
    assert a[:13] == generate_problems(13, seed=7)
    assert a != generate_problems(40, seed=8)
    assert len({p.problem_id for p in a}) == 40


def test_balanced_answers_and_hop_counts() -> None:
    problems = generate_problems(60, hops=(1, 5), seed=3)
    answers = Counter(p.answer for p in problems)
    assert answers[True] == answers[False] == 30
    assert Counter(p.hops for p in problems) == {h: 12 for h in range(1, 6)}
    unbalanced = generate_problems(60, hops=(2, 4), seed=3, balance=False)
    assert {p.hops for p in unbalanced} <= {2, 3, 4}


@pytest.mark.parametrize("styles", [("plural",), ("plural", "each", "every")])
def test_proofs_are_valid(styles: tuple[str, ...]) -> None:
    problems = generate_problems(200, hops=(1, 6), distractors=(0, 3), seed=11, styles=styles)
    for problem in problems:
        assert_valid_proof(problem)
        # The entity premise comes last, as in the paper's problems.
        assert parse_premise(problem.premises[-1].text).kind == "is"  # type: ignore[union-attr]
        assert problem.proof[0].depends_on[0] == problem.premises[-1].id
        assert len(problem.premises) == problem.hops + 1 + len(problem.distractors)
    used_styles = {parse_premise_styled(p.text)[1] for q in problems for p in q.premises}  # type: ignore[index]
    assert used_styles == set(styles)


def test_distractors_share_names_but_stay_off_the_chain() -> None:
    problems = generate_problems(100, distractors=2, seed=5)
    assert all(len(p.distractors) == 2 for p in problems)
    sharing = 0
    for problem in problems:
        chain = {
            parse_premise(problem.premise(d).text).subject
            for s in problem.proof
            for d in s.depends_on
            if d.startswith("P")
        }  # type: ignore[union-attr]
        objects = {parse_premise(problem.premise(d).text).object for d in problem.distractors}  # type: ignore[union-attr]
        subjects = {parse_premise(problem.premise(d).text).subject for d in problem.distractors}  # type: ignore[union-attr]
        assert not subjects & chain
        sharing += bool(
            objects & {c.split(", ")[1][:-1] for c in (s.conclusion for s in problem.proof)}
        )
    assert sharing > 30


def test_generated_problems_probe_and_prompt_round_trip() -> None:
    for problem in generate_problems(30, seed=2, styles=("plural", "each", "every")):
        probes = build_probes(problem)
        assert len(probes) == 3 * len(problem.premises)
        for probe in probes:
            prompt = render_prompt(probe.premises, problem.question)
            assert parse_prompt(prompt) == (probe.premises, problem.question)
            assert all(parse_premise(p.text) is not None for p in probe.premises)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"hops": 0},
        {"hops": (4, 2)},
        {"hops": 600},
        {"distractors": (-1, 2)},
        {"styles": ("no",)},
        {"styles": ()},
    ],
)
def test_bad_parameters(kwargs: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        generate_problems(2, **kwargs)  # type: ignore[arg-type]
