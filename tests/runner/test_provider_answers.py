"""Answers providers really send, beyond the plain text answer: content as a list of parts,
refusals, stop reasons that cut the answer, and rate-limit headers that are no numbers."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from runner.config import EndpointConfig
from runner.pacing import Pacing
from runner.providers import make_provider
from runner.providers.base import (
    SHAPE_ERRORS,
    MalformedResponse,
    explicit_retry_after_s,
    retry_hint_s,
)
from runner.providers.rate_limits import parse_duration_s, read_budgets
from runner.transport import default_transport
from tests.runner.test_providers import CannedServer, _spec

NOW = 1_800_000_000.0  # a fixed "now" (UNIX seconds)

# Mistral's API (Magistral) and some OpenAI-compatible servers send the message's content as
# a list of parts, the trace as a "thinking" part of text parts.
PARTS_ANSWER = {
    "model": "magistral-medium",
    "choices": [
        {
            "message": {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": [{"type": "text", "text": "Rex is a wump."}]},
                    {"type": "text", "text": "Step 1 done.\n"},
                    {"type": "text", "text": "Answer: True"},
                ],
            },
            "finish_reason": "stop",
        }
    ],
    "usage": {"prompt_tokens": 12, "completion_tokens": 30},
}


def _openai(base_url: str = "https://api.example.com/v1") -> Any:
    return make_provider(EndpointConfig("o", "openai", "m", base_url=base_url))


def _anthropic() -> Any:
    return make_provider(EndpointConfig("a", "anthropic", "m", base_url="http://127.0.0.1:1/v1"))


def _chat(message: dict[str, Any], finish: str = "stop") -> dict[str, Any]:
    return {"choices": [{"message": message, "finish_reason": finish}], "usage": {}}


def test_content_as_a_list_of_parts_is_read_not_retried_as_malformed() -> None:
    result = _openai().parse_success(PARTS_ANSWER)
    assert result.text == "Step 1 done.\nAnswer: True"
    assert result.reasoning == "Rex is a wump."
    assert not result.reasoning_withheld
    # A thinking part given as a plain string; parts without text (an image) add nothing.
    parts = [
        {"type": "thinking", "thinking": "We know."},
        {"type": "image_url", "image_url": {"url": "data:"}},
        {"type": "text", "text": "Answer: False"},
    ]
    result = _openai().parse_success(_chat({"content": parts}))
    assert (result.text, result.reasoning) == ("Answer: False", "We know.")
    # Only text parts: no trace; a reasoning field beside the parts is read first.
    plain = _openai().parse_success(_chat({"content": [{"type": "text", "text": "A"}]}))
    assert (plain.text, plain.reasoning) == ("A", None)
    field = _openai().parse_success(
        _chat({"content": [{"type": "text", "text": "A"}], "reasoning_content": "R"})
    )
    assert (field.text, field.reasoning) == ("A", "R")


@pytest.mark.parametrize(
    "content",
    [[{"type": "text"}], [{"type": "text", "text": 5}], ["Answer: True"], 5, {"text": "A"}],
)
def test_parts_that_are_no_parts_are_malformed(content: Any) -> None:
    with pytest.raises(SHAPE_ERRORS):
        _openai().parse_success(_chat({"content": content}))


async def test_a_list_content_answer_over_loopback_is_a_result() -> None:
    async with CannedServer([(200, orjson.dumps(PARTS_ANSWER), {})]) as base_url:
        provider = _openai(base_url)
        transport = default_transport(1)
        try:
            result = await provider.complete(_spec(provider.endpoint), transport)
        finally:
            await transport.close()
    assert (result.text, result.reasoning) == ("Step 1 done.\nAnswer: True", "Rex is a wump.")
    assert result.served_model == "magistral-medium"
    assert result.usage == {"input_tokens": 12, "output_tokens": 30}


def test_an_openai_refusal_is_recorded_as_what_the_model_said() -> None:
    refusal = {"role": "assistant", "content": None, "refusal": "I can't help with that."}
    result = _openai().parse_success(_chat(refusal))
    assert (result.text, result.finish_reason) == ("I can't help with that.", "stop")
    # A refusal field beside a text answer (null, as OpenAI sends it) changes nothing.
    answer = _openai().parse_success(_chat({"content": "Answer: True", "refusal": None}))
    assert answer.text == "Answer: True"
    tool = _openai().parse_success(_chat({"content": None, "tool_calls": []}, "tool_calls"))
    assert (tool.text, tool.finish_reason) == ("", "tool_calls")


@pytest.mark.parametrize(
    ("stop_reason", "finish_reason"),
    [
        ("end_turn", "stop"),
        ("max_tokens", "length"),
        # Newer models stop at a full context window: the answer is cut, as by max_tokens.
        ("model_context_window_exceeded", "length"),
        ("refusal", "refusal"),
        ("tool_use", "tool_use"),
        ("pause_turn", "pause_turn"),
    ],
)
def test_anthropic_stop_reasons_that_cut_the_answer_read_as_length(
    stop_reason: str, finish_reason: str
) -> None:
    answer = {
        "content": [{"type": "text", "text": "Step 1: Rex"}],
        "stop_reason": stop_reason,
        "usage": {"input_tokens": 9, "output_tokens": 4},
    }
    assert _anthropic().parse_success(answer).finish_reason == finish_reason


@pytest.mark.parametrize("value", ["inf", "-inf", "nan", "Infinity", "NaN"])
def test_rate_limit_numbers_that_are_not_finite_are_no_budget(value: str) -> None:
    full = {
        "x-ratelimit-limit-requests": "100",
        "x-ratelimit-remaining-requests": "1",
        "x-ratelimit-reset-requests": "30s",
    }
    for name in full:
        budgets = read_budgets({**full, name: value}, now=NOW)
        budget = budgets.get("requests")
        assert budget is None or budget.reset_s is None or budget.limit is None, name
    assert parse_duration_s(value) is None
    assert explicit_retry_after_s({"retry-after": value}, now=NOW) is None
    assert explicit_retry_after_s({"retry-after-ms": value, "retry-after": "2"}, now=NOW) == 2.0
    assert retry_hint_s({"x-ratelimit-reset-requests": value}, now=NOW) is None


def test_a_reset_of_inf_does_not_crash_the_pacing() -> None:
    # A reset of "inf" made a refill of 0 per second, and the pace built from it divided by
    # zero: a traceback in the worker that read the answer.
    budgets = read_budgets(
        {
            "x-ratelimit-limit-requests": "100",
            "x-ratelimit-remaining-requests": "1",
            "x-ratelimit-reset-requests": "inf",
        },
        now=NOW,
    )
    pacing = Pacing(600.0, 1_000_000.0)
    pacing.observe(budgets)
    assert pacing.server == {}


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("1m30.5s", 90.5), ("6m0s", 360.0), ("1h2m3.5s", 3723.5), ("250ms", 0.25), ("1.5", 1.5)],
)
def test_reset_durations(text: str, seconds: float) -> None:
    assert parse_duration_s(text) == pytest.approx(seconds)


@pytest.mark.parametrize(
    ("reset", "seconds"),
    [
        ("2027-01-15T08:01:00Z", 60.0),
        ("2027-01-15T09:01:00+01:00", 60.0),
        ("2027-01-15T03:01:00-05:00", 60.0),
        ("2027-01-15T08:01:00.250000+00:00", 60.25),
        ("2027-01-15 08:01:00Z", 60.0),
        ("2027-01-15T08:01:00", None),  # no offset: not a time on any clock
        ("soon", None),
    ],
)
def test_anthropic_resets_with_offsets(reset: str, seconds: float | None) -> None:
    budgets = read_budgets(
        {
            "anthropic-ratelimit-requests-limit": "50",
            "anthropic-ratelimit-requests-remaining": "10",
            "anthropic-ratelimit-requests-reset": reset,
        },
        now=NOW,
    )
    got = budgets["requests"].reset_s
    assert got == (None if seconds is None else pytest.approx(seconds, abs=1e-3))


async def test_a_200_that_is_an_error_says_the_servers_message_and_keeps_the_budgets() -> None:
    # A gateway (OpenRouter) answers an upstream failure with a 200 whose body is an error.
    gateway = orjson.dumps({"error": {"message": "Upstream provider overloaded", "code": 502}})
    headers = {
        "x-ratelimit-limit-requests": "100",
        "x-ratelimit-remaining-requests": "3",
        "x-ratelimit-reset-requests": "30s",
    }
    not_a_list = orjson.dumps({"choices": [{"message": {"content": 5}}]})
    answers = [(200, gateway, headers), (200, not_a_list, headers), (200, b"<html>", headers)]
    errors = []
    async with CannedServer(answers) as base_url:
        provider = _openai(base_url)
        transport = default_transport(1)
        try:
            for _ in answers:
                with pytest.raises(MalformedResponse) as info:
                    await provider.complete(_spec(provider.endpoint), transport)
                errors.append(info.value)
        finally:
            await transport.close()
    assert "Upstream provider overloaded" in errors[0].message
    assert "not a string" in errors[1].message
    for error in errors:
        assert error.status == 200 and error.body_excerpt
        # The server counted the request: the pacing sees what its headers said is left.
        assert error.budgets["requests"].remaining == 3


def test_anthropic_input_tokens_count_the_cached_part_of_the_prompt() -> None:
    # With caching on (a top-level cache_control in extra_body), input_tokens is only the
    # part of the prompt after the last cache breakpoint; OpenAI's prompt_tokens is all of it.
    answer = {
        "content": [{"type": "text", "text": "Answer: True"}],
        "stop_reason": "end_turn",
        "usage": {
            "input_tokens": 5,
            "cache_creation_input_tokens": 20,
            "cache_read_input_tokens": 100,
            "output_tokens": 7,
        },
    }
    assert _anthropic().parse_success(answer).usage == {"input_tokens": 125, "output_tokens": 7}
    openai = _openai().parse_success(
        {
            "choices": [{"message": {"content": "A"}, "finish_reason": "stop"}],
            "usage": {
                "prompt_tokens": 125,
                "completion_tokens": 7,
                "prompt_tokens_details": {"cached_tokens": 100},
            },
        }
    )
    assert openai.usage == {"input_tokens": 125, "output_tokens": 7}
    # Caching off: the fields are absent, or null.
    answer["usage"] = {"input_tokens": 5, "cache_read_input_tokens": None, "output_tokens": 7}
    assert _anthropic().parse_success(answer).usage == {"input_tokens": 5, "output_tokens": 7}


@pytest.mark.parametrize(
    ("provider", "body"),
    [
        ("anthropic", {"content": None, "stop_reason": "end_turn"}),
        ("anthropic", {"content": "Answer: True"}),
        ("openai", _chat({"content": 5})),
        ("openai", _chat({"content": ["Answer: True"]})),
        ("openai", _chat({"content": [{"type": "text", "text": None}]})),
    ],
)
def test_a_batch_result_of_the_wrong_shape_is_that_items_error(
    provider: str, body: dict[str, Any]
) -> None:
    # A batch's results are parsed by the same parse_success, whose shape errors the batch
    # reader turns into that one item's MalformedResponse. A MalformedResponse raised inside
    # parse_success got past it: one bad line stopped the reading of the whole batch.
    from runner.batch.apis import _parse_answer

    chosen = _anthropic() if provider == "anthropic" else _openai()
    with pytest.raises(SHAPE_ERRORS):
        chosen.parse_success(body)
    item = _parse_answer(chosen, "c1", 200, body)
    assert item.result is None and isinstance(item.error, MalformedResponse)
