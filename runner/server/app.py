"""The local model server: an aiohttp.web app speaking the OpenAI and Anthropic protocols.

Routes (all on loopback only):

- ``POST /v1/chat/completions``: OpenAI chat completions.
- ``POST /v1/messages``: Anthropic Messages (``system`` apart, ``content`` blocks).
- ``GET /v1/models``: the registered model names (OpenAI list shape).
- ``GET /stats``, ``POST /stats/reset``: what the server has served (see :class:`ServerStats`).

A request goes through, in order: API-key check (when ``require_api_key`` is set), body
parsing (400), server rate limit (429), fault choice and injection (magic ``fail-<kind>``
model name, then the fault script/rates), latency, model resolution (404), the model itself
(a pure function run inline), stop sequences and ``max_tokens`` truncation, and the
protocol's response body. Models are registered in :mod:`runner.server.models`.

Entry points: :func:`running_server` (async context manager, for tests in an event loop),
:func:`start_server_thread` (a server on its own thread and loop, for synchronous callers,
subprocess-based tests and benchmarks) and ``cotaudit serve``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import importlib
import ipaddress
import logging
import math
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any, ClassVar, TypedDict

import orjson
from aiohttp import web

from cotaudit.constants import LOCAL_HOST, SERVER_SHUTDOWN_TIMEOUT_S, SERVER_START_TIMEOUT_S
from cotaudit.errors import UsageError
from runner.server import faults
from runner.server.faults import FaultInjector, FaultKind, FaultSpec
from runner.server.latency import LatencySampler, LatencySpec
from runner.server.models import (
    Completion,
    Model,
    UnknownPrompt,
    approx_tokens,
    known_models,
    load_builtin_models,
    resolve_model,
)
from runner.server.server_limits import (
    Clock,
    RateLimitSpec,
    Refusal,
    ServerRateLimiter,
    format_duration,
)

_log = logging.getLogger(__name__)

Sleep = Callable[[float], Awaitable[None]]
JSON_TYPE = "application/json"
ROUTE_OPENAI = "/v1/chat/completions"
ROUTE_ANTHROPIC = "/v1/messages"
ROUTE_MODELS = "/v1/models"


@dataclass(frozen=True)
class ServerConfig:
    """Everything that shapes the server's behaviour; immutable, swap it with ``configure``.

    ``replay`` paths are handed to ``runner.server.replay.configure(paths)`` when the server
    starts (the seam through which replay models learn their recorded outputs). ``clock``
    drives the rate limiter and ``sleep`` the latency, so tests can inject both.
    """

    host: str = LOCAL_HOST
    port: int = 0  # 0 = any free port
    latency: LatencySpec = field(default_factory=LatencySpec)
    latency_seed: int = 0
    faults: FaultSpec = field(default_factory=FaultSpec)
    rate_limit: RateLimitSpec = field(default_factory=RateLimitSpec)
    require_api_key: str | None = field(default=None, repr=False)  # never printed
    replay: tuple[Path, ...] = ()
    shutdown_timeout_s: float = SERVER_SHUTDOWN_TIMEOUT_S
    clock: Clock = field(default=time.monotonic, compare=False, repr=False)
    sleep: Sleep = field(default=asyncio.sleep, compare=False, repr=False)


def check_loopback(host: str) -> None:
    """Refuse any host that is not a loopback address (the server has no authentication)."""
    if host == "localhost":
        return
    try:
        loopback = ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = False
    if not loopback:
        raise UsageError(
            f"refusing to bind {host!r}: the local model server listens on loopback only",
            where="--host",
            fix=f"use {LOCAL_HOST} (or ::1 / localhost)",
        )


def configure_replay(paths: Sequence[Path]) -> None:
    """Give replay sources to ``runner.server.replay.configure`` (no-op for no paths)."""
    if not paths:
        return
    try:
        module = importlib.import_module("runner.server.replay")
    except ModuleNotFoundError as exc:
        if exc.name != "runner.server.replay":
            raise
        module = None
    configure = getattr(module, "configure", None)
    if configure is None:
        raise UsageError(
            "replay sources were given but this build has no replay models",
            where="--replay",
            fix="drop --replay, or install a build with runner/server/replay.py",
        )
    configure(tuple(paths))


class StatsSnapshot(TypedDict):
    """What ``GET /stats`` and :meth:`ServerHandle.stats` return (see :class:`ServerStats`)."""

    requests_total: int
    completions_total: int
    by_route: dict[str, int]
    by_model: dict[str, int]
    by_status: dict[str, int]
    faults: dict[str, int]


class ServerStats:
    """Counters of what the server answered; thread-safe (read from other threads).

    ``requests_total`` counts every request on the ``/v1`` routes; ``completions_total`` the
    ones answered with a model completion (200, including malformed/truncated faults);
    ``by_status`` keys are the status codes sent, ``"none"`` for resets and hangs.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._zero()

    def _zero(self) -> None:
        self.requests_total = 0
        self.completions_total = 0
        self.by_route: dict[str, int] = {}
        self.by_model: dict[str, int] = {}
        self.by_status: dict[str, int] = {}
        self.faults: dict[str, int] = {}

    def record(
        self,
        route: str,
        model: str | None,
        status: str,
        fault: str | None,
        *,
        completed: bool = False,
    ) -> None:
        """Count one request; ``completed`` when a model produced its answer."""
        with self._lock:
            self.requests_total += 1
            if completed:
                self.completions_total += 1
            self.by_route[route] = self.by_route.get(route, 0) + 1
            if model is not None:
                self.by_model[model] = self.by_model.get(model, 0) + 1
            self.by_status[status] = self.by_status.get(status, 0) + 1
            if fault is not None:
                self.faults[fault] = self.faults.get(fault, 0) + 1

    def snapshot(self) -> StatsSnapshot:
        """A consistent copy of every counter."""
        with self._lock:
            return {
                "requests_total": self.requests_total,
                "completions_total": self.completions_total,
                "by_route": dict(self.by_route),
                "by_model": dict(self.by_model),
                "by_status": dict(self.by_status),
                "faults": dict(self.faults),
            }

    def reset(self) -> None:
        with self._lock:
            self._zero()


@dataclass(frozen=True, slots=True)
class ParsedRequest:
    """A chat request in protocol-neutral form, as models receive it."""

    model: str
    messages: list[dict[str, str]]
    # temperature, top_p, max_tokens, seed, stop (list or None), plus any hint fields
    params: dict[str, Any]


class BadRequest(Exception):
    """The request body is not a valid request for the route (answered with 400)."""


def _text_of(content: Any, where: str) -> str:
    """Message content as text: a string, or the text blocks/parts of a list."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for block in content:
            if not isinstance(block, dict) or block.get("type") != "text":
                raise BadRequest(f"{where}: only text content blocks are supported")
            parts.append(str(block.get("text", "")))
        return "".join(parts)
    raise BadRequest(f"{where}: content must be a string or a list of text blocks")


def _messages(raw: Any) -> list[dict[str, str]]:
    if not isinstance(raw, list) or not raw:
        raise BadRequest("'messages' must be a non-empty list")
    out = []
    for i, msg in enumerate(raw):
        if not isinstance(msg, dict) or not isinstance(msg.get("role"), str):
            raise BadRequest(f"messages[{i}] must be an object with a 'role'")
        out.append({"role": msg["role"], "content": _text_of(msg.get("content"), f"messages[{i}]")})
    return out


def _stop_list(value: Any, name: str) -> list[str] | None:
    if value is None:
        return None
    if isinstance(value, str):
        return [value]
    if isinstance(value, list) and all(isinstance(s, str) for s in value):
        return list(value)
    raise BadRequest(f"'{name}' must be a string or a list of strings")


# Body fields the protocols define; any other scalar field (and each scalar entry of a
# ``metadata`` object) is passed to the model in ``params`` as a hint - e.g. ``replicate``,
# ``sample_index`` or ``condition``, which simulated reasoners and replay read.
_PROTOCOL_FIELDS = frozenset(
    {
        "model",
        "messages",
        "system",
        "temperature",
        "top_p",
        "max_tokens",
        "max_completion_tokens",
        "n",
        "seed",
        "stop",
        "stop_sequences",
        "stream",
        "metadata",
    }
)
_SCALARS = (str, int, float, bool)


def _common_params(
    body: Mapping[str, Any], stop: list[str] | None, max_tokens: Any
) -> dict[str, Any]:
    if body.get("stream"):
        raise BadRequest("'stream' is not supported by the local server; send stream=false")
    if body.get("n", 1) != 1:
        raise BadRequest("'n' must be 1: the local server returns one choice per request")
    if max_tokens is not None and (not isinstance(max_tokens, int) or max_tokens < 1):
        raise BadRequest("'max_tokens' must be a positive integer")
    params: dict[str, Any] = {}
    for key, value in body.items():
        if key not in _PROTOCOL_FIELDS and isinstance(value, _SCALARS):
            params[key] = value
    metadata = body.get("metadata")
    if isinstance(metadata, dict):
        for key, value in metadata.items():
            if isinstance(value, _SCALARS):
                params.setdefault(key, value)
    params["temperature"] = body.get("temperature")
    params["top_p"] = body.get("top_p")
    params["max_tokens"] = max_tokens
    params["seed"] = body.get("seed")
    params["stop"] = stop
    return params


class _Protocol:
    """How one wire protocol reads requests and writes answers and errors."""

    route: str
    error_types: ClassVar[Mapping[int, str]]

    def parse(self, body: Mapping[str, Any]) -> ParsedRequest:
        raise NotImplementedError

    def api_key(self, request: web.BaseRequest) -> str | None:
        """The key the client sent (``Authorization: Bearer`` or ``x-api-key``)."""
        auth = request.headers.get("Authorization")
        if auth is not None and auth.startswith("Bearer "):
            return auth[7:]
        return request.headers.get("x-api-key")

    def render(
        self, serial: int, req: ParsedRequest, done: Completion, stop_hit: str | None
    ) -> bytes:
        raise NotImplementedError

    def error_body(self, status: int, message: str) -> bytes:
        raise NotImplementedError


class _OpenAI(_Protocol):
    route = ROUTE_OPENAI
    error_types: ClassVar[Mapping[int, str]] = {
        400: "invalid_request_error",
        401: "invalid_request_error",
        403: "permission_error",
        404: "invalid_request_error",
        429: "rate_limit_exceeded",
    }
    _codes: ClassVar[Mapping[int, str]] = {
        401: "invalid_api_key",
        404: "model_not_found",
        429: "rate_limit_exceeded",
    }

    def parse(self, body: Mapping[str, Any]) -> ParsedRequest:
        model = body.get("model")
        if not isinstance(model, str) or not model:
            raise BadRequest("'model' must be a non-empty string")
        messages = _messages(body.get("messages"))
        return ParsedRequest(
            model,
            messages,
            # Newer OpenAI clients send max_completion_tokens instead of max_tokens.
            _common_params(
                body,
                _stop_list(body.get("stop"), "stop"),
                body.get("max_completion_tokens", body.get("max_tokens")),
            ),
        )

    def render(
        self, serial: int, req: ParsedRequest, done: Completion, stop_hit: str | None
    ) -> bytes:
        return orjson.dumps(
            {
                "id": f"chatcmpl-{serial}",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": req.model,
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": done.text},
                        "finish_reason": done.finish_reason,
                    }
                ],
                "usage": {
                    "prompt_tokens": done.input_tokens,
                    "completion_tokens": done.output_tokens,
                    "total_tokens": done.input_tokens + done.output_tokens,
                },
            }
        )

    def error_body(self, status: int, message: str) -> bytes:
        return orjson.dumps(
            {
                "error": {
                    "message": message,
                    "type": self.error_types.get(status, "server_error"),
                    "param": "model" if status == 404 else None,
                    "code": self._codes.get(status),
                }
            }
        )


class _Anthropic(_Protocol):
    route = ROUTE_ANTHROPIC
    error_types: ClassVar[Mapping[int, str]] = {
        400: "invalid_request_error",
        401: "authentication_error",
        403: "permission_error",
        404: "not_found_error",
        429: "rate_limit_error",
        503: "overloaded_error",
    }
    _stop_reasons: ClassVar[Mapping[str, str]] = {"stop": "end_turn", "length": "max_tokens"}

    def parse(self, body: Mapping[str, Any]) -> ParsedRequest:
        model = body.get("model")
        if not isinstance(model, str) or not model:
            raise BadRequest("'model' must be a non-empty string")
        if body.get("max_tokens") is None:
            raise BadRequest("'max_tokens' is required by the Messages API")
        messages = _messages(body.get("messages"))
        system = body.get("system")
        if system is not None:
            messages.insert(0, {"role": "system", "content": _text_of(system, "system")})
        stop = _stop_list(body.get("stop_sequences"), "stop_sequences")
        return ParsedRequest(model, messages, _common_params(body, stop, body.get("max_tokens")))

    def render(
        self, serial: int, req: ParsedRequest, done: Completion, stop_hit: str | None
    ) -> bytes:
        reason = (
            "stop_sequence"
            if stop_hit is not None
            else self._stop_reasons.get(done.finish_reason, "end_turn")
        )
        return orjson.dumps(
            {
                "id": f"msg_{serial:024d}",
                "type": "message",
                "role": "assistant",
                "model": req.model,
                "content": [{"type": "text", "text": done.text}],
                "stop_reason": reason,
                "stop_sequence": stop_hit,
                "usage": {"input_tokens": done.input_tokens, "output_tokens": done.output_tokens},
            }
        )

    def error_body(self, status: int, message: str) -> bytes:
        error_type = self.error_types.get(status, "api_error")
        return orjson.dumps({"type": "error", "error": {"type": error_type, "message": message}})


def apply_limits(done: Completion, params: Mapping[str, Any]) -> tuple[Completion, str | None]:
    """Cut a completion at the first stop sequence, then at ``max_tokens`` (~4 chars each).

    Returns the completion and the stop sequence that cut it (None if none did).
    """
    text, reason, out_tokens = done.text, done.finish_reason, done.output_tokens
    stop_hit = None
    stops = params.get("stop")
    if stops:
        cut = len(text)
        for s in stops:
            at = text.find(s) if s else -1
            if 0 <= at < cut:
                cut, stop_hit = at, s
        if stop_hit is not None:
            text, reason, out_tokens = text[:cut], "stop", approx_tokens(text[:cut])
    max_tokens = params.get("max_tokens")
    if max_tokens is not None and out_tokens > max_tokens:
        text, reason, out_tokens, stop_hit = text[: max_tokens * 4], "length", max_tokens, None
    if text is done.text:
        return done, stop_hit
    return dataclasses.replace(
        done, text=text, finish_reason=reason, output_tokens=out_tokens
    ), stop_hit


@dataclass(frozen=True)
class _Runtime:
    """The mutable-by-swap state derived from a ServerConfig (swapped whole, atomically)."""

    config: ServerConfig
    injector: FaultInjector | None
    limiter: ServerRateLimiter | None
    latency: LatencySampler | None
    models: dict[str, Model]


def _runtime(config: ServerConfig) -> _Runtime:
    return _Runtime(
        config=config,
        injector=FaultInjector(config.faults) if config.faults.active else None,
        limiter=ServerRateLimiter(config.rate_limit, clock=config.clock)
        if config.rate_limit.enabled
        else None,
        latency=None
        if config.latency.is_zero
        else LatencySampler(config.latency, seed=config.latency_seed),
        models={},
    )


_OPENAI = _OpenAI()
_ANTHROPIC = _Anthropic()


class LocalServer:
    """The request handlers and their state; :meth:`build_app` makes the aiohttp app."""

    def __init__(self, config: ServerConfig) -> None:
        self.stats = ServerStats()
        self._serial = 0
        self._rt = _runtime(config)

    @property
    def config(self) -> ServerConfig:
        return self._rt.config

    def configure(self, config: ServerConfig) -> None:
        """Switch to a new config: fresh fault RNG, limiter buckets and model cache."""
        check_loopback(config.host)
        configure_replay(config.replay)
        self._rt = _runtime(config)

    def build_app(self) -> web.Application:
        app = web.Application()
        app.router.add_post(ROUTE_OPENAI, self._openai)
        app.router.add_post(ROUTE_ANTHROPIC, self._anthropic)
        app.router.add_get(ROUTE_MODELS, self._models)
        app.router.add_get("/stats", self._stats)
        app.router.add_post("/stats/reset", self._stats_reset)
        return app

    async def _openai(self, request: web.Request) -> web.StreamResponse:
        return await self._complete(request, _OPENAI)

    async def _anthropic(self, request: web.Request) -> web.StreamResponse:
        return await self._complete(request, _ANTHROPIC)

    async def _models(self, request: web.Request) -> web.Response:
        self.stats.record(ROUTE_MODELS, None, "200", None)
        data = [
            {"id": name, "object": "model", "created": 0, "owned_by": "cotaudit"}
            for name in known_models()
        ]
        return web.Response(
            body=orjson.dumps({"object": "list", "data": data}), content_type=JSON_TYPE
        )

    async def _stats(self, request: web.Request) -> web.Response:
        return web.Response(body=orjson.dumps(self.stats.snapshot()), content_type=JSON_TYPE)

    async def _stats_reset(self, request: web.Request) -> web.Response:
        self.stats.reset()
        return web.Response(body=orjson.dumps(self.stats.snapshot()), content_type=JSON_TYPE)

    def _error(
        self,
        proto: _Protocol,
        status: int,
        message: str,
        model: str | None,
        fault: str | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> web.Response:
        self.stats.record(proto.route, model, str(status), fault)
        return web.Response(
            status=status,
            body=proto.error_body(status, message),
            content_type=JSON_TYPE,
            headers=headers,
        )

    async def _complete(self, request: web.Request, proto: _Protocol) -> web.StreamResponse:
        rt = self._rt  # one config for the whole request, even if swapped meanwhile
        raw = await request.read()
        key = rt.config.require_api_key
        if key is not None and proto.api_key(request) != key:
            return self._error(proto, 401, "missing or invalid API key", None)
        try:
            body = orjson.loads(raw)
            if not isinstance(body, dict):
                raise BadRequest("the request body must be a JSON object")
            req = proto.parse(body)
        except orjson.JSONDecodeError as exc:
            return self._error(proto, 400, f"request body is not valid JSON: {exc}", None)
        except BadRequest as exc:
            return self._error(proto, 400, str(exc), None)
        model_name = req.model

        if rt.limiter is not None:
            cost = sum(approx_tokens(m["content"]) for m in req.messages)
            cost += req.params["max_tokens"] or 0
            refusal = rt.limiter.try_acquire(cost)
            if refusal is not None:
                return self._rate_limited(proto, model_name, refusal)

        # Drawn only for admitted requests, so the seeded fault sequence does not depend on
        # how many requests the rate limit refused.
        fault = faults.fault_for_model(model_name)
        if fault is None and rt.injector is not None:
            fault = rt.injector.draw()

        if fault is not None and fault not in (FaultKind.MALFORMED, FaultKind.TRUNCATED):
            return await self._inject(request, proto, model_name, fault, rt)

        if rt.latency is not None:
            await rt.config.sleep(rt.latency.sample())

        model = rt.models.get(model_name)
        if model is None:
            try:
                model = resolve_model(model_name)
            except ValueError as exc:
                return self._error(
                    proto, 400, f"bad model options in {model_name!r}: {exc}", model_name
                )
            if model is None:
                known = ", ".join(known_models())
                return self._error(
                    proto, 404, f"model {model_name!r} not found; known models: {known}", model_name
                )
            rt.models[model_name] = model
        try:
            done = model.complete(req.messages, req.params)
        except UnknownPrompt as exc:
            return self._error(
                proto,
                404,
                f"model {model_name!r} has no recorded answer for this prompt: {exc}",
                model_name,
            )
        except Exception as exc:
            # A bug in a simulated model: log the traceback here, answer a counted 500.
            _log.exception("model %r failed", model_name)
            return self._error(
                proto, 500, f"model {model_name!r} failed: {type(exc).__name__}: {exc}", model_name
            )
        done, stop_hit = apply_limits(done, req.params)
        self._serial += 1
        payload = proto.render(self._serial, req, done, stop_hit)
        if fault is FaultKind.TRUNCATED:
            self.stats.record(proto.route, model_name, "200", fault.value, completed=True)
            faults.send_truncated(request, payload, JSON_TYPE)
            return web.Response()  # never sent: the transport is already closed
        if fault is FaultKind.MALFORMED:
            self.stats.record(proto.route, model_name, "200", fault.value, completed=True)
            return web.Response(body=faults.malformed_body(payload), content_type=JSON_TYPE)
        self.stats.record(proto.route, model_name, "200", None, completed=True)
        return web.Response(body=payload, content_type=JSON_TYPE)

    def _rate_limited(self, proto: _Protocol, model: str, refusal: Refusal) -> web.Response:
        headers = {
            "retry-after": str(max(1, math.ceil(refusal.retry_after_s))),
            "retry-after-ms": str(max(1, math.ceil(refusal.retry_after_s * 1000))),
            "x-ratelimit-reset-requests": format_duration(refusal.reset_requests_s),
            "x-ratelimit-reset-tokens": format_duration(refusal.reset_tokens_s),
        }
        message = (
            f"rate limit reached for {refusal.limit} per minute; "
            f"retry after {refusal.retry_after_s:.3f} s"
        )
        return self._error(proto, 429, message, model, headers=headers)

    async def _inject(
        self, request: web.Request, proto: _Protocol, model: str, fault: FaultKind, rt: _Runtime
    ) -> web.StreamResponse:
        if fault is FaultKind.RESET:
            self.stats.record(proto.route, model, "none", fault.value)
            faults.reset_connection(request)
            return web.Response()  # never sent: the connection is gone
        if fault is FaultKind.HANG:
            self.stats.record(proto.route, model, "none", fault.value)
            await faults.hang(request, rt.config.faults.hang_s)
            return web.Response()
        status = fault.status
        assert status is not None  # every other kind is an HTTP status
        headers: dict[str, str] | None = None
        if fault is FaultKind.RATE_LIMIT:
            wait = rt.config.faults.retry_after_s
            headers = {
                "retry-after": str(max(1, math.ceil(wait))) if wait > 0 else "0",
                "retry-after-ms": str(math.ceil(wait * 1000)),
                "x-ratelimit-reset-requests": format_duration(wait),
            }
        return self._error(
            proto, status, f"injected fault: {fault.value}", model, fault.value, headers
        )


class ServerHandle:
    """A running local server: its URL, its counters and its (swappable) config."""

    def __init__(self, server: LocalServer, host: str, port: int) -> None:
        self._server = server
        self.host = host
        self.port = port
        netloc = f"[{host}]" if ":" in host else host
        self.root_url = f"http://{netloc}:{port}"
        self.base_url = f"{self.root_url}/v1"  # what OpenAI/Anthropic clients take

    @property
    def config(self) -> ServerConfig:
        return self._server.config

    def stats(self) -> StatsSnapshot:
        """A snapshot of the counters (same shape as ``GET /stats``)."""
        return self._server.stats.snapshot()

    def reset_stats(self) -> None:
        self._server.stats.reset()

    def configure(self, config: ServerConfig | None = None, **changes: Any) -> ServerConfig:
        """Swap the config (whole, or fields of the current one); returns the new config.

        Fault RNG, rate-limit buckets and the model cache start afresh; stats are kept.
        The host and port of a running server cannot change.
        """
        new = dataclasses.replace(config or self.config, **changes)
        if new.host != self.config.host or new.port not in (self.config.port, self.port):
            raise UsageError(
                "host and port of a running server cannot change",
                where="ServerHandle.configure",
                fix="start another server instead",
            )
        self._server.configure(new)
        return new


@asynccontextmanager
async def running_server(config: ServerConfig | None = None) -> AsyncIterator[ServerHandle]:
    """Run the local server in the current event loop for the duration of the block.

    Binds ``config.host`` (127.0.0.1) on ``config.port`` (0 = a free port) and yields a
    :class:`ServerHandle`; the server stops (in-flight handlers cancelled after
    ``shutdown_timeout_s``) when the block exits.
    """
    config = config or ServerConfig()
    check_loopback(config.host)
    load_builtin_models()
    configure_replay(config.replay)
    server = LocalServer(config)
    runner = web.AppRunner(
        server.build_app(),
        access_log=None,  # the hot path: no per-request logging
        handler_cancellation=True,  # a client that disconnects cancels its (hung) handler
        shutdown_timeout=config.shutdown_timeout_s,
    )
    await runner.setup()
    # "localhost" may resolve to both 127.0.0.1 and ::1, and port 0 would then give each its
    # own port; bind one address so that base_url names the port that listens.
    host = LOCAL_HOST if config.host == "localhost" else config.host
    try:
        site = web.TCPSite(runner, host, config.port)
        try:
            await site.start()
        except OSError as exc:
            raise UsageError(
                f"cannot listen on {config.host}:{config.port}: {exc.strerror}",
                where="--port",
                fix="choose another port (0 picks a free one)",
            ) from exc
        port = int(runner.addresses[0][1])
        yield ServerHandle(server, host, port)
    finally:
        await runner.cleanup()


class ServerThread(ServerHandle):
    """A local server on its own thread and event loop; :meth:`stop` ends it.

    Usable as a context manager. Handy for synchronous code and for tests that run the
    engine in a subprocess against it.
    """

    def __init__(self, config: ServerConfig | None, timeout_s: float) -> None:
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop_event: asyncio.Event | None = None
        self._handle: ServerHandle | None = None
        self._thread = threading.Thread(
            target=asyncio.run, args=(self._main(config),), name="cotaudit-server", daemon=True
        )
        self._thread.start()
        if not self._ready.wait(timeout_s):
            raise RuntimeError(f"the local server did not start within {timeout_s} s")
        if self._error is not None:
            self._thread.join()
            raise self._error
        assert self._handle is not None
        super().__init__(self._handle._server, self._handle.host, self._handle.port)

    async def _main(self, config: ServerConfig | None) -> None:
        try:
            async with running_server(config) as handle:
                self._loop = asyncio.get_running_loop()
                self._stop_event = asyncio.Event()
                self._handle = handle
                self._ready.set()
                await self._stop_event.wait()
        except BaseException as exc:  # surfaced in the starting thread
            if not self._ready.is_set():
                self._error = exc
                self._ready.set()
            else:
                raise

    def stop(self) -> None:
        """Stop the server and wait for its thread to end (idempotent)."""
        loop, event = self._loop, self._stop_event
        if loop is not None and event is not None and self._thread.is_alive():
            loop.call_soon_threadsafe(event.set)
        self._thread.join()

    def __enter__(self) -> ServerThread:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


def start_server_thread(
    config: ServerConfig | None = None, *, timeout_s: float = SERVER_START_TIMEOUT_S
) -> ServerThread:
    """Start the local server on a background thread; returns once it is listening."""
    return ServerThread(config, timeout_s)
