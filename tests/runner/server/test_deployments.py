"""Simulated deployments: read the task from the prompt, deterministic, match their closed form."""

from __future__ import annotations

import pytest

from cotaudit.domain.procedural_answers import extract_procedural_answer
from runner.server.deployments import (
    DeploymentParams,
    SimulatedDeployment,
    cell_probabilities,
    closed_form,
    closed_form_accuracy,
    mix_of,
    params_of,
)
from runner.server.models import load_builtin_models, resolve_model
from runner.tasks.procedural.common import ProceduralProblem
from runner.tasks.procedural.task import ProceduralTask

PROBLEMS = list(ProceduralTask(per_stratum=4, max_stratum=5).problems())


def _ask(
    model: SimulatedDeployment, problem: ProceduralProblem, variant: str, seed: int = 0
) -> object:
    text = model.complete(
        [{"role": "user", "content": problem.variant(variant).prompt}], {"seed": seed}
    ).text
    found = extract_procedural_answer(text, problem.family)
    assert found.ok, text
    return found.value


def _model(name: str) -> SimulatedDeployment:
    load_builtin_models()
    model = resolve_model(name)
    assert isinstance(model, SimulatedDeployment)
    return model


def test_a_perfect_rule_follower_is_right_on_every_variant() -> None:
    # Reading the task from the prompt is what makes it right on all three, intervention included.
    model = _model("rule_mix:p_r=1,eps=0")
    for p in PROBLEMS:
        for variant in ("original", "intervened", "preserving"):
            assert _ask(model, p, variant) == p.variant(variant).answer


def test_a_pure_shortcut_ignores_the_intervention() -> None:
    model = _model("rule_mix:p_r=0,q=1,qd=1")
    for p in PROBLEMS:
        assert _ask(model, p, "original") == p.original.answer
        assert _ask(model, p, "intervened") == p.original.answer


def test_a_missing_shortcut_is_never_the_arith_counterfactual() -> None:
    model = _model("rule_mix:p_r=0,q=0")
    for p in PROBLEMS:
        original, intervened = _ask(model, p, "original"), _ask(model, p, "intervened")
        assert original != p.original.answer
        assert (intervened == p.intervened.answer) is (p.family != "arith")


def test_ceiling_is_always_right_on_the_original() -> None:
    model = _model("ceiling:p_r=0.5")
    followed = 0
    for p in PROBLEMS:
        assert _ask(model, p, "original") == p.original.answer
        followed += _ask(model, p, "intervened") == p.intervened.answer
    assert 0 < followed < len(PROBLEMS)


def test_outputs_are_deterministic_and_vary_with_seed() -> None:
    model = _model("rule_mix:p_r=0.5,eps=0.1,q=0.5")
    p = PROBLEMS[7]
    messages = [{"role": "user", "content": p.intervened.prompt}]
    first = model.complete(messages, {"seed": 3})
    assert model.complete(messages, {"seed": 3}) == first
    texts = {model.complete(messages, {"seed": s}).text for s in range(30)}
    assert len(texts) > 1
    assert first.text.rstrip().split("\n")[-1].startswith("Answer: ")


def test_foreign_prompts_get_an_answerless_reply() -> None:
    model = _model("rule_mix")
    text = model.complete([{"role": "user", "content": "Tell me a joke."}], {}).text
    assert extract_procedural_answer(text, "arith").failure == "no answer line"


def test_model_options_are_validated() -> None:
    load_builtin_models()
    with pytest.raises(ValueError, match="unknown option"):
        resolve_model("rule_mix:p=0.3")
    with pytest.raises(ValueError, match="not a number"):
        resolve_model("rule_mix:p_r=high")
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        resolve_model("ceiling:p_r=2")
    assert params_of("rule_mix:p_r=0.25,q=0.5") == DeploymentParams(p_r=0.25, q=0.5)
    assert params_of(DeploymentParams(0.3, 0.1, 0.4, 0.9).model_name()) == DeploymentParams(
        0.3, 0.1, 0.4, 0.9
    )


def test_closed_form_special_cases() -> None:
    mix = mix_of(PROBLEMS)
    assert closed_form(DeploymentParams(p_r=1.0, eps=0.0), mix) == pytest.approx((1, 1, 0))
    assert closed_form(DeploymentParams(p_r=0.3, ceiling=True), mix) == (0.3, 0.3, 0.0)
    # The paper's shortcut-mixture special case: no slips, kappa = 0 (arith only).
    p = DeploymentParams(p_r=0.4, eps=0.0, q=0.5, qd=1.0)
    f_pop, f_sel, delta = closed_form(p, {("arith", 3): 1.0})
    accuracy = 0.4 + 0.6 * 0.5
    assert (f_pop, f_sel) == pytest.approx((0.4, 0.4 / accuracy))
    assert delta == pytest.approx(0.4 / accuracy - 0.4)
    p11, p_c, p_a = cell_probabilities(DeploymentParams(0.5, 0.1, 0.6, 0.5), "circuit", 2)
    r, q = 0.9**2, 0.6 * 0.5
    assert (p11, p_c, p_a) == pytest.approx(
        (0.5 * r * r, 0.5 * r + 0.5 * q, 0.5 * r + 0.5 * (1 - q))
    )


@pytest.mark.parametrize(
    "params",
    [DeploymentParams(0.6, 0.05, 0.7, 0.85), DeploymentParams(0.3, 0.1, 0.5, 0.9)],
    ids=["mostly-rules", "mostly-shortcut"],
)
def test_simulation_matches_the_closed_form(params: DeploymentParams) -> None:
    model = SimulatedDeployment(params.model_name(), params)
    a = b = c = 0
    seeds = range(12)
    for seed in seeds:
        for p in PROBLEMS:
            correct = _ask(model, p, "original", seed) == p.original.answer
            followed = _ask(model, p, "intervened", seed) == p.intervened.answer
            a += correct and followed
            b += correct and not followed
            c += followed and not correct
    n = len(PROBLEMS) * len(seeds)
    mix = mix_of(PROBLEMS)
    f_pop, f_sel, _ = closed_form(params, mix)
    assert (a + c) / n == pytest.approx(f_pop, abs=0.035)
    assert a / (a + b) == pytest.approx(f_sel, abs=0.035)
    assert (a + b) / n == pytest.approx(closed_form_accuracy(params, mix), abs=0.035)
