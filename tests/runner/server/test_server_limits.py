"""The server-side rate limit: token buckets on an injected clock, and its 429 on the wire."""

from __future__ import annotations

import aiohttp
import pytest

from cotaudit.errors import UsageError
from runner.server.faults import FaultKind, FaultSpec
from runner.server.lifecycle import running_server
from runner.server.server_limits import RateLimitSpec, ServerRateLimiter, format_duration
from runner.server.settings import ServerConfig
from tests.runner.server.helpers import FakeClock, openai_body


def test_requests_bucket_admits_a_minute_then_refuses_with_the_wait() -> None:
    clock = FakeClock()
    limiter = ServerRateLimiter(RateLimitSpec(requests_per_minute=3), clock=clock)
    assert [limiter.try_acquire(1) for _ in range(3)] == [None, None, None]
    refusal = limiter.try_acquire(1)
    assert refusal is not None
    assert refusal.limit == "requests"
    assert refusal.retry_after_s == pytest.approx(20.0)  # 3/min refills one every 20 s
    assert refusal.reset_requests_s == pytest.approx(60.0)
    clock.advance(19.9)
    assert limiter.try_acquire(1) is not None  # a refusal consumes nothing
    clock.advance(0.1)
    assert limiter.try_acquire(1) is None
    assert limiter.remaining() == (0, None)


def test_tokens_bucket_charges_the_request_cost() -> None:
    clock = FakeClock()
    limiter = ServerRateLimiter(RateLimitSpec(tokens_per_minute=600), clock=clock)
    assert limiter.try_acquire(500) is None
    refusal = limiter.try_acquire(200)
    assert refusal is not None and refusal.limit == "tokens"
    assert refusal.retry_after_s == pytest.approx(10.0)  # 100 tokens at 10 tokens/s
    assert refusal.reset_tokens_s == pytest.approx(50.0)
    assert limiter.try_acquire(100) is None
    clock.advance(60)
    assert limiter.remaining() == (None, 600)
    # A request larger than the whole allowance waits for a full bucket, it is not starved.
    assert limiter.try_acquire(10_000) is None


def test_both_limits_must_admit_and_the_longer_wait_is_reported() -> None:
    clock = FakeClock()
    limiter = ServerRateLimiter(RateLimitSpec(60, 120), clock=clock)
    assert limiter.try_acquire(120) is None
    refusal = limiter.try_acquire(60)
    assert refusal is not None
    assert refusal.limit == "tokens"
    assert refusal.retry_after_s == pytest.approx(30.0)
    assert limiter.remaining() == (59, 0)  # the refused request took no request slot


def test_rate_limit_spec_rejects_non_positive_limits() -> None:
    with pytest.raises(UsageError, match="requests_per_minute must be > 0"):
        RateLimitSpec(requests_per_minute=0)
    assert not RateLimitSpec().enabled


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(0.0, "0s"), (0.0201, "21ms"), (1.5, "1.5s"), (20.0, "20s"), (360, "6m0s"), (3725, "1h2m5s")],
)
def test_format_duration_writes_openai_reset_headers(seconds: float, text: str) -> None:
    assert format_duration(seconds) == text


async def test_server_answers_429_with_retry_headers_once_the_limit_is_exceeded() -> None:
    clock = FakeClock()
    spec = RateLimitSpec(requests_per_minute=2, limit_headers="both", retry_after_ms=True)
    config = ServerConfig(rate_limit=spec, clock=clock)
    url_path = "/chat/completions"
    async with running_server(config) as server, aiohttp.ClientSession() as client:
        for _ in range(2):
            async with client.post(server.base_url + url_path, json=openai_body()) as resp:
                assert resp.status == 200
        async with client.post(
            server.base_url + "/messages", json=openai_body(max_tokens=5)
        ) as resp:
            assert resp.status == 429
            assert resp.headers["retry-after"] == "30"
            assert resp.headers["retry-after-ms"] == "30000"
            assert resp.headers["x-ratelimit-reset-requests"] == "1m0s"
            data = await resp.json()
        assert data["error"]["type"] == "rate_limit_error"
        assert "requests per minute" in data["error"]["message"]
        clock.advance(30)
        async with client.post(server.base_url + url_path, json=openai_body()) as resp:
            assert resp.status == 200
        stats = server.stats()
    assert stats["by_status"] == {"200": 3, "429": 1}
    assert stats["faults"] == {}  # a rate-limit refusal is not an injected fault


async def test_refused_requests_draw_no_fault() -> None:
    clock = FakeClock()
    config = ServerConfig(
        rate_limit=RateLimitSpec(requests_per_minute=1),
        faults=FaultSpec(script=(FaultKind.UNAVAILABLE, FaultKind.SERVER_ERROR)),
        clock=clock,
    )
    statuses = []
    async with running_server(config) as server, aiohttp.ClientSession() as client:
        for _ in range(4):
            async with client.post(server.base_url + "/chat/completions", json=openai_body()) as r:
                statuses.append(r.status)
            if r.status == 429:
                clock.advance(60)  # refill the bucket for the next request
        stats = server.stats()
    # 503 (script 1), 429 refused without consuming the script, then 500 (script 2), 429.
    assert statuses == [503, 429, 500, 429]
    assert stats["faults"] == {"503": 1, "500": 1}
