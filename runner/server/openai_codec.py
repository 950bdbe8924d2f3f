"""OpenAI chat completions on the local server: request parsing, answers and error bodies."""

from __future__ import annotations

import time
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
)

ROUTE_OPENAI = "/v1/chat/completions"


class OpenAICodec(WireProtocol):
    route = ROUTE_OPENAI
    error_types: ClassVar[Mapping[int, str]] = {
        400: "invalid_request_error",
        401: "invalid_request_error",
        403: "permission_error",
        404: "invalid_request_error",
        429: "rate_limit_exceeded",
    }
    _codes: ClassVar[Mapping[int, str]] = {
        401: "invalid_api_key",
        404: "model_not_found",
        429: "rate_limit_exceeded",
    }

    def parse(self, body: Mapping[str, Any]) -> ParsedRequest:
        model = body.get("model")
        if not isinstance(model, str) or not model:
            raise BadRequest("'model' must be a non-empty string")
        messages = parse_messages(body.get("messages"))
        return ParsedRequest(
            model,
            messages,
            # Newer OpenAI clients send max_completion_tokens instead of max_tokens.
            common_params(
                body,
                stop_list(body.get("stop"), "stop"),
                body.get("max_completion_tokens", body.get("max_tokens")),
            ),
        )

    def render(
        self, serial: int, req: ParsedRequest, done: Completion, stop_hit: str | None
    ) -> bytes:
        return orjson.dumps(
            {
                "id": f"chatcmpl-{serial}",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": req.model,
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": done.text},
                        "finish_reason": done.finish_reason,
                    }
                ],
                "usage": {
                    "prompt_tokens": done.input_tokens,
                    "completion_tokens": done.output_tokens,
                    "total_tokens": done.input_tokens + done.output_tokens,
                },
            }
        )

    def error_body(self, status: int, message: str) -> bytes:
        return orjson.dumps(
            {
                "error": {
                    "message": message,
                    "type": self.error_types.get(status, "server_error"),
                    "param": "model" if status == 404 else None,
                    "code": self._codes.get(status),
                }
            }
        )
