"""Server lifecycle: loopback-only binding, counters, config swaps, threads and fixtures."""

from __future__ import annotations

import socket
import urllib.request
from collections.abc import Callable

import aiohttp
import orjson
import pytest

from cotaudit.errors import UsageError
from runner.server.faults import FaultKind, FaultSpec
from runner.server.lifecycle import ServerThread, running_server, start_server_thread
from runner.server.settings import ServerConfig, check_loopback
from tests.runner.server.helpers import anthropic_body, openai_body


def _get_json(url: str, method: str = "GET") -> dict[str, object]:
    request = urllib.request.Request(url, method=method)
    with urllib.request.urlopen(request, timeout=5) as resp:
        data: dict[str, object] = orjson.loads(resp.read())
    return data


def _post_status(url: str, body: dict[str, object]) -> int:
    request = urllib.request.Request(
        url, data=orjson.dumps(body), headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=5) as resp:
            status: int = resp.status
    except urllib.error.HTTPError as exc:
        status = exc.code
        exc.close()  # an HTTPError holds the response open
    return status


@pytest.mark.parametrize("host", ["127.0.0.1", "127.0.0.2", "::1", "localhost"])
def test_loopback_hosts_are_accepted(host: str) -> None:
    check_loopback(host)


@pytest.mark.parametrize("host", ["0.0.0.0", "192.168.1.10", "::", "example.org", ""])
def test_non_loopback_hosts_are_refused(host: str) -> None:
    with pytest.raises(UsageError, match="loopback only") as info:
        check_loopback(host)
    assert info.value.exit_code == 2


async def test_running_server_refuses_to_bind_a_public_address() -> None:
    with pytest.raises(UsageError, match=r"refusing to bind '0\.0\.0\.0'"):
        async with running_server(ServerConfig(host="0.0.0.0")):
            pass


async def test_counters_count_routes_models_statuses_and_reset() -> None:
    async with running_server() as server, aiohttp.ClientSession() as client:
        assert server.base_url.startswith("http://127.0.0.1:") and server.base_url.endswith("/v1")
        for _ in range(3):
            async with client.post(server.base_url + "/chat/completions", json=openai_body()) as r:
                assert r.status == 200
        async with client.post(server.base_url + "/messages", json=anthropic_body("nope")) as r:
            assert r.status == 404
        async with client.get(server.base_url + "/models") as r:
            assert r.status == 200
        async with client.get(server.root_url + "/stats") as r:
            over_http = await r.json()
        assert over_http == server.stats()
        assert over_http == {
            "requests_total": 5,
            "completions_total": 3,
            "by_route": {"/v1/chat/completions": 3, "/v1/messages": 1, "/v1/models": 1},
            "by_model": {"echo": 3, "nope": 1},
            "by_status": {"200": 4, "404": 1},
            "faults": {},
        }
        async with client.post(server.root_url + "/stats/reset") as r:
            assert (await r.json())["requests_total"] == 0
        assert server.stats()["requests_total"] == 0
        async with client.post(server.base_url + "/chat/completions", json=openai_body()) as r:
            assert r.status == 200
        assert server.stats()["completions_total"] == 1


async def test_configure_swaps_faults_without_restarting() -> None:
    async with running_server() as server, aiohttp.ClientSession() as client:
        url = server.base_url + "/chat/completions"
        async with client.post(url, json=openai_body()) as r:
            assert r.status == 200
        new = server.configure(faults=FaultSpec(script=(FaultKind.BAD_GATEWAY,)))
        assert server.config is new
        async with client.post(url, json=openai_body()) as r:
            assert r.status == 502
        async with client.post(url, json=openai_body()) as r:
            assert r.status == 200
        with pytest.raises(UsageError, match="cannot change"):
            server.configure(port=server.port + 1)


def test_start_server_thread_serves_until_stopped() -> None:
    with start_server_thread(ServerConfig(faults=FaultSpec(script=(FaultKind.FORBIDDEN,)))) as srv:
        url = srv.base_url + "/chat/completions"
        assert _post_status(url, openai_body()) == 403
        assert _post_status(url, openai_body()) == 200
        assert srv.stats()["by_status"] == {"403": 1, "200": 1}
    with pytest.raises(OSError):
        urllib.request.urlopen(srv.root_url + "/stats", timeout=1)
    srv.stop()  # idempotent


def test_start_server_thread_reports_startup_errors_in_the_caller() -> None:
    with pytest.raises(UsageError, match="loopback only"):
        start_server_thread(ServerConfig(host="10.0.0.1"))


def test_session_fixture_serves_and_counts(local_server: ServerThread) -> None:
    before = local_server.stats()["requests_total"]
    assert _post_status(local_server.base_url + "/chat/completions", openai_body()) == 200
    assert local_server.stats()["requests_total"] == before + 1
    assert _get_json(local_server.root_url + "/stats")["requests_total"] == before + 1


def test_make_server_gives_each_test_its_own_configured_server(
    make_server: Callable[[ServerConfig], ServerThread], local_server: ServerThread
) -> None:
    a = make_server(ServerConfig(require_api_key="k-1"))
    b = make_server(ServerConfig())
    assert len({a.port, b.port, local_server.port}) == 3
    assert _post_status(a.base_url + "/chat/completions", openai_body()) == 401
    assert _post_status(b.base_url + "/chat/completions", openai_body()) == 200


def _can_bind(host: str) -> bool:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:
        with socket.socket(family) as sock:
            sock.bind((host, 0))
    except OSError:
        return False
    return True


@pytest.mark.parametrize("host", ["localhost", "::1"])
async def test_other_loopback_names_serve_on_the_url_they_report(host: str) -> None:
    if host == "::1" and not _can_bind(host):
        pytest.skip("no IPv6 loopback on this machine")
    async with (
        running_server(ServerConfig(host=host)) as server,
        aiohttp.ClientSession() as client,
        client.post(server.base_url + "/chat/completions", json=openai_body()) as resp,
    ):
        assert resp.status == 200
