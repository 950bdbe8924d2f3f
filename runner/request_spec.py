"""Planned requests: what an endpoint is sent, its id and its cache key.

A :class:`RequestSpec` is the request half of a ``response`` record (its
:meth:`~RequestSpec.to_record` is a ``request`` record of ``cotaudit.schema``); the record
kinds themselves are the contract in ``cotaudit.schema``. This module is pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from cotaudit.schema import SCHEMA_VERSION, JSONDict, Message, canonical_json, sha256_hex


@dataclass(frozen=True, slots=True)
class EndpointIdentity:
    """What a task needs to know about an endpoint to build requests for it.

    ``cache_identity`` stands for the server in cache keys: the base URL for remote
    providers, ``"local"`` for the embedded server (its port changes from run to run, its
    models do not). ``params`` are the endpoint's output-affecting defaults (``max_tokens``,
    ``top_p``, ``seed``, ``stop``); a task sets ``temperature`` per request. ``unsent``
    names the params the endpoint's requests do not carry (``EndpointConfig.unsent_params``):
    they are recorded as null, and still enter the cache key.
    """

    name: str
    provider: str  # "openai" | "anthropic" | "local"
    model: str
    host: str  # netloc of the base URL; never carries a key
    cache_identity: str
    params: Mapping[str, Any] = field(default_factory=dict)
    # Endpoint settings beyond the sampling params that change what a model writes
    # (``revision``, ``reasoning_effort``, ``thinking_budget``, ``omit_sampling``,
    # ``extra_body``); only the ones set, so an endpoint without any keeps its old cache keys.
    output_options: Mapping[str, Any] = field(default_factory=dict)
    unsent: tuple[str, ...] = ()

    def model_record(self) -> JSONDict:
        return {"provider": self.provider, "model": self.model, "host": self.host}


class RequestSpec(NamedTuple):
    """One planned request: everything needed to send it, cache it and evaluate it later."""

    request_id: str
    cache_key: str
    endpoint: str
    task: str
    problem_id: str
    condition: str
    target_premise: str | None
    sample_index: int
    probe: JSONDict | None  # {"substitution": {...}} or {"rephrase": {...}} or task-specific
    messages: tuple[Message, ...]
    params: JSONDict  # temperature, top_p, max_tokens, seed, stop as sent (None: not sent)
    model: JSONDict  # {"provider", "model", "host"}

    def estimated_input_tokens(self) -> int:
        """A cheap, provider-independent estimate: ~4 characters per token."""
        return max(1, sum(len(m.get("content", "")) for m in self.messages) // 4)

    def to_record(self) -> JSONDict:
        """The request half of a ``response`` record (also what ``cotaudit plan`` writes)."""
        return {
            "kind": "request",
            "schema": SCHEMA_VERSION,
            "request_id": self.request_id,
            "cache_key": self.cache_key,
            "endpoint": self.endpoint,
            "task": self.task,
            "problem_id": self.problem_id,
            "condition": self.condition,
            "target_premise": self.target_premise,
            "sample_index": self.sample_index,
            "probe": self.probe,
            "messages": list(self.messages),
            "params": self.params,
            "model": self.model,
        }


def request_id_for(
    endpoint: str, problem_id: str, condition: str, target_premise: str | None, sample_index: int
) -> str:
    """Deterministic, readable id of a planned request, unique within a run."""
    return f"{endpoint}/{problem_id}/{condition}/{target_premise or '-'}/{sample_index}"


def cache_key_for(
    endpoint: EndpointIdentity,
    messages: Sequence[Message],
    params: Mapping[str, Any],
    replicate: int,
) -> str:
    """SHA-256 of exactly what changes the output.

    Included: provider kind, server identity, model, messages, output-affecting params and
    the replicate index (so the 5 samples of a prompt at T=0.7 are 5 entries), and the
    endpoint's ``output_options`` where any is set (``revision``, reasoning settings,
    ``extra_body``). Never keys, timeouts, retries, concurrency, the batch mode or which
    field carries the token limit (``max_tokens_param``). ``params`` are those the task asked
    for, unsent ones included (:func:`make_spec`): keys made before records said what was
    sent are still the keys.
    """
    payload: JSONDict = {
        "provider": endpoint.provider,
        "server": endpoint.cache_identity,
        "model": endpoint.model,
        "messages": list(messages),
        "params": {
            k: params.get(k) for k in ("temperature", "top_p", "max_tokens", "seed", "stop")
        },
        "replicate": replicate,
    }
    if endpoint.output_options:
        payload["options"] = dict(endpoint.output_options)
    return sha256_hex(canonical_json(payload))


def replicate_seed(seed: int | None, temperature: float, sample_index: int) -> int | None:
    """The seed a request is sent: the endpoint's ``seed`` plus the replicate index for a
    sampled request (temperature > 0), so the self-consistency samples of one prompt are
    distinct, reproducible draws rather than one request sent n times. A request at
    temperature 0 keeps the endpoint's seed: its repeats measure the server's own
    nondeterminism at a fixed seed. None stays None (no seed is sent)."""
    if seed is None or temperature <= 0:
        return seed
    return seed + sample_index


def make_spec(
    endpoint: EndpointIdentity,
    *,
    task: str,
    problem_id: str,
    condition: str,
    messages: Sequence[Message],
    temperature: float,
    target_premise: str | None = None,
    sample_index: int = 0,
    probe: JSONDict | None = None,
) -> RequestSpec:
    """Build a request spec for ``endpoint``: the one place ids and cache keys are made.

    The spec's ``params`` are what is sent: those the endpoint does not send
    (``endpoint.unsent``: a temperature under ``omit_sampling`` or Anthropic thinking, a seed
    on Anthropic) are None. The cache key is of the params the task asked for, unsent ones
    included, as it always was: a payload that did not change keeps its key."""
    ep_params, target = endpoint.params, target_premise
    asked: JSONDict = {
        "temperature": temperature,
        "top_p": ep_params.get("top_p"),
        "max_tokens": ep_params.get("max_tokens"),
        "seed": replicate_seed(ep_params.get("seed"), temperature, sample_index),
        "stop": ep_params.get("stop"),
    }
    params = {k: None if k in endpoint.unsent else v for k, v in asked.items()}
    msgs = tuple(map(dict, messages))  # copies: a task may reuse its message dicts
    return RequestSpec(
        request_id=request_id_for(endpoint.name, problem_id, condition, target, sample_index),
        cache_key=cache_key_for(endpoint, msgs, asked, sample_index),
        endpoint=endpoint.name,
        task=task,
        problem_id=problem_id,
        condition=condition,
        target_premise=target_premise,
        sample_index=sample_index,
        probe=probe,
        messages=msgs,
        params=params,
        model=endpoint.model_record(),
    )
