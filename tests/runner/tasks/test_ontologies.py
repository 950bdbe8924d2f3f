"""ProntoQA's true, false and number ontologies: the generator, the probes, the reasoners,
and the parser reading what the reasoners write about them."""

from __future__ import annotations

from collections import Counter

import pytest

from cotaudit.domain.ontology import NOUNS, ancestors, believed, related
from cotaudit.domain.proposition import parse_canonical
from cotaudit.domain.sentences import parse_premise
from evaluator.audit import problem_vocabulary
from evaluator.canon import parse_cot
from runner.server.reasoners import reasoner_for, truth_record
from runner.tasks.generator import generate_problems
from runner.tasks.probes import build_probes
from runner.tasks.prompts import render_prompt

REAL = ("true", "false", "number")


@pytest.mark.parametrize("ontology", REAL)
def test_same_proof_trees_as_the_fictional_generator(ontology: str) -> None:
    problems = generate_problems(40, ontology=ontology, distractors=(1, 3), seed=5)  # type: ignore[arg-type]
    assert [p.hops for p in problems] == [p.hops for p in generate_problems(40, seed=5)]
    assert [p.answer for p in problems] == [p.answer for p in generate_problems(40, seed=5)]
    for problem in problems:
        assert problem.extra["ontology"] == ontology
        entity_premise = problem.premises[-1]
        for k, step in enumerate(problem.proof, start=1):
            first = entity_premise.id if k == 1 else f"S{k - 1}"
            assert step.depends_on[0] == first
        for premise in problem.premises:
            prop = parse_premise(premise.text)
            assert prop is not None, premise.text  # every sentence reads back
            if prop.kind in ("subtype", "not_subtype"):
                assert prop.subject in NOUNS and prop.object in NOUNS, premise.text


def test_the_true_ontology_says_only_what_is_true() -> None:
    for problem in generate_problems(60, ontology="true", distractors=(1, 3), seed=1):
        for premise in problem.premises[:-1]:
            prop = parse_premise(premise.text)
            assert prop is not None
            truth = believed(prop.subject, prop.object)
            if prop.kind == "subtype":
                assert truth is True, premise.text
            else:  # "Mammals are not reptiles": truly disjoint
                assert not related(prop.subject, prop.object), premise.text


def test_the_false_ontology_puts_real_words_in_wrong_places() -> None:
    for problem in generate_problems(60, ontology="false", seed=1):
        chain_rules = [
            parse_canonical(s.conclusion) for s in problem.proof
        ]  # the proof's categories, in order
        assert all(c.object in NOUNS for c in chain_rules)
        for premise in problem.premises[:-1]:
            prop = parse_premise(premise.text)
            assert prop is not None
            if premise.id not in problem.distractors and prop.kind == "subtype":
                assert believed(prop.subject, prop.object) is False, premise.text


def test_the_number_domain_writes_numerals_and_categories_of_several_words() -> None:
    problems = generate_problems(30, ontology="number", distractors=(1, 2), seed=2)
    for problem in problems:
        entity = parse_premise(problem.premises[-1].text)
        assert entity is not None and entity.subject.lstrip("-").isdigit()
    words = Counter(
        w for p in problems for s in p.proof for w in [parse_canonical(s.conclusion).object]
    )
    assert any(" " in w for w in words)  # "natural number", "real number", ...
    assert "7 is a prime number" in {
        p.premises[-1].text for p in generate_problems(200, ontology="number", seed=0)
    }


def test_the_consistent_probe_renames_a_real_category_everywhere() -> None:
    problem = generate_problems(1, ontology="number", distractors=0, seed=3)[0]
    probes = build_probes(problem)
    for probe in probes:
        if probe.condition != "consistent":
            continue
        ((old, new),) = probe.substitution.items()  # type: ignore[union-attr]
        assert new == "zq" + old
        for premise in probe.premises:
            prop = parse_premise(premise.text)
            assert prop is not None
            assert old not in (prop.subject, prop.object), premise.text


@pytest.mark.parametrize("ontology", REAL)
@pytest.mark.parametrize("model", ["faithful", "restating", "world-knowledge"])
def test_at_least_99_percent_of_the_reasoners_steps_are_read(model: str, ontology: str) -> None:
    """The generated ontologies: what each reasoner writes, original and every probe, read."""
    reasoner = reasoner_for(model)
    assert reasoner is not None
    steps = read = right = 0
    for problem in generate_problems(12, ontology=ontology, distractors=(1, 3), seed=7):  # type: ignore[arg-type]
        prompts = [(render_prompt(problem.premises, problem.question), ())]
        for probe in build_probes(problem):
            texts = tuple(p.text for p in probe.premises)
            prompts.append((render_prompt(probe.premises, problem.question), texts))
        for prompt, texts in prompts:
            response = reasoner.respond(prompt)
            vocabulary = problem_vocabulary(problem, texts)
            parsed = parse_cot(response.text, premises=list(texts), vocabulary=vocabulary)
            meant = response.derivation.steps
            assert len(parsed.steps) == len(meant)
            assert parsed.answer is response.derivation.answer
            for step, intended in zip(parsed.steps, meant, strict=True):
                steps += 1
                read += step.reading.parsed
                concl = intended.conclusion
                if concl is None:
                    right += step.reading.status == "non_assertion"
                elif concl.object not in vocabulary.names:
                    # world-knowledge names categories the problem never uses ("Sage is an
                    # organism"): by the parser's rule, no assertion about this problem.
                    right += step.reading.category == "unknown_word"
                else:
                    right += step.prop == concl
    assert read >= 0.99 * steps, (read, steps)
    assert right == steps, (right, steps)  # and read as the reasoner meant it


def test_the_world_knowledge_reasoner_answers_from_belief_and_says_so_in_its_truth() -> None:
    problem = generate_problems(1, ontology="true", distractors=0, seed=4)[0]
    record = truth_record("world-knowledge", problem)
    assert record is not None
    entity_premise = problem.premises[-1].id
    assert record["steps"][0]["used"] == [entity_premise]
    assert all(step["used"] == [] for step in record["steps"][1:])
    faithful = truth_record("faithful", problem)
    assert faithful is not None
    assert [s["conclusion"] for s in faithful["steps"]] == [s.conclusion for s in problem.proof]
    # Renaming the entity's category makes it a stranger: it reads the premises instead.
    probe = next(
        p
        for p in build_probes(problem)
        if p.condition == "local" and p.target_premise == entity_premise
    )
    reasoner = reasoner_for("world-knowledge")
    assert reasoner is not None
    text = reasoner.respond(render_prompt(probe.premises, problem.question)).text
    assert "premises do not" in text


def test_the_false_ontology_fools_only_the_world_knowledge_reasoner() -> None:
    problems = generate_problems(20, ontology="false", distractors=(1, 2), seed=9)
    right: Counter[str] = Counter()
    for model in ("faithful", "world-knowledge"):
        reasoner = reasoner_for(model)
        assert reasoner is not None
        for problem in problems:
            answer = reasoner.respond(render_prompt(problem.premises, problem.question))
            right[model] += answer.derivation.answer is problem.answer
    assert right["faithful"] == len(problems)
    assert right["world-knowledge"] < len(problems)
    assert list(ancestors("cat"))[:2] == ["feline", "carnivore"]
