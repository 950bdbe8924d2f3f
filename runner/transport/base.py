"""What a transport is: it POSTs a body along a :class:`Route` and returns an :class:`HttpAnswer`.

A transport knows HTTP, not APIs: any status comes back as an answer (classifying it is the
provider's business), and every failure to get one is one of three exceptions:

- ``TimeoutError``: no complete answer within the route's timeout;
- ``ConnectionError`` (an ``OSError``): the connection could not be made (:class:`CannotConnect`),
  or was refused, reset or closed before the answer was complete;
- :class:`HttpProtocolError`: the server's bytes are not HTTP/1.1.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol
from urllib.parse import urlsplit

from cotaudit import __version__

USER_AGENT = f"cotaudit/{__version__}"


class HttpProtocolError(Exception):
    """The answer could not be parsed as HTTP (a garbled status line, headers or chunking)."""


class CannotConnect(ConnectionError):
    """No connection could be opened (refused, unreachable, DNS failure).

    Connecting past the connect timeout is a ``TimeoutError``, as every other timeout."""


@dataclass(frozen=True, slots=True)
class HttpAnswer:
    """A complete HTTP answer: status, headers (names lower-cased) and the decoded body."""

    status: int
    headers: Mapping[str, str]
    body: bytes


class Route:
    """Where one endpoint's requests go and with which headers, prepared once per endpoint.

    ``keepalive`` routes go to the keep-alive client (plain HTTP only), the rest to aiohttp.
    ``head`` is the request head up to (not including) its content-length line, for
    transports that write HTTP themselves. Header names and values are checked here: a line
    break would let a value start a header of its own.
    """

    __slots__ = (
        "connect_timeout_s",
        "head",
        "headers",
        "host",
        "keepalive",
        "port",
        "timeout_s",
        "url",
    )

    def __init__(
        self,
        url: str,
        headers: Mapping[str, str],
        *,
        timeout_s: float,
        connect_timeout_s: float,
        keepalive: bool = True,
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
        self.url = url
        self.headers = dict(headers)
        self.timeout_s = timeout_s
        self.connect_timeout_s = min(connect_timeout_s, timeout_s)
        # TLS is aiohttp's: only plain-HTTP routes can take the keep-alive client.
        self.keepalive = keepalive and parts.scheme == "http"
        self.host = parts.hostname
        self.port = parts.port or (80 if parts.scheme == "http" else 443)
        target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        lines = [f"POST {target} HTTP/1.1"]
        given = {name.lower() for name in headers}
        host = f"[{self.host}]" if ":" in self.host else self.host  # an IPv6 literal
        authority = f"{host}:{parts.port}" if parts.port else host  # never the URL's userinfo
        defaults = {"host": authority, "user-agent": USER_AGENT, "accept": "application/json"}
        lines += [f"{name}: {value}" for name, value in defaults.items() if name not in given]
        lines += [
            f"{name}: {value}"
            for name, value in headers.items()
            if name.lower() not in ("content-length", "transfer-encoding", "connection")
        ]
        # latin-1 is HTTP/1.1's header charset; values outside it cannot be sent as such.
        self.head = ("\r\n".join(lines) + "\r\n").encode("latin-1")


class Transport(Protocol):
    """Sends requests for the whole run; ``close`` drops its connections."""

    async def post(self, route: Route, body: bytes) -> HttpAnswer:
        """POST ``body`` (JSON) along ``route``; raise as described in the module docstring."""
        ...

    async def close(self) -> None: ...
