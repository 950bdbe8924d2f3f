"""Simulated deployments for the selection study (docs/selection.md), with closed forms.

Two models are registered with the local server:

- ``rule_mix:p_r=0.6,eps=0.03,q=0.7,qd=0.85`` - a reasoner that reads the procedural task from
  the prompt and, per task, *follows the rules* with probability ``p_r`` or otherwise takes a
  *shortcut*. A rule follower works the task out (applying the intervention line when there is
  one) and slips with probability ``1 - (1 - eps)**s`` per prompt, ``s`` being the task's
  difficulty (= its stratum); a slip always makes its answer wrong. The shortcut ignores the
  intervention line and answers from a surface guess that is right with probability
  ``q_s = q * qd**(s - 1)``; a wrong guess is a near miss (arith: off by 1..3, never the
  counterfactual) or, for yes/no families, the other value - which *is* the counterfactual
  answer (``kappa = 1`` for circuit and reachability, ``0`` for arith).
- ``ceiling:p_r=1.0`` - always right on the original task; follows the intervention with
  probability ``p_r`` and otherwise answers the original task again.

Which branch a task takes is keyed by (model name, ``seed`` param, the prompt without its
intervention line), so the original and intervened prompts of one problem share the mode and
the shortcut's guess, while the slips of the two prompts are independent draws.
Everything is a deterministic function of (prompt, model name, seed).

Closed forms, per (family, stratum) cell with ``r = (1 - eps)**s``:
``P(A=1, C=1) = p_r r^2``, ``P(C=1) = p_r r + (1 - p_r) q_s``,
``P(A=1) = p_r r + (1 - p_r) kappa (1 - q_s)``; for a mixture with weights ``w`` these are
averaged, and ``F_pop = P(A=1)``, ``F_sel = P(A=1, C=1) / P(C=1)``, ``Delta = F_sel - F_pop``.
For the ceiling: ``F_pop = F_sel = p_r``, ``Delta = 0``. See :func:`closed_form`.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, NamedTuple

from cotaudit.domain.procedural_answers import Answer
from runner.server.models import Completion, approx_tokens, register_model
from runner.tasks.procedural import FAMILIES, family_of_prompt
from runner.tasks.procedural.common import (
    ProceduralProblem,
    PromptError,
    format_answer,
    split_intervention,
)

KAPPA: dict[str, float] = {"arith": 0.0, "circuit": 1.0, "reachability": 1.0}
_OPTIONS = ("p_r", "eps", "q", "qd")


@dataclass(frozen=True, slots=True)
class DeploymentParams:
    """Parameters of a simulated deployment (all probabilities in [0, 1])."""

    p_r: float = 0.6  # probability of following the rules on a task
    eps: float = 0.03  # per-operation slip probability of a rule follower
    q: float = 0.7  # shortcut hit rate at stratum 1
    qd: float = 0.85  # factor on the shortcut hit rate per extra operation
    ceiling: bool = False  # always right on the original task

    def __post_init__(self) -> None:
        for name in _OPTIONS:
            value = getattr(self, name)
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"deployment option {name} must be in [0, 1], got {value!r}")

    def rule_accuracy(self, stratum: int) -> float:
        return (1.0 - self.eps) ** stratum

    def shortcut_accuracy(self, stratum: int) -> float:
        return self.q * self.qd ** (stratum - 1)

    def model_name(self) -> str:
        if self.ceiling:
            return f"ceiling:p_r={self.p_r:g}"
        return f"rule_mix:p_r={self.p_r:g},eps={self.eps:g},q={self.q:g},qd={self.qd:g}"


class ClosedForm(NamedTuple):
    f_pop: float
    f_sel: float
    delta: float


def cell_probabilities(params: DeploymentParams, family: str, stratum: int) -> tuple[float, ...]:
    """``(P(A=1, C=1), P(C=1), P(A=1))`` for one (family, stratum) cell."""
    if params.ceiling:
        return params.p_r, 1.0, params.p_r
    r = params.rule_accuracy(stratum)
    q = params.shortcut_accuracy(stratum)
    kappa = KAPPA[family]
    p11 = params.p_r * r * r
    p_c = params.p_r * r + (1.0 - params.p_r) * q
    p_a = params.p_r * r + (1.0 - params.p_r) * kappa * (1.0 - q)
    return p11, p_c, p_a


def closed_form(params: DeploymentParams, mix: Mapping[tuple[str, int], float]) -> ClosedForm:
    """``(F_pop, F_sel, Delta)`` of ``params`` on a mixture of (family, stratum) cells.

    ``mix`` weights need not sum to 1 (they are normalised); see :func:`mix_of`.
    """
    total = sum(mix.values())
    if total <= 0:
        raise ValueError("the stratum mix has no positive weight")
    if params.ceiling:
        return ClosedForm(params.p_r, params.p_r, 0.0)
    p11 = p_c = p_a = 0.0
    for (family, stratum), weight in mix.items():
        c11, cc, ca = cell_probabilities(params, family, stratum)
        p11 += weight / total * c11
        p_c += weight / total * cc
        p_a += weight / total * ca
    f_sel = p11 / p_c
    return ClosedForm(p_a, f_sel, f_sel - p_a)


def closed_form_accuracy(params: DeploymentParams, mix: Mapping[tuple[str, int], float]) -> float:
    """``P(C=1)`` of ``params`` on the mixture."""
    total = sum(mix.values())
    return sum(w / total * cell_probabilities(params, f, s)[1] for (f, s), w in mix.items())


def mix_of(problems: Iterable[ProceduralProblem]) -> dict[tuple[str, int], float]:
    """Empirical (family, stratum) weights of a problem set."""
    counts = Counter((p.family, p.stratum) for p in problems)
    n = sum(counts.values())
    return {k: v / n for k, v in counts.items()}


@lru_cache(maxsize=8192)
def _read(family: str, base: str, intervention: str | None) -> tuple[Any, Any, int]:
    """``(task, task with the intervention applied, difficulty)``; cached because every
    deployment and seed reads the same few prompts (tasks are frozen dataclasses)."""
    module = FAMILIES[family]
    task = module.parse(base)
    effective = task if intervention is None else module.apply_intervention(task, intervention)
    return task, effective, int(module.difficulty(task))


def _unit(*parts: object) -> float:
    """A uniform draw in [0, 1) that is a pure function of ``parts``."""
    digest = hashlib.sha256("\x1f".join(map(str, parts)).encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") / 2.0**64


def _completion(messages: Sequence[Mapping[str, str]], text: str) -> Completion:
    return Completion(
        text=text,
        input_tokens=sum(approx_tokens(m.get("content", "")) for m in messages),
        output_tokens=approx_tokens(text),
    )


class SimulatedDeployment:
    """The ``rule_mix`` / ``ceiling`` model; see the module docstring."""

    def __init__(self, name: str, params: DeploymentParams) -> None:
        self.name = name
        self.params = params

    def complete(
        self, messages: Sequence[Mapping[str, str]], params: Mapping[str, Any]
    ) -> Completion:
        prompt = next(
            (m.get("content", "") for m in reversed(messages) if m.get("role") == "user"), ""
        )
        family = family_of_prompt(prompt)
        if family is None:
            return _completion(messages, "I can only work on the procedural study's tasks.")
        try:
            text = self._answer(family, prompt, params.get("seed"))
        except PromptError as exc:
            text = f"I could not read this task ({exc})."
        return _completion(messages, text)

    def _answer(self, family: str, prompt: str, seed: object) -> str:
        module = FAMILIES[family]
        base, intervention = split_intervention(prompt)
        task, effective, stratum = _read(family, base, intervention)
        key = (self.name, 0 if seed is None else seed, base)
        p = self.params
        follows = _unit(*key, "mode") < p.p_r
        if p.ceiling:
            target = effective if follows else task
            return self._worked(family, target, None, intervention if follows else None)
        if follows:
            slipped = _unit(*key, intervention or "-", "slip") >= p.rule_accuracy(stratum)
            return self._worked(
                family,
                effective,
                _unit(*key, intervention or "-", "where") if slipped else None,
                intervention,
            )
        original: Answer = module.solve(task)
        if _unit(*key, "guess") < p.shortcut_accuracy(stratum):
            guess = original
        else:
            guess = self._near_miss(family, original, module.solve(effective), key)
        shown = format_answer(family, guess)
        return (
            "This looks like a familiar pattern; without working through every line, "
            f"the result should be {shown}.\n\nAnswer: {shown}"
        )

    @staticmethod
    def _near_miss(
        family: str, original: Answer, counterfactual: Answer, key: tuple[object, ...]
    ) -> Answer:
        if family != "arith":
            return not original
        step = (1 + int(_unit(*key, "miss") * 3)) * (1 if _unit(*key, "sign") < 0.5 else -1)
        guess = int(original) + step
        # The shortcut never lands on the counterfactual: it ignores the intervention.
        return guess if guess != counterfactual else int(original) + 2 * step

    @staticmethod
    def _worked(family: str, task: Any, slip: float | None, intervention: str | None) -> str:
        module = FAMILIES[family]
        lines = []
        if intervention is not None:
            lines.append(f"First I apply the intervention: {intervention}")
        if family == "arith":
            n_steps = len(module.ancestors(task))
            at = None if slip is None else int(slip * n_steps)
            delta = 0 if slip is None else (1 + int(slip * 1000) % 3)
            lines += module.worked_steps(task, at, delta)
            answer: Answer = module.derived_answer(task, at, delta)
        elif family == "circuit":
            at = None if slip is None else int(slip * len(module.ancestors(task)))
            lines += module.worked_steps(task, at)
            answer = module.derived_answer(task, at)
        else:
            steps, answer = module.worked_steps(task, slip is not None)
            lines += steps
        shown = format_answer(family, answer)
        return "\n".join([*lines, "", f"Answer: {shown}"])


def _float_option(options: Mapping[str, str], key: str, default: float, model: str) -> float:
    raw = options.get(key)
    if raw is None:
        return default
    try:
        return float(raw)
    except ValueError:
        raise ValueError(f"model {model!r}: option {key}={raw!r} is not a number") from None


def _factory(ceiling: bool) -> Any:
    def build(name: str, options: Mapping[str, str]) -> SimulatedDeployment:
        allowed = ("p_r",) if ceiling else _OPTIONS
        unknown = sorted(set(options) - set(allowed))
        if unknown:
            raise ValueError(
                f"model {name!r}: unknown option(s) {', '.join(unknown)}; "
                f"accepted: {', '.join(allowed)}"
            )
        defaults = DeploymentParams(p_r=1.0) if ceiling else DeploymentParams()
        params = DeploymentParams(
            **{k: _float_option(options, k, getattr(defaults, k), name) for k in allowed},
            ceiling=ceiling,
        )
        return SimulatedDeployment(name, params)

    return build


def params_of(model: str) -> DeploymentParams:
    """The parameters a ``rule_mix:...`` or ``ceiling:...`` model name stands for."""
    from runner.server.models import parse_model_name

    base, options = parse_model_name(model)
    if base not in ("rule_mix", "ceiling"):
        raise ValueError(f"{model!r} is not a simulated deployment (rule_mix or ceiling)")
    deployment: SimulatedDeployment = _factory(base == "ceiling")(model, options)
    return deployment.params


register_model("rule_mix", _factory(False))
register_model("ceiling", _factory(True))
