"""Anthropic Messages on the local server: request parsing, answers and error bodies."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

import orjson

from runner.server.models import Completion
from runner.server.protocol import (
    BadRequest,
    ParsedRequest,
    WireProtocol,
    common_params,
    parse_messages,
    stop_list,
    text_of,
)

ROUTE_ANTHROPIC = "/v1/messages"


class AnthropicCodec(WireProtocol):
    route = ROUTE_ANTHROPIC
    error_types: ClassVar[Mapping[int, str]] = {
        400: "invalid_request_error",
        401: "authentication_error",
        403: "permission_error",
        404: "not_found_error",
        429: "rate_limit_error",
        503: "overloaded_error",
    }
    _stop_reasons: ClassVar[Mapping[str, str]] = {"stop": "end_turn", "length": "max_tokens"}

    def parse(self, body: Mapping[str, Any]) -> ParsedRequest:
        model = body.get("model")
        if not isinstance(model, str) or not model:
            raise BadRequest("'model' must be a non-empty string")
        if body.get("max_tokens") is None:
            raise BadRequest("'max_tokens' is required by the Messages API")
        messages = parse_messages(body.get("messages"))
        system = body.get("system")
        if system is not None:
            messages.insert(0, {"role": "system", "content": text_of(system, "system")})
        stop = stop_list(body.get("stop_sequences"), "stop_sequences")
        return ParsedRequest(model, messages, common_params(body, stop, body.get("max_tokens")))

    def render(
        self, serial: int, req: ParsedRequest, done: Completion, stop_hit: str | None
    ) -> bytes:
        reason = (
            "stop_sequence"
            if stop_hit is not None
            else self._stop_reasons.get(done.finish_reason, "end_turn")
        )
        return orjson.dumps(
            {
                "id": f"msg_{serial:024d}",
                "type": "message",
                "role": "assistant",
                "model": req.model,
                "content": [{"type": "text", "text": done.text}],
                "stop_reason": reason,
                "stop_sequence": stop_hit,
                "usage": {"input_tokens": done.input_tokens, "output_tokens": done.output_tokens},
            }
        )

    def error_body(self, status: int, message: str) -> bytes:
        error_type = self.error_types.get(status, "api_error")
        return orjson.dumps({"type": "error", "error": {"type": error_type, "message": message}})
