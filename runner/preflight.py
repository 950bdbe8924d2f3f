"""Preflight: one cheap request per endpoint before a sweep, to fail fast with advice.

The key variables were already checked (``read_api_key``). Here each endpoint gets one
``max_tokens=1`` request through the normal provider (no retries, no cache, not written):
unreachable -> check base_url / network; 401/403 -> check the key variable; 404 -> unknown
model or wrong base URL. A 429 or 5xx proves the endpoint is there, so the sweep may start
(the engine will retry). Every problem of every endpoint is reported at once.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping

from cotaudit.errors import UsageError
from runner.config import EndpointConfig, SweepConfig
from runner.providers.base import (
    AuthError,
    BadRequest,
    ConnectionReset,
    NotFound,
    Provider,
    ProviderError,
    QuotaExhausted,
    Timeout,
)
from runner.request_spec import RequestSpec, make_spec
from runner.transport import Transport

PING_PROMPT = "ping"


def advice(endpoint: EndpointConfig, base_url: str, exc: ProviderError) -> str | None:
    """What to tell the user about a failed ping; None when the sweep may go ahead."""
    name = f"endpoint {endpoint.name!r}"
    if isinstance(exc, ConnectionReset | Timeout):
        return f"{name}: cannot reach {base_url} ({exc.message}); check base_url and network"
    if isinstance(exc, AuthError):
        var = endpoint.api_key_env or "(none configured: set api_key_env)"
        return f"{name}: authentication refused (HTTP {exc.status}); check the key in ${var}"
    if isinstance(exc, NotFound):
        return (
            f"{name}: HTTP 404 for model {endpoint.model!r} at {base_url}; check the model "
            "name and that base_url ends where the API's routes start (e.g. .../v1)"
        )
    if isinstance(exc, QuotaExhausted):
        return f"{name}: quota exhausted ({exc.body_excerpt[:100]}); add credit or switch key"
    if isinstance(exc, BadRequest):
        return f"{name}: request refused ({exc.message}); check the endpoint's parameters"
    return None  # 429, 5xx, malformed: reachable; the engine's retries deal with it


def ping_spec(endpoint: EndpointConfig) -> RequestSpec:
    """The one-request check of an endpoint (sent with ``max_tokens=1``, never written):
    the preflight's, and the probe of an endpoint that is down."""
    return make_spec(
        endpoint.identity(),
        task="preflight",
        problem_id="preflight",
        condition="prompt",
        messages=[{"role": "user", "content": PING_PROMPT}],
        temperature=0.0,
    )


async def _ping(provider: Provider, transport: Transport) -> str | None:
    ep = provider.endpoint
    spec = ping_spec(ep)
    try:
        await provider.complete(spec, transport, max_tokens=1)
    except ProviderError as exc:
        return advice(ep, provider.base_url, exc)
    return None


async def run_preflight(
    config: SweepConfig, providers: Mapping[str, Provider], transport: Transport
) -> None:
    """Ping every endpoint concurrently; ``UsageError`` listing every endpoint that fails."""
    results = await asyncio.gather(
        *(_ping(providers[ep.name], transport) for ep in config.endpoints)
    )
    problems = [r for r in results if r is not None]
    if problems:
        raise UsageError(
            "preflight failed: " + "; ".join(problems),
            where=config.source,
            fix="Fix the endpoint(s) named, or skip this check with --no-preflight.",
        )
