"""The local model server's request handlers: an aiohttp.web app over the two protocol codecs.

Routes (all on loopback only):

- ``POST /v1/chat/completions``: OpenAI chat completions (:mod:`runner.server.openai_codec`).
- ``POST /v1/messages``: Anthropic Messages (:mod:`runner.server.anthropic_codec`).
- ``/v1/models``, ``/v1/messages/count_tokens``, ``/v1/files``, ``/v1/batches``,
  ``/v1/messages/batches``: :mod:`runner.server.api_routes` (listings, files, batch APIs).
- ``GET /stats``, ``POST /stats/reset``: what the server has served (:mod:`runner.server.stats`).

A request goes through, in order: API-key check (when ``require_api_key`` is set), body
parsing (400), the key's budgets (429; :mod:`runner.server.provider_limits`), fault choice
and injection (magic ``fail-<kind>`` model name, then the fault script/rates), latency, model
resolution (404), the model itself (a pure function run inline), stop sequences and
``max_tokens`` truncation, the time per output token, and the protocol's response body. With
budgets configured, every answer to a charged request carries both providers' rate-limit
headers. Models are registered in :mod:`runner.server.models`; starting and stopping a server
is :mod:`runner.server.lifecycle`.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from dataclasses import dataclass

import orjson
from aiohttp import web

from runner.server import faults, replay
from runner.server.answering import model_completion
from runner.server.anthropic_codec import ROUTE_ANTHROPIC, AnthropicCodec
from runner.server.api_routes import register_api_routes
from runner.server.faults import FaultInjector, FaultKind
from runner.server.latency import LatencySampler
from runner.server.models import Model, ModelRefused, approx_tokens
from runner.server.openai_codec import ROUTE_OPENAI, OpenAICodec
from runner.server.protocol import BadRequest, WireProtocol
from runner.server.provider_limits import ProviderLimits
from runner.server.route_support import COMPLETION_MAX_BYTES
from runner.server.server_limits import (
    BucketState,
    Refusal,
    ServerRateLimiter,
    format_duration,
)
from runner.server.settings import ServerConfig, check_loopback
from runner.server.stats import ServerStats

_log = logging.getLogger(__name__)

JSON_TYPE = "application/json"


@dataclass(frozen=True)
class _Runtime:
    """The mutable-by-swap state derived from a ServerConfig (swapped whole, atomically)."""

    config: ServerConfig
    injector: FaultInjector | None
    limiter: ProviderLimits | None
    latency: LatencySampler | None
    models: dict[str, Model]


def _runtime(config: ServerConfig) -> _Runtime:
    return _Runtime(
        config=config,
        injector=FaultInjector(config.faults) if config.faults.active else None,
        limiter=ProviderLimits(config.rate_limit, clock=config.clock, wall_clock=config.wall_clock)
        if config.rate_limit.enabled
        else None,
        latency=None
        if config.latency.is_zero
        else LatencySampler(config.latency, seed=config.latency_seed),
        models={},
    )


_OPENAI = OpenAICodec()
_ANTHROPIC = AnthropicCodec()


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
        if config.replay:
            replay.configure(config.replay)
        self._rt = _runtime(config)

    def build_app(self) -> web.Application:
        app = web.Application(client_max_size=COMPLETION_MAX_BYTES)
        app.router.add_post(ROUTE_OPENAI, self._openai)
        app.router.add_post(ROUTE_ANTHROPIC, self._anthropic)
        # API-key check on every /v1 route, validation, listings, files, batches.
        register_api_routes(app, self)
        app.router.add_get("/stats", self._stats)
        app.router.add_post("/stats/reset", self._stats_reset)
        return app

    async def _openai(self, request: web.Request) -> web.StreamResponse:
        return await self._complete(request, _OPENAI)

    async def _anthropic(self, request: web.Request) -> web.StreamResponse:
        return await self._complete(request, _ANTHROPIC)

    async def _stats(self, request: web.Request) -> web.Response:
        return web.Response(body=orjson.dumps(self.stats.snapshot()), content_type=JSON_TYPE)

    async def _stats_reset(self, request: web.Request) -> web.Response:
        self.stats.reset()
        return web.Response(body=orjson.dumps(self.stats.snapshot()), content_type=JSON_TYPE)

    def _error(
        self,
        proto: WireProtocol,
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

    async def _complete(self, request: web.Request, proto: WireProtocol) -> web.StreamResponse:
        rt = self._rt  # one config for the whole request, even if swapped meanwhile
        charged: list[ServerRateLimiter] = []
        response = await self._answer(request, proto, rt, charged)
        if charged and rt.limiter is not None:  # a charged request's answer: the key's state
            for name, value in rt.limiter.headers(charged[0], proto.route).items():
                response.headers.setdefault(name, value)
        return response

    async def _answer(
        self,
        request: web.Request,
        proto: WireProtocol,
        rt: _Runtime,
        charged: list[ServerRateLimiter],
    ) -> web.StreamResponse:
        raw = await request.read()  # at most COMPLETION_MAX_BYTES (the middleware's 413)
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

        budget: ServerRateLimiter | None = None
        max_tokens = req.params["max_tokens"] or 0
        if rt.limiter is not None:
            budget = rt.limiter.budget(proto.api_key(request))
            prompt = sum(approx_tokens(m["content"]) for m in req.messages)
            whole = budget.oversized(prompt + max_tokens) if proto.route == ROUTE_OPENAI else None
            if whole is not None:
                return self._too_large(
                    proto, model_name, prompt + max_tokens, whole, rt.limiter, budget
                )
            refusal = budget.try_acquire(
                prompt + max_tokens, input_tokens=prompt, output_tokens=max_tokens
            )
            if refusal is not None:
                return self._rate_limited(proto, model_name, refusal, rt.limiter, budget)
            charged.append(budget)

        # Drawn only for admitted requests, so the seeded fault sequence does not depend on
        # how many requests the rate limit refused.
        fault = faults.fault_for_model(model_name)
        if fault is None and rt.injector is not None:
            fault = rt.injector.draw()

        if fault is not None and fault not in (FaultKind.MALFORMED, FaultKind.TRUNCATED):
            return await self._inject(request, proto, model_name, fault, rt)

        if rt.latency is not None:
            await rt.config.sleep(rt.latency.sample())

        try:
            done, stop_hit = model_completion(req, rt.models, loaded=rt.config.loaded_model)
        except ModelRefused as exc:
            return self._error(proto, exc.status, exc.message, model_name)
        if budget is not None:
            budget.settle_output(max_tokens, done.output_tokens)
        if rt.config.per_output_token_s:
            await rt.config.sleep(rt.config.per_output_token_s * done.output_tokens)
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

    def _rate_limited(
        self,
        proto: WireProtocol,
        model: str,
        refusal: Refusal,
        limits: ProviderLimits,
        budget: ServerRateLimiter,
    ) -> web.Response:
        headers = limits.refusal_headers(refusal, budget, proto.route)
        message = (
            f"rate limit reached for {refusal.limit} per minute; "
            f"retry after {refusal.retry_after_s:.3f} s"
        )
        return self._error(proto, 429, message, model, headers=headers)

    def _too_large(
        self,
        proto: WireProtocol,
        model: str,
        requested: int,
        whole: BucketState,
        limits: ProviderLimits,
        budget: ServerRateLimiter,
    ) -> web.Response:
        """OpenAI's 429 for a request above the whole per-minute token budget: its words, its
        budget headers, and no ``retry-after``, since no wait makes the request fit."""
        message = (
            f"Request too large for {model} on tokens per min (TPM): Limit {whole.limit}, "
            f"Requested {requested}. The input or output tokens must be reduced in order to "
            "run successfully."
        )
        return self._error(proto, 429, message, model, headers=limits.headers(budget, proto.route))

    async def _inject(
        self, request: web.Request, proto: WireProtocol, model: str, fault: FaultKind, rt: _Runtime
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
            headers = {"retry-after": str(max(1, math.ceil(wait))) if wait > 0 else "0"}
            # Each route what its provider sends: Anthropic's 429 says retry-after in whole
            # seconds only; OpenAI-compatible servers may add the exact wait and the reset.
            if proto.route == ROUTE_OPENAI:
                headers["retry-after-ms"] = str(math.ceil(wait * 1000))
                headers["x-ratelimit-reset-requests"] = format_duration(wait)
        message = f"injected fault: {fault.value}"
        if fault is FaultKind.QUOTA:  # OpenAI's words: a client must not retry this 429
            message = (
                "You exceeded your current quota, please check your plan and billing details "
                f"({message})"
            )
        if rt.config.faults.echo_credentials:
            message += faults.echoed_credentials(request)
        return self._error(proto, status, message, model, fault.value, headers)
