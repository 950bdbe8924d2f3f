"""Provider mode: budgets per API key, the rate-limit headers on every answer of a charged
request (each route its own protocol's family, or both), 429 with retry-after, output tokens
settled, time per output token."""

from __future__ import annotations

from datetime import datetime

import aiohttp
import orjson
import pytest

from runner.providers.base import BadRequest, classify_status
from runner.providers.rate_limits import read_budgets
from runner.server.lifecycle import running_server
from runner.server.server_limits import RateLimitSpec, ServerRateLimiter
from runner.server.settings import ServerConfig
from tests.runner.server.helpers import FakeClock, anthropic_body, openai_body

WALL = 1_800_000_000.0


def _config(spec: RateLimitSpec, clock: FakeClock, **extra: object) -> ServerConfig:
    return ServerConfig(rate_limit=spec, clock=clock, wall_clock=lambda: WALL, **extra)  # type: ignore[arg-type]


async def test_each_route_answers_with_its_own_protocols_header_family() -> None:
    """As a hosted provider does: OpenAI's headers on the OpenAI route, Anthropic's on the
    Anthropic route, a 429's wait in whole seconds only; the engine reads each alone."""
    clock = FakeClock()
    spec = RateLimitSpec(requests_per_minute=2, tokens_per_minute=6000)
    async with running_server(_config(spec, clock)) as server, aiohttp.ClientSession() as client:
        answers = []
        for path, body in (
            ("/chat/completions", openai_body()),
            ("/messages", anthropic_body()),
            ("/messages", anthropic_body()),
        ):
            async with client.post(server.base_url + path, json=body) as resp:
                headers = {k.lower(): v for k, v in resp.headers.items()}
                answers.append((resp.status, set(headers), headers))
    (ok_openai, openai_names, _), (ok_anthropic, anthropic_names, _), refused = answers
    assert (ok_openai, ok_anthropic, refused[0]) == (200, 200, 429)
    assert "x-ratelimit-remaining-requests" in openai_names
    assert not [n for n in openai_names if n.startswith("anthropic-ratelimit")]
    assert "anthropic-ratelimit-requests-remaining" in anthropic_names
    assert not [n for n in anthropic_names if n.startswith("x-ratelimit")]
    assert not [n for n in refused[1] if n.startswith("x-ratelimit") or n == "retry-after-ms"]
    assert refused[2]["retry-after"] == "30"
    budgets = read_budgets(refused[2], now=WALL)
    assert budgets["requests"].remaining == 0


async def test_with_both_every_answer_carries_both_header_families() -> None:
    clock = FakeClock()
    spec = RateLimitSpec(requests_per_minute=60, tokens_per_minute=6000, limit_headers="both")
    async with running_server(_config(spec, clock)) as server, aiohttp.ClientSession() as client:
        body = openai_body(text="x" * 400, max_tokens=100)  # 100 prompt + 100 output tokens
        async with client.post(server.base_url + "/chat/completions", json=body) as resp:
            assert resp.status == 200
            headers = {k.lower(): v for k, v in resp.headers.items()}
        async with client.post(server.base_url + "/messages", json=anthropic_body("nope")) as r:
            assert r.status == 404  # an error answer is charged and carries them too
            assert r.headers["x-ratelimit-remaining-requests"] == "58"
    assert headers["x-ratelimit-limit-requests"] == "60"
    assert headers["x-ratelimit-remaining-requests"] == "59"
    assert headers["x-ratelimit-reset-requests"] == "1s"  # one request back in one second
    assert headers["x-ratelimit-limit-tokens"] == "6000"
    assert headers["x-ratelimit-remaining-tokens"] == "5800"
    assert headers["x-ratelimit-reset-tokens"] == "2s"  # 200 tokens at 100 per second
    reset = datetime.fromisoformat(headers["anthropic-ratelimit-requests-reset"])
    assert reset.timestamp() == pytest.approx(WALL + 1.0, abs=0.002)
    assert headers["anthropic-ratelimit-tokens-remaining"] == "5800"
    # What the engine reads back from them.
    budgets = read_budgets(headers, now=WALL)
    assert budgets["requests"].refill_per_s() == pytest.approx(1.0)
    assert budgets["tokens"].refill_per_s() == pytest.approx(100.0)


async def test_each_key_has_its_own_budget_and_a_refusal_says_when_to_retry() -> None:
    clock = FakeClock()
    spec = RateLimitSpec(requests_per_minute=2, retry_after_ms=True)
    url_path = "/chat/completions"
    async with running_server(_config(spec, clock)) as server, aiohttp.ClientSession() as client:
        url = server.base_url + url_path
        statuses = []
        for key in ("a", "a", "a", "b"):
            async with client.post(
                url, json=openai_body(), headers={"Authorization": f"Bearer {key}"}
            ) as resp:
                statuses.append(resp.status)
                if resp.status == 429:
                    refused = dict(resp.headers)
        assert statuses == [200, 200, 429, 200]  # key b's budget is untouched by a's
        assert refused["Retry-After"] == "30" and refused["retry-after-ms"] == "30000"
        assert refused["x-ratelimit-remaining-requests"] == "0"
        assert refused["x-ratelimit-reset-requests"] == "1m0s"
        stats = server.stats()
    assert stats["by_status"] == {"200": 3, "429": 1}


async def test_without_headers_a_refusal_says_only_retry_after() -> None:
    clock = FakeClock()
    spec = RateLimitSpec(requests_per_minute=1, limit_headers="none")
    async with running_server(_config(spec, clock)) as server, aiohttp.ClientSession() as client:
        url = server.base_url + "/chat/completions"
        async with client.post(url, json=openai_body()) as resp:
            assert resp.status == 200
            assert not [h for h in resp.headers if "ratelimit" in h.lower()]
        async with client.post(url, json=openai_body()) as resp:
            assert resp.status == 429
            named = {h.lower() for h in resp.headers}
    assert "retry-after" in named and not [h for h in named if "ratelimit" in h or "-ms" in h]


async def test_a_request_above_the_whole_token_budget_is_refused_on_the_openai_route() -> None:
    """OpenAI's answer to prompt + max_tokens above the whole per-minute token budget: a 429
    saying "Request too large", its budget headers, no retry-after (no wait makes it fit),
    nothing charged. Anthropic's route keeps the bucket's rule (its reference says nothing)."""
    clock = FakeClock()
    spec = RateLimitSpec(tokens_per_minute=600)
    async with running_server(_config(spec, clock)) as server, aiohttp.ClientSession() as client:
        big = openai_body(text="x" * 400, max_tokens=600)  # 100 prompt + 600 output tokens
        async with client.post(server.base_url + "/chat/completions", json=big) as resp:
            status, headers, body = resp.status, dict(resp.headers), await resp.json()
        async with client.post(server.base_url + "/chat/completions", json=openai_body()) as r:
            assert r.status == 200  # the refusal took nothing from the budget
        clock.advance(60)  # the bucket full again
        anthropic_big = anthropic_body(text="x" * 400, max_tokens=600)
        async with client.post(server.base_url + "/messages", json=anthropic_big) as resp:
            assert resp.status == 200
    assert status == 429
    assert body["error"]["message"].startswith(
        "Request too large for echo on tokens per min (TPM): Limit 600, Requested 700."
    )
    assert "Retry-After" not in headers
    assert headers["x-ratelimit-remaining-tokens"] == "600"
    assert isinstance(classify_status(429, orjson.dumps(body), headers), BadRequest)


def test_output_tokens_are_settled_to_what_was_produced() -> None:
    clock = FakeClock()
    budget = ServerRateLimiter(
        RateLimitSpec(input_tokens_per_minute=1000, output_tokens_per_minute=600), clock=clock
    )
    assert budget.try_acquire(700, input_tokens=100, output_tokens=600) is None
    assert budget.states()["output-tokens"].remaining == 0  # max_tokens reserved
    budget.settle_output(600, 40)  # the answer had 40 tokens
    assert budget.states()["output-tokens"].remaining == 560
    # A max_tokens above the whole output budget was charged the bucket, not more: settling
    # refunds what was charged less what was produced (not the uncapped estimate).
    big = ServerRateLimiter(RateLimitSpec(output_tokens_per_minute=600), clock=FakeClock())
    assert big.try_acquire(2009, input_tokens=9, output_tokens=2000) is None
    big.settle_output(2000, 40)
    assert big.states()["output-tokens"].remaining == 560
    assert budget.states()["input-tokens"].remaining == 900
    refusal = budget.try_acquire(1000, input_tokens=950, output_tokens=50)
    assert refusal is not None and refusal.limit == "input-tokens"


async def test_answers_take_the_latency_plus_the_time_per_output_token() -> None:
    slept: list[float] = []

    async def fake_sleep(seconds: float) -> None:
        slept.append(seconds)

    config = ServerConfig(per_output_token_s=0.01, sleep=fake_sleep)
    async with running_server(config) as server, aiohttp.ClientSession() as client:
        body = openai_body(text="y" * 400, max_tokens=30)  # echo: cut at 30 output tokens
        async with client.post(server.base_url + "/chat/completions", json=body) as resp:
            data = await resp.json()
    assert data["usage"]["completion_tokens"] == 30
    assert slept == [pytest.approx(0.30)]
