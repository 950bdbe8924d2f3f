"""What a transport is: it POSTs a body along a :class:`Route` and returns an :class:`HttpAnswer`.

A transport knows HTTP, not APIs: any status comes back as an answer (classifying it is the
provider's business), and every failure to get one is one of these exceptions, each saying
whether the request may have reached the server (and so may have been billed):

- :class:`CannotConnect` (a ``ConnectionError``): no connection could be opened; never sent;
- :class:`ConnectTimeout` (a ``TimeoutError``): connecting took longer than allowed; never sent;
- :class:`AnswerTimeout` (a ``TimeoutError``): no complete answer in time; may have been sent;
- :class:`ConnectionLost` (a ``ConnectionResetError``): reset or closed before the answer was
  complete; may have been sent;
- :class:`HttpProtocolError`: the server's bytes are not HTTP; it was sent;
- :class:`AnswerTooLarge` (an ``HttpProtocolError``): the body is longer than the route
  allows (``Route.max_body_bytes``); it was sent, and the rest of the body is never read.

:func:`maybe_sent` reads the answer off any of them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol
from urllib.parse import urlsplit

from cotaudit import __version__
from cotaudit.constants import (
    RESPONSE_BODY_BASE_BYTES,
    RESPONSE_BODY_BYTES_PER_TOKEN,
    RESPONSE_BODY_MAX_BYTES,
)

USER_AGENT = f"cotaudit/{__version__}"


class CannotConnect(ConnectionError):
    """No connection could be opened (refused, unreachable, DNS, TLS): the request was never
    sent."""

    maybe_sent = False


class ConnectTimeout(TimeoutError):
    """Connecting took longer than the route allows: the request was never sent."""

    maybe_sent = False


class AnswerTimeout(TimeoutError):
    """No complete answer within the route's timeout: the server may be working on it."""

    maybe_sent = True


class ConnectionLost(ConnectionResetError):
    """The connection was reset or closed after the request went out, before the answer was
    complete: the server may have received (and billed) it."""

    maybe_sent = True


class HttpProtocolError(Exception):
    """The answer could not be parsed as HTTP (a garbled status line, headers or chunking)."""

    maybe_sent = True


class AnswerTooLarge(HttpProtocolError):
    """The answer's body exceeds the route's ``max_body_bytes``: read no further, never
    handed on (a hostile or broken server sending megabytes for a 64-token answer)."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"answer body larger than the limit of {limit:,} bytes")
        self.limit = limit


def answer_limit_bytes(max_tokens: int | None) -> int:
    """The longest answer body an endpoint with ``max_tokens`` accepts (bytes)."""
    if not max_tokens:
        return RESPONSE_BODY_MAX_BYTES
    return min(
        RESPONSE_BODY_MAX_BYTES,
        RESPONSE_BODY_BASE_BYTES + RESPONSE_BODY_BYTES_PER_TOKEN * int(max_tokens),
    )


def maybe_sent(exc: BaseException) -> bool:
    """Whether the request whose attempt raised ``exc`` may have reached the server."""
    return bool(getattr(exc, "maybe_sent", True))


@dataclass(frozen=True, slots=True)
class HttpAnswer:
    """A complete HTTP answer: status, headers (looked up by lower-case name; aiohttp's
    case-insensitive mapping) and the decoded body."""

    status: int
    headers: Mapping[str, str]
    body: bytes


class Route:
    """Where one endpoint's requests go and with which headers, prepared once per endpoint.

    Header names and values are checked here, so a bad one is a usage error naming the
    endpoint before anything is sent: a line break would let a value start a header of its
    own.
    """

    __slots__ = ("connect_timeout_s", "headers", "max_body_bytes", "timeout_s", "url")

    def __init__(
        self,
        url: str,
        headers: Mapping[str, str],
        *,
        timeout_s: float,
        connect_timeout_s: float,
        max_body_bytes: int = RESPONSE_BODY_MAX_BYTES,
    ) -> None:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"not an http(s) URL: {url!r}")
        try:
            parts.hostname.encode("idna")  # "a..b" or a 64-character label: not a host name
        except UnicodeError:
            raise ValueError(f"{parts.hostname!r} is not a valid host name") from None
        for name, value in headers.items():
            if not name or any(c in name for c in "\r\n:") or any(c in value for c in "\r\n"):
                raise ValueError(f"header {name!r} contains a line break or is not a valid name")
            value.encode("latin-1")  # HTTP/1.1's header charset; raises UnicodeEncodeError
        self.url = url
        given = {name.lower() for name in headers}
        defaults = {"user-agent": USER_AGENT, "accept": "application/json"}
        self.headers = {k: v for k, v in defaults.items() if k not in given} | dict(headers)
        self.timeout_s = timeout_s
        self.connect_timeout_s = min(connect_timeout_s, timeout_s)
        self.max_body_bytes = max_body_bytes  # longer answers raise AnswerTooLarge


class Transport(Protocol):
    """Sends requests for the whole run; ``close`` drops its connections."""

    async def post(
        self, route: Route, body: bytes, *, timeout_s: float | None = None
    ) -> HttpAnswer:
        """POST ``body`` (JSON) along ``route``; raise as described in the module docstring.

        ``timeout_s`` shortens the route's timeout for this one attempt (a request whose
        time budget has less left than the route's timeout)."""
        ...

    async def close(self) -> None: ...
