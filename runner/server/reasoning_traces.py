"""A simulated reasoning model: a hidden reasoning trace beside a visible chain of thought.

``thinker`` answers a ProntoQA prompt as reasoning models do: a reasoning trace first, then
the answer text (a chain of thought in the paper's ``Step k:`` format). Each of the two is
written by one of the simulated reasoners (:mod:`runner.server.reasoners`), chosen apart, so
the trace and the visible answer can differ in which premises they use: e.g. a faithful
trace behind a visible shortcut (``thinker:trace=faithful,answer=shortcut,p=1``) or the
reverse. :func:`trace_truth_records` gives the truth of *each* trace, from the same calls
that write them.

Options (after a colon, comma-separated; docs/server.md, "Reasoning models"):

- ``trace`` (default ``faithful``), ``answer`` (default: the trace's): the reasoner behind
  each; one of :data:`runner.server.reasoners.REASONERS`.
- ``p``, ``prior``, ``t0``: the behaviours' options, given to whichever reasoner takes them;
  ``trace_p`` / ``answer_p`` set ``p`` for one of them.
- ``form``: how the trace is returned. ``reasoning_content`` (default: vLLM's and DeepSeek's
  ``message.reasoning_content``; an Anthropic ``thinking`` block), ``reasoning`` (the newer
  ``message.reasoning``), ``hidden`` (not returned, only counted, as OpenAI's reasoning models
  do; an Anthropic ``redacted_thinking`` block), ``inline`` (``<think>...</think>`` at the
  start of the answer text, as a server without a reasoning parser returns it).
- ``style``: ``prose`` (default: the trace is sentences, one per step, then "So the answer
  is True."; truth step k is sentence k) or ``steps`` (``Step k:`` lines and ``Answer:``, as
  the visible answer).
- ``strict_params``: ``true`` makes the OpenAI route refuse what OpenAI's reasoning models
  refuse (``max_tokens``; ``temperature`` / ``top_p`` other than 1; see
  :mod:`runner.server.validation`). Default ``false``.

Thinking off: an Anthropic request without ``thinking`` enabled, and an OpenAI request with
``reasoning_effort: "none"`` or ``chat_template_kwargs: {"enable_thinking": false}``, get
the visible answer only, as hybrid reasoning models answer then.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from cotaudit.domain.problem import Problem
from runner.server.models import (
    Completion,
    Reasoning,
    UnknownPrompt,
    approx_tokens,
    parse_model_name,
    register_model,
)
from runner.server.reasoners import (
    OFF_TASK_REPLY,
    REASONERS,
    Reasoner,
    Response,
    derivation_truth,
    reasoner_for,
    replicate_index,
)
from runner.server.reasoning.chain import Derivation
from runner.server.reasoning.chance import Dice
from runner.server.reasoning.phrasing import choose_voice, write_step
from runner.server.reasoning.reading import NotAReasoningPrompt, read_prompt
from runner.server.validation import ParamRules, register_param_rules
from runner.tasks.prompts import render_prompt

THINKER = "thinker"
FORMS = ("reasoning_content", "reasoning", "hidden", "inline")
STYLES = ("prose", "steps")
_FIELDS: dict[str, str | None] = {
    "reasoning_content": "reasoning_content",
    "reasoning": "reasoning",
    "hidden": None,
}
_OPTIONS = frozenset(
    {"trace", "answer", "p", "trace_p", "answer_p", "prior", "t0", "form", "style"}
    | {"strict_params"}
)
_BOOL = {"true": True, "false": False, "1": True, "0": False, "yes": True, "no": False}
# What the trace says to a prompt that is not a ProntoQA problem (a preflight "ping").
OFF_TASK_TRACE = "The prompt is not a list of premises with a yes/no question, so I say so."


@dataclass(frozen=True, slots=True)
class Traces:
    """What a thinker wrote for one prompt: the trace and the visible answer, with the
    derivation behind each (None for an off-task prompt)."""

    trace_text: str
    answer_text: str
    trace: Derivation | None
    answer: Derivation | None


@dataclass(frozen=True, slots=True)
class Thinker:
    """One simulated reasoning model; ``name`` is the full model string, options included."""

    name: str
    trace: Reasoner
    answer: Reasoner
    form: str = "reasoning_content"
    style: str = "prose"
    strict_params: bool = False

    def respond(
        self, prompt: str, temperature: float = 0.0, replicate: str = "0", seed: object = None
    ) -> Traces:
        """Write the trace and the answer for ``prompt`` (the reasoners' randomness rules)."""
        try:
            visible = self.answer.respond(prompt, temperature, replicate, seed)
            hidden = self.trace.respond(prompt, temperature, replicate, seed)
        except NotAReasoningPrompt:
            return Traces(OFF_TASK_TRACE, OFF_TASK_REPLY, None, None)
        return Traces(
            self._write_trace(prompt, hidden), visible.text, hidden.derivation, visible.derivation
        )

    def _write_trace(self, prompt: str, hidden: Response) -> str:
        if self.style == "steps":
            return hidden.text
        reading = read_prompt(prompt)
        key = ("trace", self.trace.behaviour, reading.question_text)
        voice = choose_voice(*key)
        dice = Dice("/".join(key))
        derivation = hidden.derivation
        sentences = [
            write_step(reading, step, k, voice, dice)
            for k, step in enumerate(derivation.steps, start=1)
        ]
        sentences.append(f"So the answer is {'True' if derivation.answer else 'False'}.")
        return " ".join(sentences)

    def complete(
        self, messages: Sequence[Mapping[str, str]], params: Mapping[str, Any]
    ) -> Completion:
        """Answer the last user message (the server's model interface)."""
        prompt = _last_user_message(messages)
        traces = self.respond(
            prompt,
            float(params.get("temperature") or 0.0),
            replicate_index(params),
            params.get("seed"),
        )
        input_tokens = sum(approx_tokens(m.get("content", "")) for m in messages)
        answer = traces.answer_text
        if params.get("thinking") == "off":
            return Completion(
                answer, input_tokens=input_tokens, output_tokens=approx_tokens(answer)
            )
        if self.form == "inline":
            text = f"<think>\n{traces.trace_text}\n</think>\n\n{answer}"
            return Completion(text, input_tokens=input_tokens, output_tokens=approx_tokens(text))
        trace_tokens = approx_tokens(traces.trace_text)
        return Completion(
            answer,
            input_tokens=input_tokens,
            output_tokens=trace_tokens + approx_tokens(answer),
            reasoning=Reasoning(traces.trace_text, trace_tokens, _FIELDS[self.form]),
        )


def _last_user_message(messages: Sequence[Mapping[str, str]]) -> str:
    for message in reversed(messages):
        if message.get("role", "user") == "user":
            return message.get("content", "")
    raise UnknownPrompt("the request has no user message; a reasoning model needs the prompt")


def _choice(model: str, options: Mapping[str, str], key: str, allowed: Sequence[str]) -> str:
    value = options.get(key, allowed[0])
    if value not in allowed:
        raise ValueError(
            f"model {model!r}: option {key}={value!r} is not one of "
            f"{', '.join(dict.fromkeys(allowed))}"  # the default leads, and may repeat
        )
    return value


def _flag(model: str, options: Mapping[str, str], key: str) -> bool:
    raw = options.get(key, "false").lower()
    if raw not in _BOOL:
        raise ValueError(
            f"model {model!r}: option {key}={raw!r} is not a truth value; use {key}=true or "
            f"{key}=false"
        )
    return _BOOL[raw]


def _reasoner(model: str, role: str, behaviour: str, options: Mapping[str, str]) -> Reasoner:
    """The reasoner behind one trace, with the options its behaviour takes."""
    takes = {
        "p": REASONERS[behaviour] is not None,
        "prior": behaviour == "shortcut",
        "t0": behaviour == "noisy",
    }
    given = {key: options[key] for key in ("p", "prior", "t0") if key in options and takes[key]}
    if f"{role}_p" in options:
        if not takes["p"]:
            raise ValueError(f"model {model!r}: option {role}_p: '{behaviour}' takes no p")
        given["p"] = options[f"{role}_p"]
    spec = behaviour + (":" + ",".join(f"{k}={v}" for k, v in given.items()) if given else "")
    reasoner = reasoner_for(spec)
    assert reasoner is not None  # behaviour is a key of REASONERS
    # Named per role, so that two noisy traces of one thinker vary independently.
    return dataclasses.replace(reasoner, name=f"{model}#{role}")


@lru_cache(maxsize=256)
def thinker_for(model: str) -> Thinker | None:
    """The thinker a model string names (``thinker:trace=faithful,answer=shortcut``), or None
    for other models. Raises ``ValueError`` (the server answers 400) for a bad option."""
    base, options = parse_model_name(model)
    if base != THINKER:
        return None
    unknown = sorted(set(options) - _OPTIONS)
    if unknown:
        raise ValueError(
            f"model {model!r}: unknown option(s) {', '.join(unknown)}; '{THINKER}' takes "
            f"{', '.join(sorted(_OPTIONS))}"
        )
    behaviours = tuple(REASONERS)
    trace = _choice(model, options, "trace", ("faithful", *behaviours))
    answer = _choice(model, options, "answer", (trace, *behaviours))
    for key in ("p", "prior", "t0"):
        if key in options and key not in _used_options(trace) | _used_options(answer):
            raise ValueError(
                f"model {model!r}: option {key} is taken by neither trace={trace} nor "
                f"answer={answer}"
            )
    return Thinker(
        name=model,
        trace=_reasoner(model, "trace", trace, options),
        answer=_reasoner(model, "answer", answer, options),
        form=_choice(model, options, "form", FORMS),
        style=_choice(model, options, "style", STYLES),
        strict_params=_flag(model, options, "strict_params"),
    )


def _used_options(behaviour: str) -> set[str]:
    used = {"p"} if REASONERS[behaviour] is not None else set()
    if behaviour == "shortcut":
        used.add("prior")
    if behaviour == "noisy":
        used.add("t0")
    return used


def trace_truth_records(model_name: str, problem: Problem) -> list[dict[str, Any]] | None:
    """The truth of each trace of a thinker's original answer to ``problem``: first the
    visible answer's (``trace: "answer"``), then the reasoning trace's (``trace:
    "reasoning"``; step k is sentence k of a prose trace, ``Step k`` of a steps one).

    Computed as :func:`runner.server.reasoners.truth_record` computes a reasoner's: the
    original prompt at temperature 0, replicate 0. None when ``model_name`` is not a thinker.
    """
    thinker = thinker_for(model_name)
    if thinker is None:
        return None
    traces = thinker.respond(render_prompt(problem.premises, problem.question), 0.0, "0")
    assert traces.answer is not None and traces.trace is not None  # a rendered problem
    return [
        derivation_truth(model_name, problem.problem_id, traces.answer, "answer"),
        derivation_truth(model_name, problem.problem_id, traces.trace, "reasoning"),
    ]


def _rules(name: str, options: Mapping[str, str]) -> ParamRules:
    thinker = thinker_for(name)
    return ParamRules(reasoning_params=thinker is not None and thinker.strict_params)


def _factory(name: str, options: Mapping[str, str]) -> Thinker:
    thinker = thinker_for(name)
    assert thinker is not None  # registered for THINKER only
    return thinker


register_model(THINKER, _factory)
register_param_rules(THINKER, _rules)
