"""OpenAI-compatible chat completions (also vLLM, llama.cpp server, Ollama, the local server)."""

from __future__ import annotations

from typing import Any

from cotaudit.schema import JSONDict
from runner.providers.base import Provider, ProviderResult
from runner.providers.reasoning import split_inline_think
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
        params, ep = spec.params, self.endpoint
        unsent = ep.unsent_params  # what the records' params say was not sent
        body: JSONDict = {"model": ep.model, "messages": spec.messages}
        if "temperature" not in unsent:
            body["temperature"] = params.get("temperature")
        # Reasoning models take max_completion_tokens and refuse max_tokens.
        body[ep.max_tokens_param] = (
            max_tokens if max_tokens is not None else params.get("max_tokens")
        )
        for key in ("top_p", "seed", "stop"):
            value = params.get(key)
            if value is not None and key not in unsent:
                body[key] = value
        if ep.reasoning_effort is not None:
            body["reasoning_effort"] = ep.reasoning_effort
        if self.local:
            # Only the project's own server reads these (simulated reasoners vary their
            # samples by replicate); a real API must not receive fields it did not define.
            body["metadata"] = {"replicate": spec.sample_index, "condition": spec.condition}
        body.update(ep.extra_body)  # verbatim; config refuses the fields set above
        return body

    def parse_success(self, data: Any) -> ProviderResult:
        choice = data["choices"][0]
        message = choice["message"]
        content = message["content"]
        reasoning = _reasoning_field(message)
        if isinstance(content, list):
            text, in_parts = _content_parts(content)
            reasoning = reasoning or in_parts
        elif isinstance(content, str) or content is None:
            text = content or ""
        else:
            raise TypeError("choices[0].message.content is not a string or a list")
        refusal = message.get("refusal")
        if not text and isinstance(refusal, str):
            # OpenAI puts what the model said when it refused here, with content null: kept
            # as the text, or the record could not tell a refusal from an empty answer.
            text = refusal
        if reasoning is None and self.reads_inline_think:
            reasoning, text = split_inline_think(text)
        usage = data.get("usage") or {}
        details = usage.get("completion_tokens_details") or {}
        reasoning_tokens = details.get("reasoning_tokens") if isinstance(details, dict) else None
        return ProviderResult(
            text=text,
            finish_reason=choice.get("finish_reason"),
            usage={
                "input_tokens": int(usage.get("prompt_tokens") or 0),
                "output_tokens": int(usage.get("completion_tokens") or 0),
            },
            served_model=_str_or_none(data.get("model")),
            system_fingerprint=_str_or_none(data.get("system_fingerprint")),
            reasoning=reasoning,
            reasoning_tokens=reasoning_tokens if isinstance(reasoning_tokens, int) else None,
            reasoning_withheld=reasoning is None
            and isinstance(reasoning_tokens, int)
            and reasoning_tokens > 0,
        )


def _reasoning_field(message: Any) -> str | None:
    """``reasoning_content`` (vLLM, DeepSeek), else ``reasoning`` (newer servers)."""
    for name in ("reasoning_content", "reasoning"):
        value = message.get(name)
        if isinstance(value, str) and value:
            return value
    return None


def _content_parts(parts: list[Any]) -> tuple[str, str | None]:
    """``(text, trace)`` of a content given as a list of parts (Mistral's API, some
    OpenAI-compatible servers): the ``text`` parts joined, and the ``thinking`` parts (a
    string, or Mistral's list of text parts) as the trace. Other parts carry no text."""
    texts: list[str] = []
    thoughts: list[str] = []
    for part in parts:
        if not isinstance(part, dict):
            raise TypeError("choices[0].message.content holds a part that is not an object")
        kind = part.get("type")
        if kind == "text":
            value = part["text"]
            if not isinstance(value, str):
                raise TypeError("a text part of choices[0].message.content has no text")
            texts.append(value)
        elif kind == "thinking":
            thought = part.get("thinking")
            if isinstance(thought, list):
                pieces = [p.get("text") if isinstance(p, dict) else None for p in thought]
                thought = "".join(t for t in pieces if isinstance(t, str))
            if isinstance(thought, str) and thought:
                thoughts.append(thought)
    return "".join(texts), "\n\n".join(thoughts) or None


def _str_or_none(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None
