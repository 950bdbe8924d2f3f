"""OpenAI-compatible chat completions (also vLLM, llama.cpp server, Ollama, the local server)."""

from __future__ import annotations

from typing import Any

from cotaudit.schema import JSONDict
from runner.providers.base import MalformedResponse, Provider, ProviderResult
from runner.request_spec import RequestSpec


class OpenAIProvider(Provider):
    """``POST {base}/chat/completions`` with ``Authorization: Bearer <key>``."""

    kind = "openai"
    path = "/chat/completions"

    @property
    def local(self) -> bool:
        """True for a ``local`` endpoint: the project's server, which accepts replicate hints."""
        return self.endpoint.provider == "local"

    def auth_headers(self, api_key: str | None) -> dict[str, str]:
        return {"authorization": f"Bearer {api_key}"} if api_key else {}

    def build_body(self, spec: RequestSpec, max_tokens: int | None = None) -> JSONDict:
        params = spec.params
        body: JSONDict = {
            "model": self.endpoint.model,
            "messages": spec.messages,
            "temperature": params.get("temperature"),
            "max_tokens": max_tokens if max_tokens is not None else params.get("max_tokens"),
        }
        for key in ("top_p", "seed", "stop"):
            value = params.get(key)
            if value is not None:
                body[key] = value
        if self.local:
            # Only the project's own server reads these (simulated reasoners vary their
            # samples by replicate); a real API must not receive fields it did not define.
            body["metadata"] = {"replicate": spec.sample_index, "condition": spec.condition}
        return body

    def parse_success(self, data: Any) -> ProviderResult:
        choice = data["choices"][0]
        text = choice["message"]["content"]
        if text is None:
            text = ""  # a refusal or tool call without text: keep going, the record shows it
        if not isinstance(text, str):
            raise MalformedResponse("choices[0].message.content is not a string")
        usage = data.get("usage") or {}
        return ProviderResult(
            text=text,
            finish_reason=choice.get("finish_reason"),
            usage={
                "input_tokens": int(usage.get("prompt_tokens") or 0),
                "output_tokens": int(usage.get("completion_tokens") or 0),
            },
        )
