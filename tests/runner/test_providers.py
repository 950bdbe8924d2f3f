"""Provider parsing and error classification from canned bodies; server retry hints."""

from __future__ import annotations

from datetime import UTC, datetime
from email.utils import format_datetime
from typing import Any

import orjson
import pytest

from cotaudit.errors import UsageError
from runner.config import EndpointConfig
from runner.providers import make_provider
from runner.providers.anthropic import AnthropicProvider
from runner.providers.base import (
    AuthError,
    BadRequest,
    MalformedResponse,
    NotFound,
    ProviderError,
    QuotaExhausted,
    RateLimited,
    ServerError,
    classify_status,
    parse_duration_s,
    retry_hint_s,
)
from runner.providers.openai import OpenAIProvider
from runner.providers.rate_limits import Budget, read_budgets
from runner.request_spec import make_spec
from runner.transport import default_transport

NOW = 1_800_000_000.0  # a fixed "now" (UNIX seconds) for date-based hints


def _openai(monkeypatch: pytest.MonkeyPatch) -> OpenAIProvider:
    monkeypatch.setenv("TEST_OPENAI_KEY", "sk-canary-123")
    ep = EndpointConfig("o", "openai", "gpt-x", api_key_env="TEST_OPENAI_KEY", stop=("END",))
    provider = make_provider(ep)
    assert isinstance(provider, OpenAIProvider)
    return provider


def _anthropic(monkeypatch: pytest.MonkeyPatch) -> AnthropicProvider:
    monkeypatch.setenv("TEST_ANTHROPIC_KEY", "sk-ant-canary")
    ep = EndpointConfig("a", "anthropic", "claude-x", api_key_env="TEST_ANTHROPIC_KEY")
    provider = make_provider(ep)
    assert isinstance(provider, AnthropicProvider)
    return provider


def _spec(ep: EndpointConfig) -> Any:
    return make_spec(
        ep.identity(),
        task="t",
        problem_id="p",
        condition="original",
        messages=[{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Q?"}],
        temperature=0.0,
    )


def test_openai_request_shape_and_parsing(monkeypatch: pytest.MonkeyPatch) -> None:
    provider = _openai(monkeypatch)
    assert provider.url == "https://api.openai.com/v1/chat/completions"
    body = provider.build_body(_spec(provider.endpoint))
    assert body["model"] == "gpt-x" and body["stop"] == ["END"] and body["max_tokens"] == 512
    assert body["messages"][0] == {"role": "system", "content": "Be brief."}
    assert "seed" not in body  # unset parameters are not sent
    assert provider.build_body(_spec(provider.endpoint), max_tokens=1)["max_tokens"] == 1
    canned = {
        "choices": [
            {"message": {"role": "assistant", "content": "Answer: True"}, "finish_reason": "length"}
        ],
        "usage": {"prompt_tokens": 11, "completion_tokens": 3},
    }
    result = provider.parse_success(canned)
    assert (result.text, result.finish_reason) == ("Answer: True", "length")
    assert result.usage == {"input_tokens": 11, "output_tokens": 3}


def test_anthropic_splits_the_system_prompt_and_maps_stop_reasons(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    provider = _anthropic(monkeypatch)
    assert provider.url == "https://api.anthropic.com/v1/messages"
    assert provider.route.headers["anthropic-version"] == "2023-06-01"
    body = provider.build_body(_spec(provider.endpoint))
    assert body["system"] == "Be brief."
    assert [m["role"] for m in body["messages"]] == ["user"]
    canned = {
        "content": [{"type": "text", "text": "Step 1"}, {"type": "text", "text": " done"}],
        "stop_reason": "max_tokens",
        "usage": {"input_tokens": 9, "output_tokens": 2},
    }
    result = provider.parse_success(canned)
    assert (result.text, result.finish_reason) == ("Step 1 done", "length")
    assert result.usage == {"input_tokens": 9, "output_tokens": 2}


@pytest.mark.parametrize(
    ("blocks", "reasoning", "withheld"),
    [
        ([], None, False),  # thinking off
        ([{"type": "thinking", "thinking": "We know.", "signature": "s"}], "We know.", False),
        ([{"type": "thinking", "thinking": "", "signature": "s"}], None, True),  # omitted
        ([{"type": "redacted_thinking", "data": "opaque"}], None, True),
        (
            [
                {"type": "thinking", "thinking": "We know.", "signature": "s"},
                {"type": "redacted_thinking", "data": "opaque"},
            ],
            "We know.",
            True,  # part of the trace is not in the text
        ),
    ],
)
def test_anthropic_says_when_thinking_was_withheld(
    monkeypatch: pytest.MonkeyPatch, blocks: list[dict[str, str]], reasoning: Any, withheld: bool
) -> None:
    provider = _anthropic(monkeypatch)
    canned = {
        "content": [*blocks, {"type": "text", "text": "Answer: True"}],
        "stop_reason": "end_turn",
        "usage": {"input_tokens": 9, "output_tokens": 40},
    }
    result = provider.parse_success(canned)
    assert (result.text, result.reasoning, result.reasoning_withheld) == (
        "Answer: True",
        reasoning,
        withheld,
    )


MENTIONS_THINK = "Step 1: the closing tag </think> ends a block.\nAnswer: True"


def test_a_hosted_answer_that_mentions_think_tags_keeps_its_text(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # OpenAI's own API returns no trace text and Anthropic's thinking comes in blocks: a
    # </think> (or a leading <think>) in their answers is the answer's own text.
    openai = _openai(monkeypatch)
    for content in (MENTIONS_THINK, "<think>a tag</think> is markup. Answer: True"):
        result = openai.parse_success(
            {"choices": [{"message": {"content": content}, "finish_reason": "stop"}], "usage": {}}
        )
        assert (result.text, result.reasoning) == (content, None)
    anthropic = _anthropic(monkeypatch)
    omitted = {"type": "thinking", "thinking": "", "signature": "s"}  # display "omitted"
    for blocks in ([], [omitted]):
        result = anthropic.parse_success(
            {
                "content": [*blocks, {"type": "text", "text": MENTIONS_THINK}],
                "stop_reason": "end_turn",
                "usage": {},
            }
        )
        assert (result.text, result.reasoning) == (MENTIONS_THINK, None)
    # A self-hosted server (no reasoning parser) leaves the trace inline: read there.
    vllm = make_provider(EndpointConfig("v", "openai", "m", base_url="http://127.0.0.1:8000/v1"))
    result = vllm.parse_success(
        {"choices": [{"message": {"content": MENTIONS_THINK}, "finish_reason": "stop"}]}
    )
    assert result.reasoning == "Step 1: the closing tag"


@pytest.mark.parametrize(
    "canned",
    [
        {},
        {"choices": []},
        {"choices": [{"message": {}}]},
        {"choices": [{"message": {"content": 5}}]},
    ],
)
def test_openai_missing_fields_are_malformed(monkeypatch: pytest.MonkeyPatch, canned: Any) -> None:
    provider = _openai(monkeypatch)
    with pytest.raises((MalformedResponse, KeyError, IndexError, TypeError)):
        provider.parse_success(canned)


@pytest.mark.parametrize(
    ("status", "body", "cls", "retryable"),
    [
        (429, b'{"error": {"type": "rate_limit_exceeded"}}', RateLimited, True),
        (429, b'{"error": {"code": "insufficient_quota"}}', QuotaExhausted, False),
        (500, b"oops", ServerError, True),
        (502, b"", ServerError, True),
        (503, b"", ServerError, True),
        (529, b'{"type": "overloaded_error"}', ServerError, True),
        (408, b"", ServerError, True),
        (409, b"", ServerError, True),
        (400, b'{"error": "bad"}', BadRequest, False),
        (422, b"", BadRequest, False),
        (401, b"", AuthError, False),
        (403, b"", AuthError, False),
        (404, b'{"error": "model_not_found"}', NotFound, False),
    ],
)
def test_status_classification(
    status: int, body: bytes, cls: type[ProviderError], retryable: bool
) -> None:
    err = classify_status(status, body, {})
    assert type(err) is cls
    assert err.retryable is retryable
    assert err.status == status
    record = err.to_record(attempts=2)
    assert record["type"] == cls.__name__ and record["attempts"] == 2


def test_body_excerpt_is_bounded() -> None:
    err = classify_status(500, b"x" * 10_000, {})
    assert len(err.body_excerpt) <= 300


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({}, None),
        ({"retry-after-ms": "1500"}, 1.5),
        ({"Retry-After": "7"}, 7.0),
        (
            {"retry-after": format_datetime(datetime.fromtimestamp(NOW + 30, UTC), usegmt=True)},
            30.0,
        ),
        ({"retry-after-ms": "250", "retry-after": "9"}, 0.25),  # ms wins
        ({"x-ratelimit-reset-requests": "6m0s"}, 360.0),  # remaining not given: may be it
        ({"x-ratelimit-reset-requests": "1s", "x-ratelimit-reset-tokens": "20ms"}, 1.0),
        (  # a budget with room left did not refuse the request: no hint, the backoff decides
            {
                "x-ratelimit-reset-requests": "120ms",
                "x-ratelimit-remaining-requests": "9999",
                "x-ratelimit-reset-tokens": "57.6s",
                "x-ratelimit-remaining-tokens": "1200",
            },
            None,
        ),
        (
            {
                "x-ratelimit-reset-requests": "1s",
                "x-ratelimit-reset-tokens": "6m0s",
                "x-ratelimit-remaining-tokens": "0",
                "x-ratelimit-remaining-requests": "12",
            },
            360.0,
        ),
        (
            {
                "anthropic-ratelimit-requests-reset": (
                    datetime.fromtimestamp(NOW + 12, UTC).isoformat().replace("+00:00", "Z")
                ),
                "anthropic-ratelimit-requests-remaining": "0",
            },
            12.0,
        ),
        ({"retry-after": "garbage"}, None),
        ({"retry-after": "-5"}, 0.0),
    ],
)
def test_retry_hints(headers: dict[str, str], expected: float | None) -> None:
    got = retry_hint_s(headers, now=NOW)
    if expected is None:
        assert got is None
    else:
        assert got == pytest.approx(expected, abs=1e-6)


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("1s", 1.0),
        ("6m0s", 360.0),
        ("20ms", 0.02),
        ("1h2m3.5s", 3723.5),
        ("0.5", 0.5),
        ("x", None),
        ("500us", 0.0005),  # Go writes durations under a millisecond in us (or µs) and ns
        ("500\u00b5s", 0.0005),
        ("1ms500us", 0.0015),
        ("10ns", 1e-8),
    ],
)
def test_parse_duration(text: str, seconds: float | None) -> None:
    got = parse_duration_s(text)
    assert got == (pytest.approx(seconds) if seconds is not None else None)


def test_rate_limited_carries_the_hint() -> None:
    err = classify_status(429, b"{}", {"retry-after-ms": "40"})
    assert isinstance(err, RateLimited) and err.retry_after_s == pytest.approx(0.04)
    assert err.outcome == "429"


def test_a_request_larger_than_the_whole_budget_is_not_retried() -> None:
    body = (
        b'{"error": {"message": "Request too large for gpt-4o in organization org-x on tokens '
        b'per min (TPM): Limit 30000, Requested 45000.", "type": "tokens", '
        b'"code": "rate_limit_exceeded"}}'
    )
    err = classify_status(429, body, {"retry-after": "1"})
    assert isinstance(err, BadRequest) and not err.retryable
    assert "Requested 45000" in err.message


OPENAI_ROOMY = {  # an answer's usual rate-limit headers on an account with room to spare
    "x-ratelimit-limit-requests": "10000",
    "x-ratelimit-remaining-requests": "9999",
    "x-ratelimit-reset-requests": "6ms",
    "x-ratelimit-limit-tokens": "30000000",
    "x-ratelimit-remaining-tokens": "29999000",
    "x-ratelimit-reset-tokens": "2ms",
}


@pytest.mark.parametrize("status", [500, 502, 503, 529, 408, 409])
def test_a_server_error_takes_no_hint_from_the_budgets_reset_headers(status: int) -> None:
    """A 5xx carrying the rate-limit headers every answer has: their resets say when a
    budget refills, not when the server recovers, so the backoff decides (a 6 ms "hint"
    would spend every attempt of an overload spell in milliseconds)."""
    err = classify_status(status, b"{}", OPENAI_ROOMY)
    assert isinstance(err, ServerError) and err.retry_after_s is None
    exhausted = {**OPENAI_ROOMY, "x-ratelimit-remaining-requests": "0"}
    assert classify_status(status, b"{}", exhausted).retry_after_s is None
    explicit = classify_status(status, b"{}", {**OPENAI_ROOMY, "retry-after": "3"})
    assert explicit.retry_after_s == pytest.approx(3.0)
    assert classify_status(429, b"{}", exhausted).retry_after_s == pytest.approx(0.006)


def test_missing_key_variable_is_a_usage_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("COTAUDIT_UNSET_KEY", raising=False)
    ep = EndpointConfig("o", "openai", "m", api_key_env="COTAUDIT_UNSET_KEY")
    with pytest.raises(UsageError, match="COTAUDIT_UNSET_KEY"):
        make_provider(ep)


def test_errors_never_carry_the_key(monkeypatch: pytest.MonkeyPatch) -> None:
    provider = _openai(monkeypatch)
    assert provider.route.headers["authorization"] == "Bearer sk-canary-123"
    err = classify_status(401, b'{"error": "invalid key"}', {"www-authenticate": "Bearer"})
    assert "sk-canary" not in orjson.dumps(err.to_record(1)).decode()
    assert "sk-canary" not in repr(provider.endpoint)


def test_attempt_labels_and_expected_deltas() -> None:
    assert classify_status(503, b"", {}).outcome == "503"
    assert MalformedResponse("x").outcome == "malformed"


class CannedServer:
    """A loopback aiohttp server answering every POST with the next canned response."""

    def __init__(self, answers: list[tuple[int, bytes, dict[str, str]]]) -> None:
        self.answers = answers
        self.seen_headers: list[dict[str, str]] = []

    async def __aenter__(self) -> str:
        from aiohttp import web

        async def handle(request: web.Request) -> web.Response:
            self.seen_headers.append(dict(request.headers))
            status, body, headers = self.answers.pop(0)
            return web.Response(status=status, body=body, headers=headers)

        app = web.Application()
        app.router.add_post("/v1/chat/completions", handle)
        app.router.add_post("/v1/messages", handle)
        self.runner = web.AppRunner(app, access_log=None)
        await self.runner.setup()
        site = web.TCPSite(self.runner, "127.0.0.1", 0)
        await site.start()
        port = self.runner.addresses[0][1]
        return f"http://127.0.0.1:{port}/v1"

    async def __aexit__(self, *exc: object) -> None:
        await self.runner.cleanup()


@pytest.mark.parametrize(
    ("status", "body", "headers", "cls"),
    [
        (200, b"{}", {}, MalformedResponse),
        (200, b'{"choices": []}', {}, MalformedResponse),
        (200, b"<html>proxy error</html>", {}, MalformedResponse),
        (429, b'{"error": {"type": "rate_limit"}}', {"retry-after-ms": "120"}, RateLimited),
        (429, b'{"error": {"code": "insufficient_quota"}}', {}, QuotaExhausted),
        (503, b"overloaded", {}, ServerError),
        (401, b'{"error": "bad key"}', {}, AuthError),
        (404, b'{"error": "model_not_found"}', {}, NotFound),
    ],
)
async def test_complete_classifies_canned_answers(
    monkeypatch: pytest.MonkeyPatch,
    status: int,
    body: bytes,
    headers: dict[str, str],
    cls: type[ProviderError],
) -> None:
    monkeypatch.setenv("TEST_OPENAI_KEY", "sk-canary-123")
    async with CannedServer([(status, body, headers)]) as base_url:
        ep = EndpointConfig(
            "o", "openai", "gpt-x", base_url=base_url, api_key_env="TEST_OPENAI_KEY"
        )
        provider = make_provider(ep)
        transport = default_transport(1)
        try:
            with pytest.raises(cls) as info:
                await provider.complete(_spec(ep), transport)
        finally:
            await transport.close()
    err = info.value
    assert "sk-canary" not in str(err) and "sk-canary" not in err.body_excerpt
    if cls is RateLimited:
        assert err.retry_after_s == pytest.approx(0.12)
    assert err.maybe_sent is None and "maybe_sent" not in err.to_record(1)  # it answered


async def test_complete_sends_the_key_and_parses_both_protocols(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("TEST_ANTHROPIC_KEY", "sk-ant-canary")
    monkeypatch.setenv("TEST_OPENAI_KEY", "sk-canary-123")
    openai_ok = orjson.dumps(
        {
            "choices": [{"message": {"content": "Answer: False"}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 5, "completion_tokens": 2},
        }
    )
    anthropic_ok = orjson.dumps(
        {
            "content": [{"type": "text", "text": "Answer: True"}],
            "stop_reason": "end_turn",
            "usage": {"input_tokens": 4, "output_tokens": 3},
        }
    )
    server = CannedServer([(200, openai_ok, {}), (200, anthropic_ok, {})])
    transport = default_transport(1)
    async with server as base_url:
        o = EndpointConfig("o", "openai", "m", base_url=base_url, api_key_env="TEST_OPENAI_KEY")
        a = EndpointConfig(
            "a", "anthropic", "m", base_url=base_url, api_key_env="TEST_ANTHROPIC_KEY"
        )
        r1 = await make_provider(o).complete(_spec(o), transport)
        r2 = await make_provider(a).complete(_spec(a), transport)
        await transport.close()
    assert (r1.text, r1.finish_reason, r1.usage["output_tokens"]) == ("Answer: False", "stop", 2)
    assert (r2.text, r2.finish_reason, r2.usage["input_tokens"]) == ("Answer: True", "stop", 4)
    assert server.seen_headers[0]["Authorization"] == "Bearer sk-canary-123"
    assert server.seen_headers[1]["x-api-key"] == "sk-ant-canary"
    assert server.seen_headers[1]["anthropic-version"] == "2023-06-01"


def _sample_spec(ep: EndpointConfig) -> Any:
    return make_spec(
        ep.identity(),
        task="t",
        problem_id="p",
        condition="sample",
        messages=[{"role": "user", "content": "Q?"}],
        temperature=0.7,
        sample_index=3,
    )


def test_local_endpoints_get_replicate_hints() -> None:
    provider = make_provider(EndpointConfig("l", "local", "faithful"), base_url="http://x/v1")
    body = provider.build_body(_sample_spec(provider.endpoint))
    assert body["metadata"] == {"replicate": 3, "condition": "sample"}


def test_real_apis_never_get_replicate_hints(monkeypatch: pytest.MonkeyPatch) -> None:
    for provider in (_openai(monkeypatch), _anthropic(monkeypatch)):
        body = provider.build_body(_sample_spec(provider.endpoint))
        assert "metadata" not in body
        assert "replicate" not in orjson.dumps(body).decode()


def _rfc3339(offset_s: float) -> str:
    return datetime.fromtimestamp(NOW + offset_s, UTC).isoformat().replace("+00:00", "Z")


def test_openai_rate_limit_headers_become_budgets() -> None:
    budgets = read_budgets(
        {
            "x-ratelimit-limit-requests": "3000",
            "x-ratelimit-remaining-requests": "2999",
            "x-ratelimit-reset-requests": "20ms",
            "x-ratelimit-limit-tokens": "150000",
            "x-ratelimit-remaining-tokens": "90000",
            "x-ratelimit-reset-tokens": "24s",
        },
        now=NOW,
    )
    assert budgets == {
        "requests": Budget(limit=3000, remaining=2999, reset_s=pytest.approx(0.02)),
        "tokens": Budget(limit=150_000, remaining=90_000, reset_s=24.0),
    }
    # 60,000 tokens missing, back in 24 s: the budget refills at 2,500 tokens/s.
    assert budgets["tokens"].refill_per_s() == pytest.approx(2500.0)
    assert Budget(limit=10, remaining=10, reset_s=0.0).refill_per_s() is None  # full


def test_anthropic_rate_limit_headers_become_budgets() -> None:
    budgets = read_budgets(
        {
            "anthropic-ratelimit-requests-limit": "50",
            "anthropic-ratelimit-requests-remaining": "10",
            "anthropic-ratelimit-requests-reset": _rfc3339(48.0),
            "anthropic-ratelimit-tokens-limit": "80000",
            "anthropic-ratelimit-tokens-remaining": "100",
            "anthropic-ratelimit-tokens-reset": _rfc3339(59.0),
            "anthropic-ratelimit-input-tokens-limit": "80000",
            "anthropic-ratelimit-input-tokens-remaining": "40000",
            "anthropic-ratelimit-input-tokens-reset": _rfc3339(30.0),
            "anthropic-ratelimit-output-tokens-limit": "16000",
            "anthropic-ratelimit-output-tokens-remaining": "100",
            "anthropic-ratelimit-output-tokens-reset": _rfc3339(59.6),
        },
        now=NOW,
    )
    # "tokens" (the most restrictive of the two) is dropped: both are given themselves.
    assert set(budgets) == {"requests", "input-tokens", "output-tokens"}
    assert budgets["requests"].reset_s == pytest.approx(48.0, abs=1e-3)
    assert budgets["requests"].refill_per_s() == pytest.approx(40 / 48, rel=1e-3)
    assert budgets["output-tokens"] == Budget(16_000, 100, pytest.approx(59.6, abs=1e-3))


def test_when_both_families_describe_a_budget_the_more_exhausted_counts() -> None:
    budgets = read_budgets(
        {
            "x-ratelimit-limit-requests": "100",
            "x-ratelimit-remaining-requests": "90",
            "x-ratelimit-reset-requests": "6s",
            "anthropic-ratelimit-requests-limit": "100",
            "anthropic-ratelimit-requests-remaining": "5",
            "anthropic-ratelimit-requests-reset": _rfc3339(57.0),
        },
        now=NOW,
    )
    assert budgets["requests"].remaining == 5
    assert read_budgets({"retry-after": "3", "x-ratelimit-remaining-requests": "x"}, now=NOW) == {}


def test_anthropic_resets_are_dated_by_the_servers_clock_when_ours_is_off() -> None:
    from email.utils import formatdate

    headers = {
        "anthropic-ratelimit-requests-limit": "50",
        "anthropic-ratelimit-requests-remaining": "10",
        "anthropic-ratelimit-requests-reset": _rfc3339(54.0),
        "date": formatdate(NOW, usegmt=True),
    }
    # This machine's clock five minutes slow: without the Date the reset reads 354 s.
    slow = read_budgets(headers, now=NOW - 300)
    assert slow["requests"].reset_s == pytest.approx(54.0, abs=1e-3)
    # Within the Date's rounding the local clock is kept (it has sub-second precision).
    close = read_budgets(headers, now=NOW + 0.7)
    assert close["requests"].reset_s == pytest.approx(53.3, abs=1e-3)
    # No Date, or one that does not parse: the local clock.
    assert read_budgets({**headers, "date": "soon"}, now=NOW - 300)["requests"].reset_s == (
        pytest.approx(354.0, abs=1e-3)
    )
    # RFC 3339 allows lower-case separators.
    lower = {**headers, "anthropic-ratelimit-requests-reset": _rfc3339(54.0).lower()}
    assert read_budgets(lower, now=NOW)["requests"].reset_s == pytest.approx(54.0, abs=1e-3)


async def test_a_refused_connection_was_never_sent_a_reset_may_have_been(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import socket

    from runner.providers.base import ConnectionReset

    with socket.socket() as sock:  # a port that was free a moment ago, now closed
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    ep = EndpointConfig("l", "local", "echo", base_url=f"http://127.0.0.1:{port}/v1")
    transport = default_transport(1)
    try:
        with pytest.raises(ConnectionReset) as refused:
            await make_provider(ep).complete(_spec(ep), transport)
    finally:
        await transport.close()
    assert refused.value.maybe_sent is False
    assert refused.value.to_record(3)["maybe_sent"] is False
    assert "cannot connect" in refused.value.message
