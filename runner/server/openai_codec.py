"""OpenAI chat completions on the local server: request parsing, answers and error bodies.

A reasoning model's trace (``Completion.reasoning``) is returned as
``message.reasoning_content`` or ``message.reasoning`` (the trace's ``field``), or not at all
(OpenAI's own reasoning models), and counted in ``usage.completion_tokens_details``.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Mapping
from typing import Any, ClassVar

import orjson

from cotaudit import __version__
from runner.server.models import Completion
from runner.server.protocol import (
    NO_CODE,
    ParsedRequest,
    WireProtocol,
    common_params,
    parse_messages,
    stop_list,
)
from runner.server.validation import check_openai, check_openai_model

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
        model = check_openai_model(body)
        messages = parse_messages(body.get("messages"))
        check_openai(body)
        params = common_params(
            body,
            stop_list(body.get("stop"), "stop"),
            # Newer OpenAI clients send max_completion_tokens instead of max_tokens.
            body.get("max_completion_tokens", body.get("max_tokens")),
        )
        if _thinking_off(body):
            params["thinking"] = "off"
        return ParsedRequest(model, messages, params)

    def render(
        self, serial: int, req: ParsedRequest, done: Completion, stop_hit: str | None
    ) -> bytes:
        message: dict[str, Any] = {"role": "assistant", "content": done.text}
        usage: dict[str, Any] = {
            "prompt_tokens": done.input_tokens,
            "completion_tokens": done.output_tokens,
            "total_tokens": done.input_tokens + done.output_tokens,
        }
        reasoning = done.reasoning
        if reasoning is not None:
            if reasoning.field is not None:
                message[reasoning.field] = reasoning.text
            usage["completion_tokens_details"] = {"reasoning_tokens": reasoning.tokens}
        return orjson.dumps(
            {
                "id": f"chatcmpl-{serial}",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": req.model,
                "system_fingerprint": system_fingerprint(req.model),
                "choices": [{"index": 0, "message": message, "finish_reason": done.finish_reason}],
                "usage": usage,
            }
        )

    def error_body(
        self, status: int, message: str, *, param: str | None = None, code: str | None = None
    ) -> bytes:
        if status == 404 and param not in (None, "model") and code is None:
            code = NO_CODE  # an unknown batch or file is not an unknown model
        return orjson.dumps(
            {
                "error": {
                    "message": message,
                    "type": self.error_types.get(status, "server_error"),
                    "param": param if param is not None else ("model" if status == 404 else None),
                    "code": None
                    if code == NO_CODE
                    else code
                    if code is not None
                    else self._codes.get(status),
                }
            }
        )


def system_fingerprint(model: str) -> str:
    """What identifies the backend that answered: the served model string and this build's
    version (a server that changes either says so, as ``system_fingerprint`` is meant to)."""
    digest = hashlib.blake2b(f"{__version__}/{model}".encode(), digest_size=5).hexdigest()
    return f"fp_{digest}"


def _thinking_off(body: Mapping[str, Any]) -> bool:
    """A request that turns a reasoning model's thinking off: ``reasoning_effort: "none"``
    (OpenAI) or vLLM's ``chat_template_kwargs: {"enable_thinking": false}`` (Qwen3 and
    other hybrid models)."""
    if body.get("reasoning_effort") == "none":
        return True
    kwargs = body.get("chat_template_kwargs")
    return isinstance(kwargs, dict) and kwargs.get("enable_thinking") is False
