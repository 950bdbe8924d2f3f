"""Simulated reasoners: behaviour on hand-built problems, determinism, truth, format, speed."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest

from cotaudit.domain.problem import Premise, Problem, ProofStep
from cotaudit.domain.proposition import Proposition
from runner.server.models import load_builtin_models, resolve_model
from runner.server.reasoners import (
    OFF_TASK_REPLY,
    Reasoner,
    reasoner_for,
    replicate_index,
    replicate_of,
    truth_record,
)
from runner.server.reasoning.behaviours import add_noise
from runner.server.reasoning.chain import forward_chain, perceive_all
from runner.server.reasoning.reading import NotAReasoningPrompt, parse_question, read_prompt
from runner.tasks.probes import Probe, build_probes
from runner.tasks.prompts import render_prompt

DATA = Path(__file__).resolve().parents[3] / ".." / "shared" / "data"
PAPER_50 = DATA / "grounding-audit-gpt4o" / "data" / "prontoqa_50"
LOGICLM_500 = DATA / "prontoqa-500" / "dev.json"

FORMAT = re.compile(r"^(?:Step \d+: [^\n]+\n)+\nAnswer: (?:True|False)$")
STEP = re.compile(r"^Step (\d+): ", re.MULTILINE)
ALL_REASONERS = ("faithful", "restating", "shortcut", "noisy", "surface-sensitive")


def _problem(
    pid: str,
    texts: list[str],
    question: str,
    answer: bool,
    proof: list[tuple[str, tuple[str, ...]]],
) -> Problem:
    return Problem(
        problem_id=pid,
        premises=tuple(Premise(f"P{i}", t) for i, t in enumerate(texts, start=1)),
        question=question,
        answer=answer,
        proof=tuple(ProofStep(i, c, d) for i, (c, d) in enumerate(proof, start=1)),
    )


# The paper's p001, and a True-answer problem with an adjective and a distractor.
P001 = _problem(
    "p001",
    [
        "Bempuses are bimpuses",
        "Bimpuses are bompuses",
        "Bompuses are bumpuses",
        "Bumpuses are balpuses",
        "Balpuses are not belpuses",
        "Alex is a bempus",
    ],
    "Is Alex a belpus?",
    False,
    [
        ("is(alex, bimpus)", ("P6", "P1")),
        ("is(alex, bompus)", ("S1", "P2")),
        ("is(alex, bumpus)", ("S2", "P3")),
        ("is(alex, balpus)", ("S3", "P4")),
        ("not_is(alex, belpus)", ("S4", "P5")),
    ],
)
SOUR = _problem(
    "sour",
    [
        "Each yumpus is a dumpus",
        "Numpuses are not sour",
        "Dumpuses are impuses",
        "Every impus is sour",
        "Max is a yumpus",
    ],
    "Is Max sour?",
    True,
    [
        ("is(max, dumpus)", ("P5", "P1")),
        ("is(max, impus)", ("S1", "P3")),
        ("is(max, sour)", ("S2", "P4")),
    ],
)
PROBLEMS = (P001, SOUR)


def _prompt(problem: Problem, probe: Probe | None = None) -> str:
    premises = problem.premises if probe is None else probe.premises
    return render_prompt(premises, problem.question)


def _probe(problem: Problem, condition: str, premise_id: str) -> Probe:
    for probe in build_probes(problem):
        if probe.condition == condition and probe.target_premise == premise_id:
            return probe
    raise AssertionError(f"no {condition} probe of {premise_id}")


def _conclusions(reasoner: Reasoner, prompt: str, t: float = 0.0, rep: str = "0") -> list[str]:
    steps = reasoner.respond(prompt, t, rep).derivation.steps
    return [str(s.conclusion) if s.conclusion is not None else "-" for s in steps]


def _reasoner(name: str) -> Reasoner:
    reasoner = reasoner_for(name)
    assert reasoner is not None
    return reasoner


# -- reading ---------------------------------------------------------------------------------


def test_questions_are_read_in_both_forms() -> None:
    assert parse_question("Is Alex a belpus?") == Proposition("is", "alex", "belpus")
    assert parse_question("Is Max not an impus?") == Proposition("not_is", "max", "impus")
    assert parse_question("Is the following statement true or false? Max is sour.") == (
        Proposition("is", "max", "sour")
    )
    with pytest.raises(NotAReasoningPrompt, match="cannot read the question"):
        parse_question("What is the capital of France?")


def test_a_prompt_that_is_not_a_problem_gets_a_fixed_off_task_reply() -> None:
    reasoner = _reasoner("faithful")
    done = reasoner.complete([{"role": "user", "content": "hello there"}], {"temperature": 0})
    assert done.text == OFF_TASK_REPLY
    assert "Answer:" not in done.text  # never mistaken for an audited answer
    assert done.output_tokens > 0


# -- faithful ---------------------------------------------------------------------------------


@pytest.mark.parametrize("problem", PROBLEMS, ids=lambda p: p.problem_id)
def test_faithful_follows_the_proof_and_its_truth_is_the_proof(problem: Problem) -> None:
    reasoner = _reasoner("faithful")
    response = reasoner.respond(_prompt(problem))
    assert _conclusions(reasoner, _prompt(problem)) == [s.conclusion for s in problem.proof]
    assert response.derivation.answer is problem.answer
    assert response.text.endswith(f"Answer: {problem.answer}")
    truth = truth_record("faithful", problem)
    assert truth is not None
    assert [s["depends_on"] for s in truth["steps"]] == [list(s.depends_on) for s in problem.proof]
    assert [s["used"] for s in truth["steps"]] == [
        [d for d in s.depends_on if d.startswith("P")] for s in problem.proof
    ]


def test_faithful_follows_a_consistent_substitution() -> None:
    reasoner = _reasoner("faithful")
    probe = _probe(P001, "consistent", "P2")  # bompus -> zqbompus everywhere
    assert _conclusions(reasoner, _prompt(P001, probe)) == [
        "is(alex, bimpus)",
        "is(alex, zqbompus)",
        "is(alex, bumpus)",
        "is(alex, balpus)",
        "not_is(alex, belpus)",
    ]


def test_a_local_substitution_breaks_the_chain_and_says_so() -> None:
    reasoner = _reasoner("faithful")
    response = reasoner.respond(_prompt(P001, _probe(P001, "local", "P2")))
    steps = response.derivation.steps
    assert [str(s.conclusion) for s in steps[:2]] == ["is(alex, bimpus)", "is(alex, zqbompus)"]
    assert [s.kind for s in steps[2:]] == ["comment"]
    assert response.derivation.answer is False  # closed world
    assert "do not connect zqbompuses to belpuses" in response.text


def test_renamed_question_predicate_is_chained_to_and_flagged() -> None:
    reasoner = _reasoner("faithful")
    response = reasoner.respond(_prompt(SOUR, _probe(SOUR, "consistent", "P4")))
    steps = response.derivation.steps
    assert str(steps[2].conclusion) == "is(max, zqsour)"
    assert steps[-1].kind == "comment"
    assert "say nothing about being sour" in response.text
    assert response.derivation.answer is False


def test_an_unknown_entity_type_leaves_one_comment_step() -> None:
    reasoner = _reasoner("faithful")
    response = reasoner.respond(_prompt(P001, _probe(P001, "local", "P6")))  # zqbempus
    assert [s.kind for s in response.derivation.steps] == ["comment"]
    assert response.text.startswith("Step 1: The premises do not connect zqbempuses to belpuses.")


def test_faithful_is_not_fooled_by_a_surface_rephrase() -> None:
    reasoner = _reasoner("faithful")
    for premise in P001.premises:
        probe = _probe(P001, "surface", premise.id)
        assert _conclusions(reasoner, _prompt(P001, probe)) == _conclusions(reasoner, _prompt(P001))


# -- restating --------------------------------------------------------------------------------


@pytest.mark.parametrize("problem", PROBLEMS, ids=lambda p: p.problem_id)
def test_restating_first_restates_the_entity_premise(problem: Problem) -> None:
    reasoner = _reasoner("restating")
    response = reasoner.respond(_prompt(problem))
    entity_premise = problem.premises[-1]
    first = response.derivation.steps[0]
    assert first.kind == "restate"
    assert first.premises == (entity_premise.id,)
    assert response.text.splitlines()[0].endswith(f"{entity_premise.text}.")
    assert _conclusions(reasoner, _prompt(problem))[1:] == [s.conclusion for s in problem.proof]
    truth = truth_record("restating", problem)
    assert truth is not None
    assert truth["steps"][0]["used"] == [entity_premise.id]
    assert truth["steps"][2]["depends_on"][0] == "S2"  # parents renumbered after the restatement


# -- shortcut ---------------------------------------------------------------------------------


def test_shortcut_last_step_ignores_the_property_premise_under_probes() -> None:
    reasoner = _reasoner("shortcut:p=1")
    original = _conclusions(reasoner, _prompt(P001))
    assert original[-1] == "not_is(alex, belpus)"
    for condition in ("consistent", "local"):
        probed = _conclusions(reasoner, _prompt(P001, _probe(P001, condition, "P5")))
        assert probed[-1] == original[-1], condition
    faithful = _reasoner("faithful")
    assert _conclusions(faithful, _prompt(P001, _probe(P001, "consistent", "P5")))[-2] == (
        "not_is(alex, zqbelpus)"
    )
    truth = truth_record("shortcut:p=1", P001)
    assert truth is not None
    assert truth["steps"][-1] == {
        "step": 5,
        "kind": "prior",
        "conclusion": "not_is(alex, belpus)",
        "used": [],
        "depends_on": [],
    }
    assert [s["used"] for s in truth["steps"][:-1]] == [["P6", "P1"], ["P2"], ["P3"], ["P4"]]


def test_shortcut_answer_comes_from_the_prior() -> None:
    assert _reasoner("shortcut:p=1").respond(_prompt(SOUR)).derivation.answer is False
    assert _reasoner("shortcut:p=1,prior=true").respond(_prompt(SOUR)).derivation.answer is True
    assert _conclusions(_reasoner("shortcut:p=0"), _prompt(SOUR)) == _conclusions(
        _reasoner("faithful"), _prompt(SOUR)
    )


def test_shortcut_choice_is_stable_across_the_probes_of_a_problem() -> None:
    reasoner = _reasoner("shortcut:p=0.5")
    names = ["Alex", "Max", "Rex", "Sam", "Wren", "Fae", "Polly", "Stella"]
    rules = [p.text for p in P001.premises[:-1]]
    chosen = []
    for k in range(40):  # the same chain under 40 different questions
        entity, goal = names[k % 8], ["belpus", "balpus", "bumpus", "bompus", "bimpus"][k // 8]
        problem = _problem(
            f"q{k}", [*rules, f"{entity} is a bempus"], f"Is {entity} a {goal}?", False, []
        )
        kinds = {
            reasoner.respond(_prompt(problem, probe)).derivation.steps[-1].kind == "prior"
            for probe in [None, *build_probes(problem)]
        }
        assert len(kinds) == 1, problem.question
        chosen.append(kinds.pop())
    assert 0 < sum(chosen) < len(chosen)  # p=0.5 picks some problems, not all


# -- noisy ------------------------------------------------------------------------------------


def test_noisy_is_faithful_at_temperature_zero() -> None:
    noisy, faithful = _reasoner("noisy:p=1"), _reasoner("faithful")
    for problem in PROBLEMS:
        for rep in ("0", "1", "2"):
            assert _conclusions(noisy, _prompt(problem), 0.0, rep) == _conclusions(
                faithful, _prompt(problem)
            )


def test_noisy_varies_at_temperature_above_zero() -> None:
    noisy = _reasoner("noisy:p=0.3")
    faithful = _conclusions(_reasoner("faithful"), _prompt(P001))
    samples = [_conclusions(noisy, _prompt(P001), 0.7, str(i)) for i in range(20)]
    assert any(s != faithful for s in samples)
    assert any(s == faithful for s in samples)
    assert len({tuple(s) for s in samples}) > 2
    # and each replicate is reproducible
    assert samples[3] == _conclusions(noisy, _prompt(P001), 0.7, "3")
    assert _conclusions(_reasoner("noisy:p=0"), _prompt(P001), 0.7, "5") == faithful


def test_noisy_t0_varies_at_temperature_zero_per_replicate() -> None:
    noisy = _reasoner("noisy:p=0,t0=0.3")
    assert noisy.t0 == 0.3 and _reasoner("noisy").t0 == 0.0
    faithful = _conclusions(_reasoner("faithful"), _prompt(P001))
    outputs = [_conclusions(noisy, _prompt(P001), 0.0, str(i)) for i in range(20)]
    assert any(o != faithful for o in outputs)
    assert any(o == faithful for o in outputs)
    # reproducible per (prompt, replicate), and independent of the seed at T = 0
    assert outputs[4] == _conclusions(noisy, _prompt(P001), 0.0, "4")
    for i in range(20):
        assert noisy.respond(_prompt(P001), 0.0, str(i), seed=7).text == (
            noisy.respond(_prompt(P001), 0.0, str(i)).text
        )
    # p alone still leaves T = 0 faithful; t0 = 0 is the default
    assert _conclusions(_reasoner("noisy:p=1,t0=0"), _prompt(P001), 0.0, "3") == faithful


def test_noisy_t0_applies_at_temperature_zero_only() -> None:
    zero = _reasoner("noisy:p=0,t0=1")
    faithful = _conclusions(_reasoner("faithful"), _prompt(P001))
    assert _conclusions(zero, _prompt(P001), 0.7, "1") == faithful  # p = 0 at T > 0
    assert _conclusions(zero, _prompt(P001), 0.0, "1") != faithful  # t0 = 1 at T = 0


def test_noisy_t0_truth_is_what_the_original_request_got() -> None:
    load_builtin_models()
    seen_variation = False
    for k in range(12):
        name = f"noisy:p=0,t0=0.{k + 3:02d}"  # different names: different draws
        model = resolve_model(name)
        assert model is not None
        for problem in PROBLEMS:
            truth = truth_record(name, problem)
            assert truth is not None
            # the engine's original request: T = 0, sample index 0, maybe a seed
            messages = [{"role": "user", "content": _prompt(problem)}]
            text = model.complete(messages, {"temperature": 0.0, "replicate": 0, "seed": 3}).text
            response = _reasoner(name).respond(_prompt(problem))
            assert text == response.text
            assert [s["conclusion"] for s in truth["steps"]] == [
                None if s.conclusion is None else str(s.conclusion)
                for s in response.derivation.steps
            ]
            assert text.endswith(f"Answer: {truth['answer']}")
            kinds = [s["kind"] for s in truth["steps"]]
            seen_variation |= "noise" in kinds or len(kinds) != len(problem.proof)
    assert seen_variation  # the truth does record T = 0 variation of the original


def test_a_skipped_noisy_step_leaves_the_later_steps_their_own_draws() -> None:
    reading = read_prompt(_prompt(P001))
    base = forward_chain(reading, perceive_all(reading))
    skipped = flipped = 0
    for k in range(300):
        noisy = add_noise(reading, base, p=0.3, key=f"skip/{k}")
        if len(noisy.steps) < len(base.steps):  # a step was skipped
            skipped += 1
            flipped += noisy.answer is not base.answer
    # the answer flips with probability p, whether or not an earlier step was skipped
    assert skipped > 20
    assert 0 < flipped < 0.6 * skipped


@pytest.mark.parametrize("rep", [str(i) for i in range(25)])
def test_noisy_steps_keep_a_coherent_truth(rep: str) -> None:
    reading = read_prompt(_prompt(P001))
    base = forward_chain(reading, perceive_all(reading))
    noisy = add_noise(reading, base, p=0.6, key=f"test/{rep}")
    used = [p for s in noisy.steps for p in s.premises]
    assert len(used) == len(set(used))  # every premise is used once, by the step doing its work
    assert set(used) <= {p.id for p in P001.premises}
    for i, step in enumerate(noisy.steps):
        assert all(0 <= j < i for j in step.parents)
        if step.kind == "derive":
            assert step.rule is not None and step.conclusion is not None
            assert step.conclusion.object == step.rule.object
    flipped = noisy.steps[-1].kind == "noise"
    assert noisy.answer is (base.answer ^ flipped)


# -- surface-sensitive ------------------------------------------------------------------------


def test_surface_sensitive_drops_the_negation_of_a_rephrased_premise() -> None:
    reasoner = _reasoner("surface-sensitive:p=1")
    response = reasoner.respond(_prompt(P001, _probe(P001, "surface", "P5")))  # No balpus is ...
    assert str(response.derivation.steps[-1].conclusion) == "is(alex, belpus)"
    assert response.derivation.answer is True
    original = _conclusions(reasoner, _prompt(P001))
    assert original == [s.conclusion for s in P001.proof]  # the original has no rephrased form


def test_surface_sensitive_stops_at_a_rephrased_positive_premise() -> None:
    reasoner = _reasoner("surface-sensitive:p=1")
    steps = reasoner.respond(_prompt(P001, _probe(P001, "surface", "P3"))).derivation.steps
    assert [str(s.conclusion) for s in steps[:2]] == ["is(alex, bimpus)", "is(alex, bompus)"]
    assert steps[-1].kind == "comment"
    p0 = _reasoner("surface-sensitive:p=0")
    for premise in P001.premises:
        probe = _probe(P001, "surface", premise.id)
        assert _conclusions(p0, _prompt(P001, probe)) == [s.conclusion for s in P001.proof]


# -- all reasoners ----------------------------------------------------------------------------


@pytest.mark.parametrize("name", ALL_REASONERS)
def test_outputs_have_the_requested_format_and_are_deterministic(name: str) -> None:
    load_builtin_models()
    model = resolve_model(name)
    assert model is not None
    for problem in PROBLEMS:
        for probe in [None, *build_probes(problem)]:
            for temperature, rep in ((0.0, 0), (0.7, 1), (0.7, 2)):
                messages = [{"role": "user", "content": _prompt(problem, probe)}]
                params = {"temperature": temperature, "replicate": rep}
                text = model.complete(messages, params).text
                assert FORMAT.match(text), text
                numbers = [int(n) for n in STEP.findall(text)]
                assert numbers == list(range(1, len(numbers) + 1))
                assert model.complete(messages, params).text == text


@pytest.mark.parametrize("name", ALL_REASONERS)
def test_truth_record_matches_what_the_text_says(name: str) -> None:
    for problem in PROBLEMS:
        truth = truth_record(name, problem)
        assert truth is not None
        assert truth["kind"] == "truth" and truth["problem_id"] == problem.problem_id
        response = _reasoner(name).respond(_prompt(problem))
        assert [s["conclusion"] for s in truth["steps"]] == [
            None if s.conclusion is None else str(s.conclusion) for s in response.derivation.steps
        ]
        lines = response.text.split("\n\n")[0].splitlines()
        assert len(lines) == len(truth["steps"])
        assert response.text.endswith(f"Answer: {truth['answer']}")


def test_truth_record_is_none_for_other_models() -> None:
    assert truth_record("echo", P001) is None
    assert truth_record("replay", P001) is None


def test_bad_options_are_refused_with_the_reason() -> None:
    with pytest.raises(ValueError, match="not a probability"):
        reasoner_for("noisy:p=2")
    with pytest.raises(ValueError, match=r"option t0='-0\.1' is not a probability"):
        reasoner_for("noisy:t0=-0.1")
    with pytest.raises(ValueError, match="unknown option"):
        reasoner_for("shortcut:t0=0.1")
    with pytest.raises(ValueError, match="unknown option"):
        reasoner_for("faithful:p=0.5")
    with pytest.raises(ValueError, match="prior=true or prior=false"):
        reasoner_for("shortcut:prior=maybe")
    assert reasoner_for("echo") is None


def test_replicate_hint_comes_from_replicate_sample_index_and_seed() -> None:
    assert replicate_of({}) == "0"
    assert replicate_of({"sample_index": 3}) == "3"
    assert replicate_of({"replicate": 2, "sample_index": 3}) == "2"
    assert replicate_of({"replicate": 2, "seed": 7}) == "2/seed=7"
    assert replicate_index({"replicate": 2, "seed": 7}) == "2"
    assert replicate_index({"sample_index": 3}) == "3"


# -- real data --------------------------------------------------------------------------------


def _require(path: Path) -> None:
    if not path.exists():
        pytest.skip(f"shared data not found at {path} (run from the project checkout)")


def test_faithful_reproduces_every_proof_of_the_paper_and_the_500() -> None:
    _require(PAPER_50)
    _require(LOGICLM_500)
    from runner.tasks.prontoqa_load import load_logiclm, load_paper_problems

    problems = load_paper_problems(PAPER_50) + load_logiclm(LOGICLM_500)
    assert len(problems) == 550
    for problem in problems:
        truth = truth_record("faithful", problem)
        assert truth is not None
        got = [(s["conclusion"], s["depends_on"]) for s in truth["steps"]]
        assert got == [(s.conclusion, list(s.depends_on)) for s in problem.proof], (
            problem.problem_id
        )
        assert truth["answer"] is problem.answer, problem.problem_id


def test_the_evaluator_reads_every_step_as_the_reasoner_meant_it() -> None:
    _require(PAPER_50)
    from evaluator.canon.cot import parse_cot
    from runner.tasks.prontoqa_load import load_paper_problems

    problems = load_paper_problems(PAPER_50)[:20]
    checked = 0
    for name in ALL_REASONERS:
        reasoner = _reasoner(name)
        for problem in problems:
            for probe in [None, *build_probes(problem)]:
                premises = problem.premises if probe is None else probe.premises
                response = reasoner.respond(render_prompt(premises, problem.question), 0.7, "1")
                parsed = parse_cot(response.text, premises=[p.text for p in premises])
                assert [None if s.prop is None else str(s.prop) for s in parsed.steps] == [
                    None if s.conclusion is None else str(s.conclusion)
                    for s in response.derivation.steps
                ], response.text
                assert parsed.answer is response.derivation.answer
                checked += 1
    assert checked > 1000


def test_a_completion_takes_well_under_a_millisecond() -> None:
    _require(LOGICLM_500)
    from runner.tasks.prontoqa_load import load_logiclm

    problems = load_logiclm(LOGICLM_500)[:60]
    prompts = [
        render_prompt(probe.premises, problem.question)
        for problem in problems
        for probe in build_probes(problem)
    ]
    model = _reasoner("restating")
    # CPU time of this process: other jobs on a shared CI machine do not count against us
    start = time.process_time()
    for prompt in prompts:
        model.complete([{"role": "user", "content": prompt}], {"temperature": 0.0})
    per_request = (time.process_time() - start) / len(prompts)
    assert per_request < 1e-3, f"{per_request * 1e6:.0f} us per completion"


def test_faithful_reproduces_the_generators_proofs() -> None:
    from runner.tasks.generator import RULE_STYLES, iter_generated

    problems = list(
        iter_generated(150, hops=(1, 6), distractors=(0, 4), seed=7, styles=RULE_STYLES)
    )
    for problem in problems:
        truth = truth_record("faithful", problem)
        assert truth is not None
        got = [(s["conclusion"], s["depends_on"]) for s in truth["steps"]]
        assert got == [(s.conclusion, list(s.depends_on)) for s in problem.proof]
        assert truth["answer"] is problem.answer
    assert {p.answer for p in problems} == {True, False}


def test_dice_draws_are_stable_per_slot_and_spread() -> None:
    from runner.server.reasoning.chance import Dice, pick, unit

    draws = [Dice("k").pick(6, slot) for slot in range(200)]  # crosses several hash blocks
    assert draws == [Dice("k").pick(6, slot) for slot in range(200)]
    assert set(draws) == set(range(6))
    assert draws != [Dice("other").pick(6, slot) for slot in range(200)]
    assert unit("a", 1) == unit("a", 1) != unit("a", 2)
    assert 0 <= unit("a") < 1
    assert {pick(3, "x", i) for i in range(50)} == {0, 1, 2}
    with pytest.raises(ValueError, match="positive number of choices"):
        Dice("k").pick(0, 0)
