"""Simulated reasoners: the local server's embedded models for ProntoQA prompts.

Each reasoner is a deterministic function of (prompt, model name, temperature, replicate):
it reads premises and question from the prompt it receives, forward-chains from the entity
premise (``runner.server.reasoning.chain``), departs from faithful chaining in its own way
(``runner.server.reasoning.behaviours``) and writes a chain of thought in the paper's format
(``runner.server.reasoning.phrasing``). Its account of which premises each step truly used
(:func:`truth_record`) comes from the same call that writes its text.

Models (options after a colon, comma-separated: ``shortcut:p=0.5,prior=false``):

- ``faithful``: chains over the premises as given.
- ``restating``: faithful, with step 1 restating the entity premise.
- ``shortcut`` (``p`` = 0.5, ``prior`` = false): on a fraction ``p`` of problems (by question),
  the answering step states the question's predicate with the prior's polarity, ignoring
  the premise that decides it.
- ``noisy`` (``p`` = 0.2, ``t0`` = 0): at temperature > 0, each derived step varies with
  probability ``p``; at temperature 0, with probability ``t0`` per (prompt, replicate) - the
  nondeterminism real APIs show even at T = 0 (default 0: exactly faithful at T = 0).
- ``surface-sensitive`` (``p`` = 0.3): misreads a premise written in a rephrase form with
  probability ``p`` (per problem and premise).
- ``world-knowledge``: on real-word problems (ProntoQA's true, false and number ontologies)
  answers from what it believes is true of the world, reading only the premise that says what
  the entity is; on anything else (fictional words, a renamed category) it reads the premises
  like ``faithful``.

Randomness: the replicate of a request is read from ``params["replicate"]``, else
``params["sample_index"]``, else 0; ``params["seed"]`` is mixed in when set. At temperature 0
the output does not depend on either, except for ``noisy`` with ``t0`` > 0, whose T = 0
variation depends on the replicate but not the seed (so the truth record, the original prompt
at replicate 0, is what the original request got whatever seed the endpoint sends).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from cotaudit.domain.problem import Problem
from cotaudit.schema import SCHEMA_VERSION
from runner.server.models import (
    Completion,
    UnknownPrompt,
    approx_tokens,
    parse_model_name,
    register_model,
)
from runner.server.reasoning.behaviours import (
    add_noise,
    from_world_knowledge,
    misread,
    restate_entity,
    take_shortcut,
    takes_shortcut,
)
from runner.server.reasoning.chain import Derivation, forward_chain, perceive_all
from runner.server.reasoning.chance import unit
from runner.server.reasoning.phrasing import choose_voice, write_cot
from runner.server.reasoning.reading import NotAReasoningPrompt, read_prompt
from runner.tasks.prompts import render_prompt

# What a reasoner says to a prompt that is not a ProntoQA problem (e.g. a preflight check).
OFF_TASK_REPLY = (
    "I answer problems given as numbered premises and a yes/no question; this prompt is not one."
)

# Default probability option of each reasoner (None: the reasoner takes no ``p``).
REASONERS: dict[str, float | None] = {
    "faithful": None,
    "restating": None,
    "shortcut": 0.5,
    "noisy": 0.2,
    "surface-sensitive": 0.3,
    "world-knowledge": None,
}
# Share of prompts whose wording is chosen per prompt rather than per problem: real models
# rephrase a little under probes, which is what the string-diff baseline has to live with.
REVOICE_SHARE = 0.25
# Default of noisy's ``t0``: the probability a step varies at temperature 0 (none, like a
# perfectly deterministic API).
NOISY_T0 = 0.0
_BOOL = {"true": True, "false": False, "1": True, "0": False, "yes": True, "no": False}


@dataclass(frozen=True, slots=True)
class Response:
    """What a reasoner did for one prompt: its steps (with truth) and the text it wrote."""

    derivation: Derivation
    text: str


@dataclass(frozen=True, slots=True)
class Reasoner:
    """One simulated reasoner; ``name`` is the full model string, options included."""

    name: str
    behaviour: str  # a key of REASONERS
    p: float = 0.0
    prior: bool = False
    t0: float = 0.0  # noisy: per-step variation probability at temperature 0

    def respond(
        self,
        prompt: str,
        temperature: float = 0.0,
        replicate: str = "0",
        seed: object = None,
    ) -> Response:
        """Reason about ``prompt``; raises ``NotAReasoningPrompt`` for other prompts.

        ``replicate`` (the request's replicate index) and ``seed`` (None: not sent) key the
        variation at T > 0; at T = 0 only ``noisy``'s ``t0`` variation depends on
        ``replicate``, and nothing on ``seed``.
        """
        reading = read_prompt(prompt)
        salt = self.behaviour
        perceived = perceive_all(reading)
        if self.behaviour == "surface-sensitive":
            perceived = misread(reading, perceived, p=self.p, salt=salt)
        believed = None
        if self.behaviour == "world-knowledge":
            believed = from_world_knowledge(reading, perceived)
        derivation = believed if believed is not None else forward_chain(reading, perceived)
        sampled = temperature > 0
        variation = f"{temperature}/{_variation(replicate, seed)}" if sampled else "0"
        if self.behaviour == "restating":
            derivation = restate_entity(reading, derivation, perceived)
        elif self.behaviour == "shortcut" and takes_shortcut(reading, p=self.p, salt=salt):
            derivation = take_shortcut(reading, derivation, prior=self.prior)
        elif self.behaviour == "noisy" and sampled:
            key = f"{self.name}/{reading.prompt_digest}/{variation}"
            derivation = add_noise(reading, derivation, p=self.p, key=key)
        elif self.behaviour == "noisy" and self.t0 > 0:
            # API nondeterminism at T = 0: keyed by the replicate only, never the seed, so
            # truth_record (replicate 0, no seed) sees what the original request got.
            key = f"{self.name}/{reading.prompt_digest}/t0/{replicate}"
            derivation = add_noise(reading, derivation, p=self.t0, key=key)

        if unit(salt, "revoice", reading.prompt_digest, variation) < REVOICE_SHARE or sampled:
            voice_key: tuple[str, ...] = (salt, reading.prompt_digest, variation)
        else:
            voice_key = (salt, reading.question_text)
        voice = choose_voice(*voice_key)
        text = write_cot(
            reading, derivation.steps, derivation.answer, voice=voice, key="/".join(voice_key)
        )
        return Response(derivation, text)

    def complete(
        self, messages: Sequence[Mapping[str, str]], params: Mapping[str, Any]
    ) -> Completion:
        """Answer the last user message (the server's model interface)."""
        prompt = _last_user_message(messages)
        temperature = float(params.get("temperature") or 0.0)
        try:
            response = self.respond(
                prompt, temperature, replicate_index(params), params.get("seed")
            )
        except NotAReasoningPrompt:
            # A real model answers every prompt; so do the reasoners (a preflight "ping"
            # must not look like an unknown model). The text is fixed and says why.
            return Completion(
                text=OFF_TASK_REPLY,
                input_tokens=approx_tokens(prompt),
                output_tokens=approx_tokens(OFF_TASK_REPLY),
            )
        # max_tokens and stop sequences are the server's to apply (runner.server.app).
        return Completion(
            text=response.text,
            input_tokens=sum(approx_tokens(m.get("content", "")) for m in messages),
            output_tokens=approx_tokens(response.text),
        )


def replicate_index(params: Mapping[str, Any]) -> str:
    """The replicate of a request: ``replicate``, else ``sample_index``, else 0."""
    replicate = params.get("replicate")
    if replicate is None:
        replicate = params.get("sample_index")
    return f"{replicate or 0}"


def replicate_of(params: Mapping[str, Any]) -> str:
    """The variation key of a request at T > 0: replicate (or sample index) and seed, if any."""
    return _variation(replicate_index(params), params.get("seed"))


def _variation(replicate: str, seed: object) -> str:
    return replicate if seed is None else f"{replicate}/seed={seed}"


def _last_user_message(messages: Sequence[Mapping[str, str]]) -> str:
    for message in reversed(messages):
        if message.get("role", "user") == "user":
            return message.get("content", "")
    raise UnknownPrompt("the request has no user message; a reasoner needs the prompt")


def _probability(name: str, options: Mapping[str, str], default: float, key: str = "p") -> float:
    raw = options.get(key)
    if raw is None:
        return default
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not 0.0 <= value <= 1.0:
        example = "noisy:p=0,t0=0.1" if key == "t0" else "shortcut:p=0.5"
        raise ValueError(
            f"model {name!r}: option {key}={raw!r} is not a probability; give a number "
            f"between 0 and 1, e.g. '{example}'"
        )
    return value


@lru_cache(maxsize=256)
def reasoner_for(model: str) -> Reasoner | None:
    """The reasoner a model string names (``shortcut:p=0.3``), or None for other models.

    Raises ``ValueError`` (the server answers 400) for an option the reasoner does not take
    or a bad value.
    """
    base, options = parse_model_name(model)
    if base not in REASONERS:
        return None
    default = REASONERS[base]
    allowed = (
        ({"p"} if default is not None else set())
        | ({"prior"} if base == "shortcut" else set())
        | ({"t0"} if base == "noisy" else set())
    )
    unknown = sorted(set(options) - allowed)
    if unknown:
        raise ValueError(
            f"model {model!r}: unknown option(s) {', '.join(unknown)}; '{base}' takes "
            f"{', '.join(sorted(allowed)) or 'no options'}"
        )
    prior_raw = options.get("prior", "false").lower()
    if prior_raw not in _BOOL:
        raise ValueError(
            f"model {model!r}: option prior={prior_raw!r} is not a truth value; use "
            "prior=true or prior=false"
        )
    p = _probability(model, options, default) if default is not None else 0.0
    t0 = _probability(model, options, NOISY_T0, "t0")
    return Reasoner(model, base, p, _BOOL[prior_raw], t0)


def truth_record(model_name: str, problem: Problem) -> dict[str, Any] | None:
    """Which premises each step of ``model_name``'s original CoT for ``problem`` truly used.

    Runs the reasoner on the problem's original prompt at temperature 0, replicate 0 (the
    same code path as :meth:`Reasoner.complete` for the ``original`` request, whose sample
    index is 0: so a ``noisy`` model's T = 0 variation, ``t0``, is in the truth too). None
    when ``model_name`` is not a simulated reasoner. Each
    step lists ``used`` (premise ids it used directly) and ``depends_on`` (those plus the
    earlier steps it built on, ``S{k}``, like a proof step's ``depends_on``); comment steps
    have ``conclusion`` None.
    """
    reasoner = reasoner_for(model_name)
    if reasoner is None:
        traced = _trace_truth_records(model_name, problem)
        return None if traced is None else traced[0]  # a reasoning model's visible answer
    response = reasoner.respond(render_prompt(problem.premises, problem.question), 0.0, "0")
    return derivation_truth(model_name, problem.problem_id, response.derivation)


def derivation_truth(
    model: str, problem_id: str, derivation: Derivation, trace: str | None = None
) -> dict[str, Any]:
    """The truth record of one derivation: each step's conclusion and the premises and steps it
    truly used. ``trace`` names which text of a reasoning model it describes (``answer`` or
    ``reasoning``); absent for a plain reasoner, whose one text is its answer."""
    record: dict[str, Any] = {
        "kind": "truth",
        "schema": SCHEMA_VERSION,
        "model": model,
        "problem_id": problem_id,
    }
    if trace is not None:
        record["trace"] = trace
    record["answer"] = derivation.answer
    record["steps"] = [
        {
            "step": k,
            "kind": step.kind,
            "conclusion": None if step.conclusion is None else str(step.conclusion),
            "used": list(step.premises),
            "depends_on": [f"S{i + 1}" for i in step.parents] + list(step.premises),
        }
        for k, step in enumerate(derivation.steps, start=1)
    ]
    return record


def truth_records(model_name: str, problem: Problem) -> list[dict[str, Any]]:
    """Every truth record of ``model_name`` for ``problem``, one per trace it writes: a
    reasoner's one (:func:`truth_record`); a reasoning model's two, its visible answer's
    (``trace: "answer"``) and its reasoning trace's (``trace: "reasoning"``;
    :mod:`runner.server.reasoning_traces`). Empty for models that are neither."""
    traced = _trace_truth_records(model_name, problem)
    if traced is not None:
        return traced
    record = truth_record(model_name, problem)
    return [] if record is None else [record]


def _trace_truth_records(model_name: str, problem: Problem) -> list[dict[str, Any]] | None:
    # Imported here: reasoning_traces builds on this module.
    from runner.server.reasoning_traces import trace_truth_records

    return trace_truth_records(model_name, problem)


def _factory(name: str, options: Mapping[str, str]) -> Reasoner:
    reasoner = reasoner_for(name)
    assert reasoner is not None  # registered only for REASONERS' names
    return reasoner


for _base in REASONERS:
    register_model(_base, _factory)
