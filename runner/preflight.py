"""Preflight: what each endpoint's server lists and which model will answer, before a sweep.

The key variables were already checked (``read_api_key``). Here, per endpoint, concurrently:

1. ``GET {base}/models`` where the server has a listing (OpenAI's and Anthropic's shapes;
   a 404 or 405 means it has none), every page of a paged one (Anthropic's ``has_more`` and
   ``last_id``, at most ``MODEL_LIST_MAX_PAGES``). A model not in the list is looked up alone
   (``GET {base}/models/{id}``: names with options, aliases).
2. For ``mode = "batch"``, the batch API's listing (``GET /batches`` or
   ``GET /messages/batches``, one item): a server without one (Ollama, llama.cpp, vLLM) is
   named before anything is planned.
3. One request through the normal provider (no retries, no cache, not written), built as
   the sweep's requests are: the endpoint's ``max_tokens`` under its ``max_tokens_param``,
   its sampling parameters (none where the sweep sends none), ``reasoning_effort``,
   Anthropic ``thinking`` and ``extra_body``; only the prompt is its own, one that asks for
   one word. So what makes a server refuse the sweep's requests (a ``max_tokens`` above the
   model's output limit or the key's tokens-per-minute, thinking or a ``reasoning_effort``
   the model does not take) makes it refuse the ping. The real ``max_tokens`` costs little:
   providers bill the tokens written, not the limit, and the answer is a word (and, from a
   reasoning model, its trace on that); at worst it runs to ``max_tokens``, as any request
   of the sweep may.

Unreachable -> check base_url / network; 401/403 -> the key variable; 404 -> the model name
(the server's list is named); a 400 -> the server's message and, where it names a setting,
the endpoint key that fixes it (``max_tokens_param``, ``omit_sampling``, ``max_tokens``,
``reasoning_effort``, ``thinking_budget``, ``stop``). A 429 or 5xx proves the endpoint
is there, so the sweep may start (the engine retries). Every problem of every endpoint is
reported at once. A model the list lacks that the server answered anyway means the server
answers any name with what it has loaded (llama.cpp's server): the list's model is named as
the one that answers, and a warning says to set ``revision``.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote, urlencode

from cotaudit.caller_terms import option
from cotaudit.constants import MODEL_LIST_MAX_PAGES
from cotaudit.errors import UsageError
from cotaudit.schema import JSONDict
from runner.config import EndpointConfig, SweepConfig
from runner.providers.api_client import ApiClient
from runner.providers.base import (
    AuthError,
    BadRequest,
    ConnectionReset,
    NotFound,
    Provider,
    ProviderError,
    ProviderResult,
    QuotaExhausted,
    Timeout,
)
from runner.request_spec import RequestSpec, make_spec
from runner.transport import Transport

# The ping's one message: an answer of a word or two, from any model.
PING_PROMPT = "Reply with one word: ready."
LISTED_SHOWN = 8  # model ids named in a message about the list


@dataclass(frozen=True, slots=True)
class ServedModel:
    """What preflight learnt of one endpoint's server."""

    endpoint: str
    requested: str
    listed: tuple[str, ...] | None  # the ``/models`` ids; None: the server has no listing
    served_model: str | None  # the ping answer's ``model``, or the one the list says answers
    system_fingerprint: str | None
    answers_any_name: bool = False  # the list lacks the name, the server answered it anyway
    notes: tuple[str, ...] = field(default=())

    def to_record(self) -> JSONDict:
        """The manifest's entry for this endpoint."""
        return {
            "endpoint": self.endpoint,
            "requested": self.requested,
            "listed": list(self.listed) if self.listed is not None else None,
            "served_model": self.served_model,
            "system_fingerprint": self.system_fingerprint,
            "answers_any_name": self.answers_any_name,
        }

    @property
    def another_model(self) -> bool:
        """Whether the server answers with a model other than the one the config names."""
        return bool(self.served_model) and self.served_model != self.requested

    def line(self) -> str:
        """The terminal's line: which model will answer."""
        served = self.served_model or self.requested
        text = f"cotaudit: preflight: endpoint {self.endpoint!r}: {served!r} answers"
        if self.another_model:
            text += f" requests for {self.requested!r}"
        if self.system_fingerprint:
            text += f" (system_fingerprint {self.system_fingerprint})"
        return text


def advice(endpoint: EndpointConfig, base_url: str, exc: ProviderError) -> str | None:
    """What to tell the user about a failed ping; None when the sweep may go ahead."""
    name = f"endpoint {endpoint.name!r}"
    if isinstance(exc, ConnectionReset | Timeout):
        return f"{name}: cannot reach {base_url} ({exc.message}); check base_url and network"
    if isinstance(exc, AuthError):
        var = endpoint.api_key_env or "(none configured: set api_key_env)"
        return f"{name}: authentication refused (HTTP {exc.status}); check the key in ${var}"
    if isinstance(exc, NotFound):
        return (
            f"{name}: HTTP 404 for model {endpoint.model!r} at {base_url}; check the model "
            "name and that base_url ends where the API's routes start (e.g. .../v1)"
        )
    if isinstance(exc, QuotaExhausted):
        return f"{name}: quota exhausted ({exc.body_excerpt[:100]}); add credit or switch key"
    if isinstance(exc, BadRequest):
        return f"{name}: request refused ({exc.message}); {_parameter_fix(endpoint, exc)}"
    return None  # 429, 5xx, malformed: reachable; the engine's retries deal with it


def _parameter_fix(endpoint: EndpointConfig, exc: BadRequest) -> str:
    """The endpoint key that fixes a refusal of the sweep's requests, from its error body."""
    body = exc.body_excerpt.lower()
    if "max_completion_tokens" in body and endpoint.max_tokens_param != "max_completion_tokens":
        return (
            'the model takes max_completion_tokens: set max_tokens_param = "max_completion_tokens"'
        )
    if "request too large" in body:  # OpenAI's 429: prompt + max_tokens above the whole TPM
        return (
            f"the key's tokens-per-minute limit is below the prompt plus max_tokens "
            f"({endpoint.max_tokens}): lower the endpoint's max_tokens, or raise the limit"
        )
    named = "max_tokens" in body or "max_completion_tokens" in body
    if named and ("too large" in body or "maximum allowed" in body):
        return (
            f"max_tokens = {endpoint.max_tokens} is more than the model writes: lower the "
            "endpoint's max_tokens to the model's output limit"
        )
    if "reasoning_effort" in body and endpoint.reasoning_effort is not None:
        return "the model takes no reasoning_effort: remove it from the endpoint"
    if ("temperature" in body or "top_p" in body) and not endpoint.omit_sampling:
        return (
            "the model rejects temperature/top_p (a reasoning model): set omit_sampling = true "
            "(its samples then differ only by the server's own sampling)"
        )
    if "thinking" in body and "not support" in body:
        return "the model has no extended thinking: remove the endpoint's thinking_budget"
    if "thinking" in body:
        return "check thinking_budget (>= 1024 and below max_tokens)"
    if "'stop'" in body and endpoint.stop is not None:
        # omit_sampling keeps stop (PROVIDERS.md names only temperature and top_p as refused).
        return "the model rejects stop sequences: remove the endpoint's stop"
    return "check the endpoint's parameters (extra_body included)"


def ping_spec(endpoint: EndpointConfig) -> RequestSpec:
    """The one-request check of an endpoint (never written): the preflight's, sent as the
    sweep's requests are (:func:`check_endpoint`), and the probe of an endpoint that is down
    (which the engine sends with ``max_tokens=1``)."""
    return make_spec(
        endpoint.identity(),
        task="preflight",
        problem_id="preflight",
        condition="prompt",
        messages=[{"role": "user", "content": PING_PROMPT}],
        temperature=0.0,
    )


def listed_ids(data: Any) -> tuple[str, ...]:
    """The model ids of a ``/models`` answer in OpenAI's or Anthropic's shape."""
    entries = data.get("data") if isinstance(data, Mapping) else None
    if not isinstance(entries, list):
        raise ValueError("no 'data' list")
    return tuple(str(e["id"]) for e in entries if isinstance(e, Mapping) and "id" in e)


def next_page_after(data: Any, seen: set[str]) -> str | None:
    """The ``after_id`` of a paged listing's next page (Anthropic's ``has_more`` and
    ``last_id``), or None: no more pages, or a ``last_id`` already followed (a server that
    would send the same page again)."""
    if not isinstance(data, Mapping) or data.get("has_more") is not True:
        return None
    last = data.get("last_id")
    return last if isinstance(last, str) and last and last not in seen else None


async def read_pages(client: ApiClient, *, page_size: int | None = None) -> tuple[str, ...]:
    """The ids of every page of ``GET /models``, at most ``MODEL_LIST_MAX_PAGES`` of them.

    ``page_size``: the ``limit`` asked for per page (None: the server's default, and the
    first request is a bare ``GET /models``, all there is of an unpaged listing such as
    OpenAI's). A later page that fails ends the list where it got to: membership then falls
    back to ``GET /models/{id}``."""
    limit = [("limit", str(page_size))] if page_size is not None else []
    data = await client.json("GET", _query("/models", limit))
    ids = list(listed_ids(data))
    followed: set[str] = set()
    for _ in range(MODEL_LIST_MAX_PAGES - 1):
        after = next_page_after(data, followed)
        if after is None:
            break
        followed.add(after)
        try:
            data = await client.json("GET", _query("/models", [*limit, ("after_id", after)]))
            ids.extend(listed_ids(data))
        except (ProviderError, ValueError):
            break
    return tuple(ids)


def _query(path: str, params: list[tuple[str, str]]) -> str:
    return path + ("?" + urlencode(params) if params else "")


async def read_listing(
    client: ApiClient, model: str, *, page_size: int | None = None
) -> tuple[tuple[str, ...] | None, bool, ProviderError | None]:
    """``(ids, model_known, error)``: the list (None without one), whether the server knows
    ``model`` (in the list, or ``GET /models/{model}`` answers), and an error that stops the
    sweep (a refused key). ``page_size``: as :func:`read_pages` takes it."""
    try:
        ids = await read_pages(client, page_size=page_size)
    except (NotFound, BadRequest):
        return None, True, None  # no listing here (404, 405): the ping decides
    except AuthError as exc:
        return None, True, exc
    except (ProviderError, ValueError):
        return None, True, None  # an odd listing must not stop a sweep the ping allows
    if model in ids:
        return ids, True, None
    try:
        await client.call("GET", "/models/" + quote(model, safe=""))
    except ProviderError:
        return ids, False, None
    return ids, True, None


async def check_endpoint(
    provider: Provider, transport: Transport
) -> tuple[ServedModel | None, str | None]:
    """``(what serves it, None)`` or ``(None, the problem)`` for one endpoint."""
    ep = provider.endpoint
    async with ApiClient(provider) as client:
        ids, known, listing_error = await read_listing(client, ep.model)
        batch_problem = await check_batch_api(client) if ep.batch else None
    if listing_error is not None:
        return None, advice(ep, provider.base_url, listing_error)
    if batch_problem is not None:
        return None, batch_problem
    result: ProviderResult | None = None
    try:
        # No max_tokens override: the endpoint's own, so the server judges it (see above).
        result = await provider.complete(ping_spec(ep), transport)
    except NotFound as exc:
        problem = advice(ep, provider.base_url, exc)
        if ids:
            problem = (
                f"endpoint {ep.name!r}: model {ep.model!r} is unknown to {provider.base_url}; "
                f"it lists {_names(ids)}"
            )
        return None, problem
    except ProviderError as exc:
        problem = advice(ep, provider.base_url, exc)
        if problem is not None:
            return None, problem
    served = result.served_model if result is not None else None
    fingerprint = result.system_fingerprint if result is not None else None
    any_name = bool(ids) and not known and result is not None
    notes: list[str] = []
    if any_name:
        assert ids is not None
        if len(ids) == 1:
            served = ids[0]  # the answer's echo of the name says nothing; the list does
        notes.append(
            f"cotaudit: warning: endpoint {ep.name!r}: model {ep.model!r} is not in the "
            f"server's list ({_names(ids)}), but the server answered it: it answers any "
            f"name with the model it has loaded{f' ({served!r})' if len(ids) == 1 else ''}. "
            "Cached answers cannot tell two loaded models apart: set revision on the "
            "endpoint when you load another."
        )
    return (
        ServedModel(
            endpoint=ep.name,
            requested=ep.model,
            listed=ids,
            served_model=served,
            system_fingerprint=fingerprint,
            answers_any_name=any_name,
            notes=tuple(notes),
        ),
        None,
    )


async def check_batch_api(client: ApiClient) -> str | None:
    """For ``mode = "batch"``: the provider's batch listing answers (no batch is made)."""
    ep = client.provider.endpoint
    path = (
        "/messages/batches?limit=1" if client.provider.kind == "anthropic" else "/batches?limit=1"
    )
    try:
        await client.call("GET", path)
    except (NotFound, BadRequest) as exc:
        return (
            f'endpoint {ep.name!r}: mode = "batch", but {client.base_url} has no batch API '
            f"(GET {path.split('?')[0]}: HTTP {exc.status}); self-hosted servers have none: "
            'use mode = "online"'
        )
    except AuthError as exc:
        return advice(ep, client.base_url, exc)
    except ProviderError:
        return None  # a 429 or 5xx: the API is there
    return None


def _names(ids: tuple[str, ...]) -> str:
    shown = ", ".join(repr(i) for i in ids[:LISTED_SHOWN])
    return shown + (f" and {len(ids) - LISTED_SHOWN} more" if len(ids) > LISTED_SHOWN else "")


async def run_preflight(
    config: SweepConfig,
    providers: Mapping[str, Provider],
    transport: Transport,
    *,
    stream: Any = None,
    announce: bool = True,
    endpoints: Sequence[EndpointConfig] | None = None,
) -> dict[str, ServedModel]:
    """Check every endpoint (or those of ``endpoints``) concurrently; what serves each, by
    endpoint name.

    Raises ``UsageError`` listing every endpoint that fails. Prints which model answers
    each endpoint on ``stream`` (stderr): unless ``announce`` is false (``--quiet``), or
    always where another model answers; and any warning always."""
    out = stream or sys.stderr
    results = await asyncio.gather(
        *(
            check_endpoint(providers[ep.name], transport)
            for ep in (config.endpoints if endpoints is None else endpoints)
        )
    )
    problems = [problem for _, problem in results if problem is not None]
    if problems:
        raise UsageError(
            "preflight failed: " + "; ".join(problems),
            where=config.source,
            fix=f"Fix the endpoint(s) named, or skip this check with {option('no_preflight')}.",
        )
    served = {}
    for found, _ in results:
        assert found is not None
        served[found.endpoint] = found
        # Another model answering is news even under --quiet; the expected one is not.
        if announce or found.another_model:
            print(found.line(), file=out, flush=True)
        for note in found.notes:
            print(note, file=out, flush=True)
    return served
