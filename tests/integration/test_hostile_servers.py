"""Servers that misbehave against the runner (issue 18): one that echoes the key into its
error bodies, one that sends megabytes for a 64-token answer; and the request time budget as a
hard cap, on an injected clock."""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import quote

import orjson
import pytest
from aiohttp import web

from cotaudit.schema import read_records
from runner.config import RetrySettings, SweepConfig, config_from_mapping
from runner.engine import run_sweep
from runner.redaction import forget_keys
from runner.server.faults import FaultKind, FaultSpec
from runner.server.lifecycle import ServerThread
from runner.server.settings import ServerConfig
from runner.transport import AnswerTimeout, HttpAnswer, Route

REPO = Path(__file__).resolve().parents[2]
KEY = "sk-canary-ECHO-0123456789abcdefXYZ"

ECHO_CONFIG = """\
run_dir = "run"
cache_dir = "cache"
[task]
kind = "prontoqa"
source = "generate"
n = 3
seed = 0
samples = 1
[[endpoints]]
name = "echoer"
provider = "openai"
model = "faithful"
base_url = "BASE_URL"
api_key_env = "COTAUDIT_ECHO_KEY"
requests_per_minute = 600000
tokens_per_minute = 1e10
max_concurrency = 1
[retry]
max_attempts = 1
"""


def forms_of(key: str) -> list[bytes]:
    raw = key.encode()
    return [
        raw,
        quote(key, safe="").encode(),
        base64.b64encode(raw),
        base64.b64encode(raw).rstrip(b"="),
        raw[:20],  # a key cut in two by an excerpt still gives away its start
    ]


def test_keys_echoed_by_a_server_reach_no_file_and_no_output(
    tmp_path: Path, make_server: Callable[[ServerConfig], ServerThread]
) -> None:
    # 401 and 403 (two: under the three that stop an endpoint), then 500, 502, 503: every
    # body repeats the request's Authorization header.
    script = (
        FaultKind.UNAUTHORIZED,
        FaultKind.FORBIDDEN,
        FaultKind.SERVER_ERROR,
        FaultKind.BAD_GATEWAY,
        FaultKind.UNAVAILABLE,
    )
    server = make_server(ServerConfig(faults=FaultSpec(script=script, echo_credentials=True)))
    config = tmp_path / "echo.toml"
    config.write_text(ECHO_CONFIG.replace("BASE_URL", server.base_url))
    env = {**os.environ, "PYTHONPATH": str(REPO), "COTAUDIT_ECHO_KEY": KEY}
    outputs = []
    for args in (
        ["run", str(config), "--no-preflight"],
        ["run", str(config)],  # the rerun: reports the stored errors, sends the rest
        ["evaluate", str(tmp_path / "run"), "--quiet", "--no-figures"],
    ):
        done = subprocess.run(
            [sys.executable, "-m", "cotaudit", *args],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            timeout=300,
        )
        outputs.append(done)
    first = outputs[0]
    assert first.returncode == 3, first.stderr.decode()
    err = first.stderr.decode()
    assert "5 requests failed for good (3 ServerError, 2 AuthError)" in err, err
    errors = [
        r["error"]
        for r in read_records(tmp_path / "run" / "results.jsonl")
        if r["kind"] == "response" and r["error"] is not None
    ]
    assert len(errors) == 5
    # The server did echo the header, and the records say so without the key.
    assert all("Bearer [REDACTED]" in e["body"] and "[REDACTED]" in e["message"] for e in errors)
    assert outputs[2].returncode == 0, outputs[2].stderr.decode()
    assert (tmp_path / "run" / "eval" / "report.json").exists()

    written = [p for p in tmp_path.rglob("*") if p.is_file() and p.name != "echo.toml"]
    assert any(p.parent.name == "cache" for p in written)
    leaks = [
        str(p.relative_to(tmp_path))
        for p in written
        for form in forms_of(KEY)
        if form in p.read_bytes()
    ]
    leaks += [
        f"output of cotaudit {' '.join(done.args[3:5])}"
        for done in outputs
        for form in forms_of(KEY)
        if form in done.stdout + done.stderr
    ]
    assert not leaks, leaks


class Hostile:
    """An OpenAI-compatible server (real HTTP on loopback) whose answers are 10 MB long."""

    def __init__(self) -> None:
        self.big = "x" * (10 * 1024 * 1024)

    async def completions(self, request: web.Request) -> web.StreamResponse:
        body = orjson.dumps(
            {
                "choices": [
                    {"message": {"role": "assistant", "content": self.big}, "finish_reason": "stop"}
                ],
                "usage": {"prompt_tokens": 5, "completion_tokens": 64},
            }
        )
        if request.query.get("chunked") or "chunked" in request.path:
            response = web.StreamResponse()
            response.enable_chunked_encoding()
            await response.prepare(request)
            for start in range(0, len(body), 1 << 20):
                await response.write(body[start : start + (1 << 20)])
            await response.write_eof()
            return response
        return web.Response(body=body, content_type="application/json")


@contextmanager
def _serving(app: web.Application) -> Iterator[str]:
    """``app`` on loopback, in a thread with its own event loop; yields its base URL."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    loop = asyncio.new_event_loop()
    runner = web.AppRunner(app)
    ready = threading.Event()

    def serve() -> None:
        asyncio.set_event_loop(loop)
        loop.run_until_complete(runner.setup())
        loop.run_until_complete(web.SockSite(runner, sock).start())
        ready.set()
        loop.run_forever()
        loop.run_until_complete(runner.cleanup())
        loop.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    ready.wait(10)
    yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    loop.call_soon_threadsafe(loop.stop)
    thread.join(10)


@pytest.fixture
def hostile_url() -> Iterator[str]:
    """The hostile server on loopback."""
    app = web.Application()
    hostile = Hostile()
    app.router.add_post("/v1/chat/completions", hostile.completions)
    app.router.add_post("/chunked/v1/chat/completions", hostile.completions)
    with _serving(app) as url:
        yield url


GATEWAY_SECRET = "Bearer sk-helicone-canary-0123456789abcdefXYZ"


class Gateway:
    """A gateway that reads its own key from a header of its own (``Helicone-Auth``), and
    echoes that header into the body of its first answer, an error (as a careless one may)."""

    def __init__(self) -> None:
        self.seen: list[str | None] = []

    async def completions(self, request: web.Request) -> web.Response:
        self.seen.append(request.headers.get("Helicone-Auth"))
        if len(self.seen) == 1:
            message = f"upstream failed (request headers: Helicone-Auth: {self.seen[0]})"
            return web.json_response({"error": {"message": message}}, status=500)
        body = orjson.dumps(
            {
                "choices": [
                    {"message": {"role": "assistant", "content": "hi"}, "finish_reason": "stop"}
                ],
                "usage": {"prompt_tokens": 5, "completion_tokens": 1},
            }
        )
        return web.Response(body=body, content_type="application/json")


def test_a_header_secret_from_headers_env_is_sent_and_reaches_no_file_and_no_output(
    tmp_path: Path,
) -> None:
    # A gateway's key goes in a header the endpoint's api_key_env does not fill; written into
    # headers it would be copied into the manifest (and is refused), so headers_env names the
    # variable holding it.
    gateway = Gateway()
    app = web.Application()
    app.router.add_post("/v1/chat/completions", gateway.completions)
    (tmp_path / "p.jsonl").write_text('{"id": "a", "prompt": "hi"}\n{"id": "b", "prompt": "yo"}\n')
    env = {**os.environ, "PYTHONPATH": str(REPO), "COTAUDIT_GATEWAY_AUTH": GATEWAY_SECRET}
    with _serving(app) as url:
        config = tmp_path / "gateway.toml"
        config.write_text(
            'run_dir = "run"\ncache_dir = "cache"\n[task]\nkind = "prompts"\npath = "p.jsonl"\n'
            f'[[endpoints]]\nname = "gw"\nprovider = "local"\nmodel = "m"\nbase_url = "{url}/v1"\n'
            'max_concurrency = 1\nheaders_env = { "Helicone-Auth" = "COTAUDIT_GATEWAY_AUTH" }\n'
            "[retry]\nmax_attempts = 2\nbase_delay_s = 0.01\n"
        )
        done = subprocess.run(
            [sys.executable, "-m", "cotaudit", "run", str(config), "--no-preflight"],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            timeout=120,
        )
        unset = subprocess.run(
            [sys.executable, "-m", "cotaudit", "run", str(config), "--run-dir", "run2"],
            cwd=tmp_path,
            env={k: v for k, v in env.items() if k != "COTAUDIT_GATEWAY_AUTH"},
            capture_output=True,
            timeout=120,
        )
    assert done.returncode == 0, done.stderr.decode()
    assert gateway.seen == [GATEWAY_SECRET] * 3  # the first answer an error, then two
    manifest = orjson.loads((tmp_path / "run" / "manifest.json").read_bytes())
    (endpoint,) = manifest["config"]["endpoints"]
    assert endpoint["headers_env"] == {"Helicone-Auth": "COTAUDIT_GATEWAY_AUTH"}
    assert unset.returncode == 2
    assert "environment variable COTAUDIT_GATEWAY_AUTH is not set" in unset.stderr.decode()
    assert not (tmp_path / "run2").exists()
    written = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert any(p.parent.name == "cache" for p in written)
    leaks = [
        str(p.relative_to(tmp_path))
        for p in written
        for form in forms_of(GATEWAY_SECRET.partition(" ")[2])
        if form in p.read_bytes()
    ]
    leaks += [
        "output"
        for out in (done, unset)
        for form in forms_of(GATEWAY_SECRET.partition(" ")[2])
        if form in out.stdout + out.stderr
    ]
    assert not leaks, leaks


def _one_prompt_config(tmp_path: Path, base_url: str, **endpoint: object) -> SweepConfig:
    (tmp_path / "p.jsonl").write_text('{"id": "a", "prompt": "hi"}\n')
    return config_from_mapping(
        {
            "run_dir": "run",
            "cache_dir": "cache",
            "task": {"kind": "prompts", "path": "p.jsonl"},
            "endpoints": [
                {
                    "name": "hostile",
                    "provider": "local",
                    "model": "echo",
                    "base_url": base_url,
                    "max_tokens": 64,
                    **endpoint,
                }
            ],
        },
        config_dir=tmp_path,
    )


@pytest.mark.parametrize("route", ["/v1", "/chunked/v1"])
async def test_an_answer_far_beyond_max_tokens_is_refused_and_recorded_as_such(
    tmp_path: Path, hostile_url: str, route: str
) -> None:
    config = _one_prompt_config(tmp_path, hostile_url + route)
    summary = await run_sweep(config, progress=False)
    assert summary.error_types == {"AnswerTooLong": 1}
    (record,) = [
        r for r in read_records(tmp_path / "run" / "results.jsonl") if r["kind"] == "response"
    ]
    assert record["text"] is None and record["error"]["type"] == "AnswerTooLong"
    # The documented limit for max_tokens = 64: 64 KiB + 64 bytes per token.
    assert "larger than the limit of 69,632 bytes" in record["error"]["message"]
    assert record["attempts"] == 1  # refused for good, not retried
    assert (tmp_path / "run" / "results.jsonl").stat().st_size < 100_000


class SlowTransport:
    """Every attempt runs into its timeout, on the test's clock (nothing sleeps for real)."""

    def __init__(self, now: list[float]) -> None:
        self.now = now
        self.timeouts: list[float] = []

    async def post(
        self, route: Route, body: bytes, *, timeout_s: float | None = None
    ) -> HttpAnswer:
        allowed = route.timeout_s if timeout_s is None else timeout_s
        self.timeouts.append(allowed)
        self.now[0] += allowed
        raise AnswerTimeout(f"no complete answer within {allowed:g} s")

    async def close(self) -> None:
        return None


async def test_the_time_budget_caps_a_requests_total_time(tmp_path: Path) -> None:
    # A 15 s budget with a 10 s timeout: the second attempt gets what is left, not 10 s more.
    config = _one_prompt_config(tmp_path, "http://127.0.0.1:9/v1", timeout_s=10)
    config = dataclasses.replace(
        config,
        retry=RetrySettings(max_attempts=8, base_delay_s=0.5, max_delay_s=0.5, time_budget_s=15),
    )
    now = [1000.0]

    async def sleep(seconds: float) -> None:
        now[0] += seconds

    transport = SlowTransport(now)
    summary = await run_sweep(
        config,
        progress=False,
        clock=lambda: now[0],
        sleep=sleep,
        transport_factory=lambda _: transport,
    )
    (record,) = [
        r for r in read_records(tmp_path / "run" / "results.jsonl") if r["kind"] == "response"
    ]
    assert record["error"]["type"] == "Timeout"
    assert record["latency_s"] <= 15.0 + 1e-6
    assert transport.timeouts[0] == 10.0 and len(transport.timeouts) == 2
    assert transport.timeouts[1] == pytest.approx(15.0 - 10.0 - 0.5, abs=0.6)
    assert summary.error_types == {"Timeout": 1}


async def test_by_default_a_slow_answer_is_waited_for_and_not_sent_again(tmp_path: Path) -> None:
    # The default per-attempt timeout is the official SDKs' 600 s: a reasoning model's
    # minutes-long answer is not cut off (and re-sent, and billed again) at 120 s. At the
    # default time budget (also 600 s), an attempt that does time out is the only one.
    config = _one_prompt_config(tmp_path, "http://127.0.0.1:9/v1")
    assert config.endpoints[0].timeout_s == 600.0 and config.retry == RetrySettings()
    now = [1000.0]

    async def sleep(seconds: float) -> None:
        now[0] += seconds

    transport = SlowTransport(now)
    await run_sweep(
        config,
        progress=False,
        clock=lambda: now[0],
        sleep=sleep,
        transport_factory=lambda _: transport,
    )
    (record,) = [
        r for r in read_records(tmp_path / "run" / "results.jsonl") if r["kind"] == "response"
    ]
    assert transport.timeouts == [600.0]  # one send; at 120 s it was five
    assert record["attempt_outcomes"] == ["timeout"]
    assert record["error"]["type"] == "Timeout" and record["error"]["maybe_sent"] is True
    # An explicit timeout_s still holds, and a timed-out attempt is still retried within
    # the budget.
    (tmp_path / "short").mkdir()
    shorter = _one_prompt_config(tmp_path / "short", "http://127.0.0.1:9/v1", timeout_s=250)
    transport = SlowTransport(now)
    await run_sweep(
        shorter,
        progress=False,
        clock=lambda: now[0],
        sleep=sleep,
        transport_factory=lambda _: transport,
    )
    assert transport.timeouts[:2] == [250.0, 250.0] and len(transport.timeouts) == 3


@pytest.fixture(autouse=True)
def _no_keys_between_tests() -> None:
    forget_keys()
