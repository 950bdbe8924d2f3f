"""A trivial model: answers with a fixed acknowledgement of the last user message."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from runner.server.models import Completion, approx_tokens, register_model
from runner.server.validation import echo_rules


class EchoModel:
    def complete(
        self, messages: Sequence[Mapping[str, str]], params: Mapping[str, Any]
    ) -> Completion:
        prompt = messages[-1]["content"] if messages else ""
        text = f"echo: {prompt[:200]}"
        return Completion(
            text=text,
            input_tokens=sum(approx_tokens(m.get("content", "")) for m in messages),
            output_tokens=approx_tokens(text),
        )


def _factory(name: str, options: Mapping[str, str]) -> EchoModel:
    # The options shape only what the validation refuses; checked here too, so that a bad
    # one is the 400 of any bad model option, not a limit silently not applied.
    echo_rules(name, options)
    return EchoModel()


register_model("echo", _factory)
