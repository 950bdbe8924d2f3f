"""Small helpers for the server tests: request bodies and a fake clock."""

from __future__ import annotations

from typing import Any


def openai_body(model: str = "echo", text: str = "hello there", **extra: Any) -> dict[str, Any]:
    return {"model": model, "messages": [{"role": "user", "content": text}], **extra}


def anthropic_body(
    model: str = "echo", text: str = "hello there", max_tokens: int = 64, **extra: Any
) -> dict[str, Any]:
    return {
        "model": model,
        "max_tokens": max_tokens,
        "messages": [{"role": "user", "content": text}],
        **extra,
    }


class FakeClock:
    """A monotonic clock that moves only when told to."""

    def __init__(self, start: float = 1000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds
