"""Anthropic Messages: ``POST {base}/messages`` with ``x-api-key``; system prompt split out."""

from __future__ import annotations

from typing import Any

from cotaudit.schema import JSONDict
from runner.providers.base import MalformedResponse, Provider, ProviderResult
from runner.request_spec import RequestSpec

ANTHROPIC_VERSION = "2023-06-01"
# Anthropic stop reasons in the OpenAI vocabulary the records use.
_FINISH = {"end_turn": "stop", "stop_sequence": "stop", "max_tokens": "length"}


class AnthropicProvider(Provider):
    kind = "anthropic"
    path = "/messages"

    def auth_headers(self, api_key: str | None) -> dict[str, str]:
        headers = {"anthropic-version": ANTHROPIC_VERSION}
        if api_key:
            headers["x-api-key"] = api_key
        return headers

    def build_body(self, spec: RequestSpec, max_tokens: int | None = None) -> JSONDict:
        params = spec.params
        system = "\n\n".join(m["content"] for m in spec.messages if m["role"] == "system")
        body: JSONDict = {
            "model": self.endpoint.model,
            "messages": [m for m in spec.messages if m["role"] != "system"],
            "temperature": params.get("temperature"),
            "max_tokens": max_tokens if max_tokens is not None else params.get("max_tokens"),
        }
        if system:
            body["system"] = system
        if params.get("top_p") is not None:
            body["top_p"] = params["top_p"]
        if params.get("stop") is not None:
            body["stop_sequences"] = params["stop"]
        return body

    def parse_success(self, data: Any) -> ProviderResult:
        blocks = data["content"]
        if not isinstance(blocks, list):
            raise MalformedResponse("'content' is not a list of blocks")
        text = "".join(b["text"] for b in blocks if b.get("type") == "text")
        stop_reason = data.get("stop_reason")
        usage = data.get("usage") or {}
        return ProviderResult(
            text=text,
            finish_reason=_FINISH.get(stop_reason, stop_reason),
            usage={
                "input_tokens": int(usage.get("input_tokens") or 0),
                "output_tokens": int(usage.get("output_tokens") or 0),
            },
        )
