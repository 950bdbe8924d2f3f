"""Anthropic Messages on the local server: request parsing, answers and error bodies.

Requests are checked as the real API checks them (:func:`runner.server.validation.check_anthropic`:
roles, content, extended thinking). With thinking on, a reasoning model's trace
(``Completion.reasoning``) comes first in ``content``, as a signed ``thinking`` block or,
for a hidden trace, a ``redacted_thinking`` block.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Mapping
from typing import Any, ClassVar

import orjson

from runner.server.models import Completion, Reasoning
from runner.server.protocol import (
    BadRequest,
    ParsedRequest,
    WireProtocol,
    common_params,
    stop_list,
    text_of,
)
from runner.server.validation import check_anthropic, check_anthropic_model

ROUTE_ANTHROPIC = "/v1/messages"


class AnthropicCodec(WireProtocol):
    route = ROUTE_ANTHROPIC
    error_types: ClassVar[Mapping[int, str]] = {
        400: "invalid_request_error",
        401: "authentication_error",
        403: "permission_error",
        404: "not_found_error",
        413: "request_too_large",
        429: "rate_limit_error",
        503: "overloaded_error",
        529: "overloaded_error",
    }
    _stop_reasons: ClassVar[Mapping[str, str]] = {"stop": "end_turn", "length": "max_tokens"}

    def parse(self, body: Mapping[str, Any]) -> ParsedRequest:
        model = check_anthropic_model(body)
        if body.get("max_tokens") is None:
            raise BadRequest("max_tokens: Field required")
        messages = parse_anthropic_messages(body.get("messages"))
        thinking = check_anthropic(body)
        system = body.get("system")
        if system is not None:
            messages.insert(0, {"role": "system", "content": text_of(system, "system")})
        stop = stop_list(body.get("stop_sequences"), "stop_sequences")
        params = common_params(body, stop, body.get("max_tokens"))
        params["thinking"] = thinking
        if thinking == "enabled":
            params["thinking_budget"] = body["thinking"]["budget_tokens"]
        if thinking != "off" and body["thinking"].get("display") == "omitted":
            params["thinking_display"] = "omitted"
        return ParsedRequest(model, messages, params)

    def render(
        self, serial: int, req: ParsedRequest, done: Completion, stop_hit: str | None
    ) -> bytes:
        reason = (
            "stop_sequence"
            if stop_hit is not None
            else self._stop_reasons.get(done.finish_reason, "end_turn")
        )
        content: list[dict[str, Any]] = []
        usage: dict[str, Any] = {
            "input_tokens": done.input_tokens,
            "output_tokens": done.output_tokens,
        }
        if done.reasoning is not None:
            omitted = req.params.get("thinking_display") == "omitted"
            content.append(thinking_block(req.model, done.reasoning, omitted=omitted))
            usage["output_tokens_details"] = {"thinking_tokens": done.reasoning.tokens}
        if done.text or not content:
            content.append({"type": "text", "text": done.text})
        return orjson.dumps(
            {
                "id": f"msg_{serial:024d}",
                "type": "message",
                "role": "assistant",
                "model": req.model,
                "content": content,
                "stop_reason": reason,
                "stop_sequence": stop_hit,
                "usage": usage,
            }
        )

    def error_body(
        self, status: int, message: str, *, param: str | None = None, code: str | None = None
    ) -> bytes:
        error_type = self.error_types.get(status, "api_error")
        return orjson.dumps({"type": "error", "error": {"type": error_type, "message": message}})


def parse_anthropic_messages(raw: Any) -> list[dict[str, str]]:
    """Messages as role and text; an assistant turn's ``thinking`` / ``redacted_thinking``
    blocks (a client sending back an earlier answer) are accepted and not read."""
    if not isinstance(raw, list) or not raw:
        raise BadRequest("messages: List should have at least 1 item")
    out = []
    for i, msg in enumerate(raw):
        if not isinstance(msg, dict) or not isinstance(msg.get("role"), str):
            raise BadRequest(f"messages.{i}: Input should be an object with a 'role'")
        content = msg.get("content")
        if msg["role"] == "assistant" and isinstance(content, list):
            content = [
                block
                for block in content
                if not (isinstance(block, dict) and block.get("type") in _THINKING_BLOCKS)
            ]
        out.append({"role": msg["role"], "content": text_of(content, f"messages.{i}.content")})
    return out


_THINKING_BLOCKS = frozenset({"thinking", "redacted_thinking"})


def thinking_block(model: str, reasoning: Reasoning, *, omitted: bool = False) -> dict[str, Any]:
    """The content block of a trace: ``thinking`` with a signature (its text empty when the
    request asked ``display: "omitted"``), or ``redacted_thinking`` (opaque ``data``) for a
    hidden trace. Both are deterministic in (model, trace)."""
    seed = f"{model}\x1f{reasoning.text}".encode()
    if reasoning.field is None:
        data = hashlib.blake2b(b"redacted\x1f" + seed, digest_size=48).digest()
        return {"type": "redacted_thinking", "data": base64.b64encode(data).decode("ascii")}
    signature = hashlib.blake2b(b"signature\x1f" + seed, digest_size=48).digest()
    return {
        "type": "thinking",
        "thinking": "" if omitted else reasoning.text,
        "signature": base64.b64encode(signature).decode("ascii"),
    }
