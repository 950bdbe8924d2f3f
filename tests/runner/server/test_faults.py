"""Each fault is injected at its configured rate and looks as specified on the wire."""

from __future__ import annotations

import asyncio
import math

import aiohttp
import orjson
import pytest

from cotaudit.errors import UsageError
from runner.config import EndpointConfig
from runner.providers import make_provider
from runner.providers.base import RateLimited
from runner.request_spec import make_spec
from runner.server.faults import (
    FaultInjector,
    FaultKind,
    FaultSpec,
    fault_for_model,
    parse_fault_kind,
)
from runner.server.lifecycle import running_server
from runner.server.settings import ServerConfig
from runner.transport import default_transport
from tests.runner.server.helpers import anthropic_body, openai_body

CHAT = "/chat/completions"


def scripted(
    *kinds: FaultKind | None, retry_after_s: float = 1.0, hang_s: float = 5.0
) -> ServerConfig:
    """A server whose first requests get ``kinds``, in order."""
    spec = FaultSpec(script=kinds, retry_after_s=retry_after_s, hang_s=hang_s)
    return ServerConfig(faults=spec)


async def test_scripted_faults_hit_exactly_the_first_requests_in_order() -> None:
    script = (FaultKind.UNAVAILABLE, None, FaultKind.SERVER_ERROR)
    async with running_server(scripted(*script)) as server, aiohttp.ClientSession() as client:
        statuses = []
        for _ in range(5):
            async with client.post(server.base_url + CHAT, json=openai_body()) as resp:
                statuses.append(resp.status)
                await resp.read()
        stats = server.stats()
    assert statuses == [503, 200, 500, 200, 200]
    assert stats["faults"] == {"503": 1, "500": 1}
    assert stats["by_status"] == {"503": 1, "500": 1, "200": 3}


@pytest.mark.parametrize(
    ("kind", "status", "openai_type"),
    [
        (FaultKind.SERVER_ERROR, 500, "server_error"),
        (FaultKind.BAD_GATEWAY, 502, "server_error"),
        (FaultKind.UNAVAILABLE, 503, "server_error"),
        (FaultKind.BAD_REQUEST, 400, "invalid_request_error"),
        (FaultKind.UNAUTHORIZED, 401, "invalid_request_error"),
        (FaultKind.FORBIDDEN, 403, "permission_error"),
        (FaultKind.NOT_FOUND, 404, "invalid_request_error"),
    ],
)
async def test_status_faults_answer_the_status_with_a_protocol_error_body(
    kind: FaultKind, status: int, openai_type: str
) -> None:
    async with (
        running_server(scripted(kind, kind)) as server,
        aiohttp.ClientSession() as client,
    ):
        async with client.post(server.base_url + CHAT, json=openai_body()) as resp:
            assert resp.status == status
            data = await resp.json()
        assert data["error"]["type"] == openai_type
        assert kind.value in data["error"]["message"]
        async with client.post(server.base_url + "/messages", json=anthropic_body()) as resp:
            assert resp.status == status
            data = await resp.json()
        assert data["type"] == "error"
        assert kind.value in data["error"]["message"]


async def test_injected_429_carries_retry_after_headers() -> None:
    async with (
        running_server(scripted(FaultKind.RATE_LIMIT, retry_after_s=2.5)) as server,
        aiohttp.ClientSession() as client,
    ):
        async with client.post(server.base_url + CHAT, json=openai_body()) as resp:
            assert resp.status == 429
            assert resp.headers["retry-after"] == "3"  # whole seconds, rounded up
            assert resp.headers["retry-after-ms"] == "2500"
            assert resp.headers["x-ratelimit-reset-requests"] == "2.5s"
            data = await resp.json()
        assert data["error"]["code"] == "rate_limit_exceeded"


async def test_injected_429_on_the_anthropic_route_says_retry_after_alone() -> None:
    # Anthropic's 429 carries retry-after in whole seconds, never retry-after-ms (which the
    # client prefers): the route sends what its provider sends, so the client's plain
    # retry-after path is the one a test of the Anthropic route exercises.
    async with (
        running_server(
            scripted(FaultKind.RATE_LIMIT, FaultKind.RATE_LIMIT, retry_after_s=2.5)
        ) as server,
        aiohttp.ClientSession() as client,
    ):
        async with client.post(server.base_url + "/messages", json=anthropic_body()) as resp:
            assert resp.status == 429
            assert resp.headers["retry-after"] == "3"
            assert "retry-after-ms" not in resp.headers
            assert not [h for h in resp.headers if h.lower().startswith("x-ratelimit")]
            assert (await resp.json())["error"]["type"] == "rate_limit_error"
        endpoint = EndpointConfig("a", "anthropic", "echo", base_url=server.base_url)
        spec = make_spec(
            endpoint.identity(),
            task="t",
            problem_id="p",
            condition="prompt",
            messages=[{"role": "user", "content": "hi"}],
            temperature=0.0,
        )
        transport = default_transport(1)
        try:
            with pytest.raises(RateLimited) as info:
                await make_provider(endpoint).complete(spec, transport)
        finally:
            await transport.close()
    assert info.value.retry_after_s == 3.0  # the whole seconds, as a client of Anthropic waits


async def test_reset_fault_resets_the_connection() -> None:
    async with (
        running_server(scripted(FaultKind.RESET)) as server,
        aiohttp.ClientSession() as client,
    ):
        with pytest.raises(aiohttp.ClientOSError) as info:
            async with client.post(server.base_url + CHAT, json=openai_body()) as resp:
                await resp.read()
        assert isinstance(info.value, ConnectionResetError) or "reset" in str(info.value).lower()
        # The server survives and the next request is answered normally.
        async with client.post(server.base_url + CHAT, json=openai_body()) as resp:
            assert resp.status == 200
        assert server.stats()["by_status"] == {"none": 1, "200": 1}


async def test_malformed_fault_is_200_with_a_body_that_is_not_json() -> None:
    async with (
        running_server(scripted(FaultKind.MALFORMED)) as server,
        aiohttp.ClientSession() as client,
    ):
        async with client.post(server.base_url + CHAT, json=openai_body()) as resp:
            assert resp.status == 200
            assert resp.content_type == "application/json"
            raw = await resp.read()
        assert len(raw) == int(resp.headers["Content-Length"])
        with pytest.raises(orjson.JSONDecodeError):
            orjson.loads(raw)
        assert raw.startswith(b'{"id":"chatcmpl-')


async def test_truncated_fault_sends_less_than_its_content_length() -> None:
    async with (
        running_server(scripted(FaultKind.TRUNCATED)) as server,
        aiohttp.ClientSession() as client,
    ):
        async with client.post(server.base_url + "/messages", json=anthropic_body()) as resp:
            assert resp.status == 200
            announced = int(resp.headers["Content-Length"])
            with pytest.raises(aiohttp.ClientPayloadError, match="content length"):
                await resp.read()
        assert announced > 0
        assert server.stats()["faults"] == {"truncated": 1}


async def test_hang_fault_never_answers_until_the_client_times_out() -> None:
    async with (
        running_server(scripted(FaultKind.HANG, hang_s=5.0)) as server,
        aiohttp.ClientSession() as client,
    ):
        # Only the read is bounded: a connect cut short under load would leave the hang to the
        # second request.
        timeout = aiohttp.ClientTimeout(total=None, sock_connect=10, sock_read=0.05)
        with pytest.raises(asyncio.TimeoutError):
            async with client.post(server.base_url + CHAT, json=openai_body(), timeout=timeout):
                pass
        async with client.post(server.base_url + CHAT, json=openai_body()) as resp:
            assert resp.status == 200


async def test_hang_is_bounded_then_the_connection_is_reset() -> None:
    async with (
        running_server(scripted(FaultKind.HANG, hang_s=0.02)) as server,
        aiohttp.ClientSession() as client,
    ):
        with pytest.raises(aiohttp.ClientConnectionError):
            async with client.post(
                server.base_url + CHAT, json=openai_body(), timeout=aiohttp.ClientTimeout(total=5)
            ) as resp:
                await resp.read()


@pytest.mark.parametrize("kind", list(FaultKind))
async def test_magic_model_names_always_fail_their_way(kind: FaultKind) -> None:
    assert fault_for_model(f"fail-{kind.value}") is kind
    if kind.status is None:
        return  # transport faults are covered above
    async with running_server(ServerConfig()) as server, aiohttp.ClientSession() as client:
        for _ in range(2):
            body = openai_body(f"fail-{kind.value}")
            async with client.post(server.base_url + CHAT, json=body) as resp:
                assert resp.status == kind.status
        assert server.stats()["faults"] == {kind.value: 2}


def test_fault_for_model_ignores_ordinary_names() -> None:
    assert fault_for_model("echo") is None
    assert fault_for_model("fail-999") is None


def test_injector_draws_each_fault_at_its_rate() -> None:
    rates = {kind: 0.005 * (i + 1) for i, kind in enumerate(FaultKind)}  # 0.005, 0.01, ...
    assert sum(rates.values()) < 1
    injector = FaultInjector(FaultSpec(rates=rates, seed=7))
    n = 40_000
    draws = [injector.draw() for _ in range(n)]
    for kind, rate in [*rates.items(), (None, 1 - sum(rates.values()))]:
        count = draws.count(kind)
        sd = math.sqrt(n * rate * (1 - rate))
        assert abs(count - n * rate) < 4 * sd, (kind, count, n * rate)


def test_injector_is_reproducible_by_seed_and_differs_across_seeds() -> None:
    spec = FaultSpec(rates={FaultKind.SERVER_ERROR: 0.3}, seed=1)
    a = FaultInjector(spec)
    b = FaultInjector(spec)
    c = FaultInjector(FaultSpec(rates={FaultKind.SERVER_ERROR: 0.3}, seed=2))
    seq_a = [a.draw() for _ in range(200)]
    assert seq_a == [b.draw() for _ in range(200)]
    assert seq_a != [c.draw() for _ in range(200)]


async def test_server_injects_exactly_the_seeded_sequence() -> None:
    spec = FaultSpec(
        rates={
            FaultKind.RATE_LIMIT: 0.1,
            FaultKind.SERVER_ERROR: 0.05,
            FaultKind.UNAVAILABLE: 0.05,
            FaultKind.FORBIDDEN: 0.03,
            FaultKind.MALFORMED: 0.05,
            FaultKind.TRUNCATED: 0.05,
            FaultKind.RESET: 0.05,
        },
        seed=11,
        retry_after_s=0.0,
    )
    reference = FaultInjector(spec)
    n = 200
    expected = [reference.draw() for _ in range(n)]
    seen: list[str] = []
    async with (
        running_server(ServerConfig(faults=spec)) as server,
        aiohttp.ClientSession() as client,
    ):
        for _ in range(n):  # one at a time, so request i meets draw i
            try:
                async with client.post(server.base_url + CHAT, json=openai_body()) as resp:
                    raw = await resp.read()
                try:
                    orjson.loads(raw)
                    seen.append(str(resp.status))
                except orjson.JSONDecodeError:
                    seen.append("malformed")
            except aiohttp.ClientPayloadError:
                seen.append("truncated")
            except aiohttp.ClientOSError:
                seen.append("reset")
        stats = server.stats()
    assert seen == [k.value if k is not None else "200" for k in expected]
    counts = {k.value: expected.count(k) for k in set(expected) if k is not None}
    assert stats["faults"] == counts
    assert stats["requests_total"] == n
    assert all(counts.get(k.value, 0) > 0 for k in spec.rates)  # every kind really occurred


def test_fault_spec_rejects_bad_rates() -> None:
    with pytest.raises(UsageError, match="must be in"):
        FaultSpec(rates={FaultKind.RESET: 1.5})
    with pytest.raises(UsageError, match="sum to"):
        FaultSpec(rates={FaultKind.RESET: 0.6, FaultKind.HANG: 0.6})
    with pytest.raises(UsageError, match="unknown fault 'boom'"):
        parse_fault_kind("boom")
    assert parse_fault_kind(" Reset ") is FaultKind.RESET


@pytest.mark.parametrize("hang_s", [0.0, -1.0, float("nan"), float("inf")])
def test_fault_spec_refuses_a_hang_that_is_no_hang(hang_s: float) -> None:
    # 0 s would reset at once (the reset fault); inf or nan would hold the connection forever.
    with pytest.raises(UsageError, match="hang_s must be finite seconds > 0"):
        FaultSpec(hang_s=hang_s)
    with pytest.raises(UsageError, match="retry_after_s must be finite seconds >= 0"):
        FaultSpec(retry_after_s=float("nan"))
