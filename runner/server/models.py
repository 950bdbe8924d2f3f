"""Models the local server can serve, looked up by the request's ``model`` string.

A model is a pure, deterministic function of (messages, params, model name); the server
adds latency, rate limits and faults around it. Model names may carry options after a
colon (``shortcut:p=0.5``); the part before the colon selects the factory.

Modules that define models register them at import time; ``load_builtin_models`` imports
them all so that the server and the CLI see the same set.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol


@dataclass(frozen=True, slots=True)
class Reasoning:
    """A reasoning trace a model returns apart from its answer text (a reasoning model's).

    ``field`` says how the OpenAI route returns it: ``message.reasoning_content`` (vLLM,
    DeepSeek), ``message.reasoning`` (newer servers), or None: hidden, only counted in
    ``completion_tokens_details.reasoning_tokens`` (OpenAI's own reasoning models). The
    Anthropic route returns it as a ``thinking`` block (signed), or as ``redacted_thinking``
    when ``field`` is None. See docs/server.md, "Reasoning models".
    """

    text: str
    tokens: int
    field: str | None = "reasoning_content"


@dataclass(frozen=True, slots=True)
class Completion:
    text: str
    finish_reason: str = "stop"  # OpenAI vocabulary; the Anthropic route maps it
    input_tokens: int = 0
    # Every output token, a reasoning trace's included (what providers bill and limit).
    output_tokens: int = 0
    reasoning: Reasoning | None = None


class UnknownPrompt(Exception):
    """The model has no answer for this prompt (replay): the server answers 404."""


class UnknownModel(ValueError):
    """A factory knows the base name but has no such model (``replay:model=X`` where the
    recordings hold none of ``X``): the server answers 404 with this message, as for a name
    no factory knows. A ValueError, so that callers treating bad options as errors still do."""


class Model(Protocol):
    def complete(
        self, messages: Sequence[Mapping[str, str]], params: Mapping[str, Any]
    ) -> Completion: ...


# factory(name, options) -> Model; ``options`` are the key=value pairs after the colon.
ModelFactory = Callable[[str, Mapping[str, str]], Model]

_FACTORIES: dict[str, ModelFactory] = {}
_BUILTIN_MODULES = (
    "runner.server.echo_model",
    "runner.server.reasoners",
    "runner.server.replay",
    "runner.server.deployments",
    "runner.server.reasoning_traces",
)


def register_model(base_name: str, factory: ModelFactory) -> None:
    _FACTORIES[base_name] = factory


def load_builtin_models() -> None:
    for module in _BUILTIN_MODULES:
        importlib.import_module(module)  # each registers its models on import


def parse_model_name(model: str) -> tuple[str, dict[str, str]]:
    base, _, rest = model.partition(":")
    options: dict[str, str] = {}
    for part in filter(None, rest.split(",")):
        key, _, value = part.partition("=")
        options[key.strip()] = value.strip()
    return base, options


def resolve_model(model: str) -> Model | None:
    """The model for a request's ``model`` string, or None when no factory knows it.

    Raises ``UnknownModel`` when the factory has no such model, ``ValueError`` for options
    it does not take."""
    base, options = parse_model_name(model)
    factory = _FACTORIES.get(base)
    return None if factory is None else factory(model, options)


class ModelRefused(Exception):
    """Why a request's model name gets no model: the status the routes answer with (404: no
    such model; 400: options its factory does not take) and the message, naming the model
    as the request did."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def model_for_request(name: str, cache: dict[str, Model], *, loaded: str | None = None) -> Model:
    """The model that answers a request naming ``name``: the ``loaded`` one when set (as
    llama.cpp's server does, it answers whatever name is asked for), else what ``name``
    resolves to. ``cache`` holds the models resolved so far, by the name resolved (a replay
    model indexes its recordings once). Raises :class:`ModelRefused`.

    The one resolution the online routes and the batch items share, so both answer a name
    with the same model and the same errors."""
    resolved = loaded or name
    model = cache.get(resolved)
    if model is not None:
        return model
    try:
        model = resolve_model(resolved)
    except UnknownModel as exc:
        raise ModelRefused(404, f"model {name!r} not found: {exc}") from None
    except ValueError as exc:
        raise ModelRefused(400, f"bad model options in {name!r}: {exc}") from None
    if model is None:
        known = ", ".join(known_models())
        raise ModelRefused(404, f"model {name!r} not found; known models: {known}")
    cache[resolved] = model
    return model


def known_models() -> list[str]:
    return sorted(_FACTORIES)


def approx_tokens(text: str) -> int:
    """Token count the simulated models report: ~4 characters per token."""
    return max(1, len(text) // 4)
