"""HTTP for the providers: plain ``http://`` through the keep-alive client, TLS through aiohttp.

See :mod:`runner.transport.base` for the contract every transport keeps.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any

from runner.transport.aiohttp_transport import AiohttpTransport
from runner.transport.base import (
    CannotConnect,
    HttpAnswer,
    HttpProtocolError,
    Route,
    Transport,
)
from runner.transport.keepalive import KeepAliveTransport

__all__ = [
    "AiohttpTransport",
    "CannotConnect",
    "HttpAnswer",
    "HttpProtocolError",
    "KeepAliveTransport",
    "Route",
    "Transport",
    "TransportFactory",
    "aiohttp_only",
    "default_transport",
]

TransportFactory = Callable[[int], Transport]  # argument: the run's total concurrency


class RoutingTransport:
    """Each route to the keep-alive client or to aiohttp, as its ``keepalive`` flag says."""

    def __init__(self, pool_size: int) -> None:
        self._keepalive = KeepAliveTransport(pool_size)
        self._aiohttp = AiohttpTransport(pool_size)

    def post(self, route: Route, body: bytes) -> Coroutine[Any, Any, HttpAnswer]:
        # Hands back the chosen transport's coroutine: no await level of its own per request.
        return (self._keepalive if route.keepalive else self._aiohttp).post(route, body)

    async def close(self) -> None:
        await self._keepalive.close()
        await self._aiohttp.close()


def default_transport(pool_size: int) -> Transport:
    """What runs use: the keep-alive client for ``http://`` (unless an endpoint asks for
    ``http_client = "aiohttp"``), aiohttp for ``https://``."""
    return RoutingTransport(pool_size)


def aiohttp_only(pool_size: int) -> Transport:
    """Every route through aiohttp (benchmarks compare it with the default)."""
    return AiohttpTransport(pool_size)
