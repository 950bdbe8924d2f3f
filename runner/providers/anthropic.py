"""Anthropic Messages: ``POST {base}/messages`` with ``x-api-key``; system prompt split out."""

from __future__ import annotations

from typing import Any

from cotaudit.schema import JSONDict
from runner.providers.base import Provider, ProviderResult
from runner.providers.reasoning import split_inline_think
from runner.request_spec import RequestSpec

ANTHROPIC_VERSION = "2023-06-01"
# Anthropic stop reasons in the OpenAI vocabulary the records use. A full context window
# (newer models stop so rather than refuse the request) cuts the answer as max_tokens does:
# "length" is what tells the evaluator that an answer was not read whole. Others ("refusal",
# "tool_use", "pause_turn") are kept as the API says them.
_FINISH = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
}

# Anthropic's input_tokens leaves out the prompt's cached part (a top-level cache_control in
# extra_body turns caching on): the three together are the prompt, as OpenAI's
# prompt_tokens is, cached tokens included, and as the records' input_tokens are read.
_INPUT_TOKENS = ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")


class AnthropicProvider(Provider):
    kind = "anthropic"
    path = "/messages"

    def auth_headers(self, api_key: str | None) -> dict[str, str]:
        headers = {"anthropic-version": ANTHROPIC_VERSION}
        if api_key:
            headers["x-api-key"] = api_key
        return headers

    def build_body(self, spec: RequestSpec, max_tokens: int | None = None) -> JSONDict:
        params, ep = spec.params, self.endpoint
        system = "\n\n".join(m["content"] for m in spec.messages if m["role"] == "system")
        body: JSONDict = {
            "model": ep.model,
            "messages": [m for m in spec.messages if m["role"] != "system"],
            "max_tokens": max_tokens if max_tokens is not None else params.get("max_tokens"),
        }
        # Thinking refuses a modified temperature or top_p: neither is sent with it
        # (unsent_params, which the records' params follow). The budget must be below
        # max_tokens: a smaller limit given here (the outage probe's max_tokens=1) goes
        # without thinking; preflight's ping sends the endpoint's max_tokens, and thinking.
        budget = ep.thinking_budget
        if budget is not None and (max_tokens is None or max_tokens > budget):
            body["thinking"] = {"type": "enabled", "budget_tokens": budget}
        sampling = "temperature" not in ep.unsent_params
        if sampling:
            body["temperature"] = params.get("temperature")
        if system:
            body["system"] = system
        if sampling and params.get("top_p") is not None:
            body["top_p"] = params["top_p"]
        if params.get("stop") is not None:
            body["stop_sequences"] = params["stop"]
        body.update(ep.extra_body)  # verbatim; config refuses the fields set above
        return body

    def parse_success(self, data: Any) -> ProviderResult:
        blocks = data["content"]
        if not isinstance(blocks, list):
            raise TypeError("'content' is not a list of blocks")
        text = "".join(b["text"] for b in blocks if b.get("type") == "text")
        thoughts = [b.get("thinking") for b in blocks if b.get("type") == "thinking"]
        reasoning: str | None = "\n\n".join(t for t in thoughts if isinstance(t, str) and t)
        # A redacted block, or a thinking block whose text was omitted (display "omitted"):
        # the model reasoned, and the answer does not say what.
        withheld = any(b.get("type") == "redacted_thinking" for b in blocks) or any(
            not (isinstance(t, str) and t) for t in thoughts
        )
        if not reasoning and self.reads_inline_think:  # off unless the endpoint turns it on
            reasoning, text = split_inline_think(text)
        stop_reason = data.get("stop_reason")
        usage = data.get("usage") or {}
        details = usage.get("output_tokens_details") or {}
        thinking_tokens = details.get("thinking_tokens") if isinstance(details, dict) else None
        model = data.get("model")
        return ProviderResult(
            text=text,
            finish_reason=_FINISH.get(stop_reason, stop_reason),
            usage={
                "input_tokens": sum(int(usage.get(name) or 0) for name in _INPUT_TOKENS),
                "output_tokens": int(usage.get("output_tokens") or 0),
            },
            served_model=model if isinstance(model, str) and model else None,
            reasoning=reasoning or None,
            reasoning_tokens=thinking_tokens if isinstance(thinking_tokens, int) else None,
            reasoning_withheld=withheld,
        )
