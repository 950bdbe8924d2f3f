"""What the two wire protocols share: a request in protocol-neutral form, the parsing both
need, and the interface each codec (:mod:`~runner.server.openai_codec`,
:mod:`~runner.server.anthropic_codec`) implements."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from aiohttp import web

from runner.server.models import Completion, Reasoning, approx_tokens


@dataclass(frozen=True, slots=True)
class ParsedRequest:
    """A chat request in protocol-neutral form, as models receive it."""

    model: str
    messages: list[dict[str, str]]
    # temperature, top_p, max_tokens, seed, stop (list or None), plus any hint fields
    params: dict[str, Any]


# An error ``code`` that says "none": an OpenAI error body's ``code`` is then null even where
# the status has a usual one (401: ``invalid_api_key``, but null for a missing key).
NO_CODE = ""


class BadRequest(Exception):
    """The request body is not a valid request for the route (answered with ``status``, 400).

    ``param`` and ``code`` fill the OpenAI error body's fields of those names (the request
    field at fault, e.g. ``temperature``, and the machine-readable reason, e.g.
    ``unsupported_value``); the Anthropic error body has no such fields and ignores them.
    """

    def __init__(
        self, message: str, *, param: str | None = None, code: str | None = None, status: int = 400
    ) -> None:
        super().__init__(message)
        self.message = message
        self.param = param
        self.code = code
        self.status = status


def text_of(content: Any, where: str) -> str:
    """Message content as text: a string, or the text blocks/parts of a list."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for block in content:
            if not isinstance(block, dict) or block.get("type") != "text":
                raise BadRequest(f"{where}: only text content blocks are supported")
            parts.append(str(block.get("text", "")))
        return "".join(parts)
    raise BadRequest(f"{where}: content must be a string or a list of text blocks")


def parse_messages(raw: Any) -> list[dict[str, str]]:
    if not isinstance(raw, list) or not raw:
        raise BadRequest("'messages' must be a non-empty list")
    out = []
    for i, msg in enumerate(raw):
        if not isinstance(msg, dict) or not isinstance(msg.get("role"), str):
            raise BadRequest(f"messages[{i}] must be an object with a 'role'")
        out.append({"role": msg["role"], "content": text_of(msg.get("content"), f"messages[{i}]")})
    return out


def stop_list(value: Any, name: str) -> list[str] | None:
    if value is None:
        return None
    if isinstance(value, str):
        return [value]
    if isinstance(value, list) and all(isinstance(s, str) for s in value):
        return list(value)
    raise BadRequest(f"'{name}' must be a string or a list of strings")


# Body fields the protocols define; any other scalar field (and each scalar entry of a
# ``metadata`` object) is passed to the model in ``params`` as a hint - e.g. ``replicate``,
# ``sample_index`` or ``condition``, which simulated reasoners and replay read.
_PROTOCOL_FIELDS = frozenset(
    {
        "model",
        "messages",
        "system",
        "temperature",
        "top_p",
        "max_tokens",
        "max_completion_tokens",
        "n",
        "seed",
        "stop",
        "stop_sequences",
        "stream",
        "metadata",
    }
)
_SCALARS = (str, int, float, bool)


def common_params(
    body: Mapping[str, Any], stop: list[str] | None, max_tokens: Any
) -> dict[str, Any]:
    if body.get("stream"):
        raise BadRequest("'stream' is not supported by the local server; send stream=false")
    if body.get("n", 1) != 1:
        raise BadRequest("'n' must be 1: the local server returns one choice per request")
    if max_tokens is not None and (
        not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens < 1
    ):
        raise BadRequest("'max_tokens' must be a positive integer")
    params: dict[str, Any] = {}
    for key, value in body.items():
        if key not in _PROTOCOL_FIELDS and isinstance(value, _SCALARS):
            params[key] = value
    metadata = body.get("metadata")
    if isinstance(metadata, dict):
        for key, value in metadata.items():
            if isinstance(value, _SCALARS):
                params.setdefault(key, value)
    params["temperature"] = body.get("temperature")
    params["top_p"] = body.get("top_p")
    params["max_tokens"] = max_tokens
    params["seed"] = body.get("seed")
    params["stop"] = stop
    return params


class WireProtocol:
    """How one wire protocol reads requests and writes answers and errors."""

    route: str
    error_types: ClassVar[Mapping[int, str]]

    def parse(self, body: Mapping[str, Any]) -> ParsedRequest:
        raise NotImplementedError

    def api_key(self, request: web.BaseRequest) -> str | None:
        """The key the client sent (``Authorization: Bearer`` or ``x-api-key``)."""
        auth = request.headers.get("Authorization")
        if auth is not None and auth.startswith("Bearer "):
            return auth[7:]
        return request.headers.get("x-api-key")

    def render(
        self, serial: int, req: ParsedRequest, done: Completion, stop_hit: str | None
    ) -> bytes:
        raise NotImplementedError

    def error_body(
        self, status: int, message: str, *, param: str | None = None, code: str | None = None
    ) -> bytes:
        raise NotImplementedError

    def bad_request_body(self, exc: BadRequest) -> bytes:
        """The error body answering ``exc``, its param and code included."""
        return self.error_body(exc.status, exc.message, param=exc.param, code=exc.code)


def apply_limits(done: Completion, params: Mapping[str, Any]) -> tuple[Completion, str | None]:
    """Cut a completion at the first stop sequence, then at ``max_tokens`` (~4 chars each).

    A reasoning trace (``done.reasoning``) comes first, as a reasoning model writes it: it is
    cut at the thinking budget (``params["thinking_budget"]``, Anthropic), it counts against
    ``max_tokens`` before the answer does (a trace that uses them all leaves an empty answer
    with finish reason ``length``, as OpenAI's reasoning models do), and stop sequences apply
    to the answer only. Returns the completion and the stop sequence that cut it (None if
    none did).
    """
    if done.reasoning is not None:
        return _apply_limits_with_reasoning(done, done.reasoning, params)
    text, reason, out_tokens = done.text, done.finish_reason, done.output_tokens
    text, reason, out_tokens, stop_hit = _cut_at_stops(text, reason, out_tokens, params)
    max_tokens = params.get("max_tokens")
    if max_tokens is not None and out_tokens > max_tokens:
        text, reason, out_tokens, stop_hit = text[: max_tokens * 4], "length", max_tokens, None
    if text is done.text:
        return done, stop_hit
    return dataclasses.replace(
        done, text=text, finish_reason=reason, output_tokens=out_tokens
    ), stop_hit


def _cut_at_stops(
    text: str, reason: str, out_tokens: int, params: Mapping[str, Any]
) -> tuple[str, str, int, str | None]:
    stop_hit = None
    stops = params.get("stop")
    if stops:
        cut = len(text)
        for s in stops:
            at = text.find(s) if s else -1
            if 0 <= at < cut:
                cut, stop_hit = at, s
        if stop_hit is not None:
            text, reason, out_tokens = text[:cut], "stop", approx_tokens(text[:cut])
    return text, reason, out_tokens, stop_hit


def _apply_limits_with_reasoning(
    done: Completion, reasoning: Reasoning, params: Mapping[str, Any]
) -> tuple[Completion, str | None]:
    trace, trace_tokens = reasoning.text, reasoning.tokens
    budget = params.get("thinking_budget")
    if isinstance(budget, int) and trace_tokens > budget:
        trace, trace_tokens = trace[: budget * 4], budget
    max_tokens = params.get("max_tokens")
    if max_tokens is not None and trace_tokens >= max_tokens:
        cut = dataclasses.replace(reasoning, text=trace[: max_tokens * 4], tokens=max_tokens)
        return dataclasses.replace(
            done, text="", finish_reason="length", output_tokens=max_tokens, reasoning=cut
        ), None
    visible_tokens = max(0, done.output_tokens - reasoning.tokens)
    text, reason, visible_tokens, stop_hit = _cut_at_stops(
        done.text, done.finish_reason, visible_tokens, params
    )
    if max_tokens is not None and visible_tokens > max_tokens - trace_tokens:
        visible_tokens = max_tokens - trace_tokens
        text, reason, stop_hit = text[: visible_tokens * 4], "length", None
    if trace_tokens != reasoning.tokens:
        reasoning = dataclasses.replace(reasoning, text=trace, tokens=trace_tokens)
    return dataclasses.replace(
        done,
        text=text,
        finish_reason=reason,
        output_tokens=trace_tokens + visible_tokens,
        reasoning=reasoning,
    ), stop_hit
