"""HTTP for the providers: every route through aiohttp.

See :mod:`runner.transport.base` for the contract every transport keeps.
"""

from __future__ import annotations

from collections.abc import Callable

from runner.transport.aiohttp_transport import AiohttpTransport
from runner.transport.base import (
    AnswerTimeout,
    AnswerTooLarge,
    CannotConnect,
    ConnectionLost,
    ConnectTimeout,
    HttpAnswer,
    HttpProtocolError,
    Route,
    Transport,
    answer_limit_bytes,
    maybe_sent,
)

__all__ = [
    "AiohttpTransport",
    "AnswerTimeout",
    "AnswerTooLarge",
    "CannotConnect",
    "ConnectTimeout",
    "ConnectionLost",
    "HttpAnswer",
    "HttpProtocolError",
    "Route",
    "Transport",
    "TransportFactory",
    "answer_limit_bytes",
    "default_transport",
    "maybe_sent",
]

TransportFactory = Callable[[int], Transport]  # argument: the run's total concurrency


def default_transport(pool_size: int) -> Transport:
    """What runs use: one aiohttp session with at most ``pool_size`` connections."""
    return AiohttpTransport(pool_size)
