"""Every request through aiohttp: one ``ClientSession`` for the whole run.

aiohttp's exceptions are translated into the transport contract of
:mod:`runner.transport.base`, so providers never see which client sent a request, and each
failure says whether the request may have reached the server.
"""

from __future__ import annotations

import io
import urllib.request
from urllib.parse import urlsplit

import aiohttp

from runner.transport.base import (
    AnswerTimeout,
    AnswerTooLarge,
    CannotConnect,
    ConnectionLost,
    ConnectTimeout,
    HttpAnswer,
    HttpProtocolError,
    Route,
)

# aiohttp warns (ResourceWarning) about bytes bodies over 1 MiB, which long-context prompts
# reach; it streams a file-like body in chunks instead.
LARGE_BODY_BYTES = 2**20


def env_proxy(url: str) -> str | None:
    """The proxy the environment names for ``url``: ``HTTPS_PROXY`` or ``HTTP_PROXY`` (by the
    URL's scheme; ``ALL_PROXY`` otherwise), unless ``NO_PROXY`` covers its host. Credentials
    for the proxy go in its URL (``http://user:pass@proxy:3128``)."""
    host = urlsplit(url).hostname
    if host is None or urllib.request.proxy_bypass(host):
        return None
    proxies = urllib.request.getproxies()
    return proxies.get(urlsplit(url).scheme) or proxies.get("all")


READ_CHUNK_BYTES = 2**16


async def read_bounded(resp: aiohttp.ClientResponse, limit: int) -> bytes:
    """The (decoded) body of ``resp``, or :class:`AnswerTooLarge` once it passes ``limit``
    bytes: a declared ``Content-Length`` over the limit is refused before reading, and a
    chunked or compressed body is read in chunks and dropped as soon as it is too long, so
    a hostile server costs at most ``limit`` bytes of memory."""
    if resp.content_length is not None and resp.content_length > limit:
        raise AnswerTooLarge(limit)
    if resp.content_length is not None and "Content-Encoding" not in resp.headers:
        return await resp.read()  # exactly the declared bytes, which fit: the common answer
    body = bytearray()
    async for chunk in resp.content.iter_chunked(READ_CHUNK_BYTES):
        body += chunk
        if len(body) > limit:
            raise AnswerTooLarge(limit)
    return bytes(body)


class AiohttpTransport:
    """One ``aiohttp.ClientSession`` for the run, opened on first use.

    ``pool_size`` caps its connections (the engine passes the sum of the endpoints'
    workers). The proxy variables are honoured as aiohttp's ``trust_env=True`` would honour
    them, but read once per route (:func:`env_proxy`) instead of in a worker thread for every
    request, which is what ``trust_env`` does (``docs/transport.md``).
    """

    def __init__(self, pool_size: int) -> None:
        self.pool_size = max(1, pool_size)
        self._session: aiohttp.ClientSession | None = None
        self._routes: dict[Route, tuple[aiohttp.ClientTimeout, str | None]] = {}

    def _open(self) -> aiohttp.ClientSession:
        connector = aiohttp.TCPConnector(limit=self.pool_size, ttl_dns_cache=300)
        self._session = aiohttp.ClientSession(connector=connector, raise_for_status=False)
        return self._session

    def _prepared(self, route: Route) -> tuple[aiohttp.ClientTimeout, str | None]:
        prepared = self._routes.get(route)
        if prepared is None:
            timeout = aiohttp.ClientTimeout(
                total=route.timeout_s, sock_connect=route.connect_timeout_s
            )
            prepared = self._routes[route] = (timeout, env_proxy(route.url))
        return prepared

    async def post(
        self, route: Route, body: bytes, *, timeout_s: float | None = None
    ) -> HttpAnswer:
        session = self._session or self._open()
        timeout, proxy = self._prepared(route)
        if timeout_s is not None and timeout_s < route.timeout_s:
            timeout = aiohttp.ClientTimeout(
                total=timeout_s, sock_connect=min(route.connect_timeout_s, timeout_s)
            )
        allowed = timeout.total if timeout.total is not None else route.timeout_s
        data: bytes | io.BytesIO = body if len(body) <= LARGE_BODY_BYTES else io.BytesIO(body)
        try:
            async with session.post(
                route.url, data=data, headers=route.headers, timeout=timeout, proxy=proxy
            ) as resp:
                return HttpAnswer(
                    resp.status, resp.headers, await read_bounded(resp, route.max_body_bytes)
                )
        except aiohttp.ConnectionTimeoutError as exc:
            raise ConnectTimeout(f"no connection within {route.connect_timeout_s:g} s") from exc
        except TimeoutError as exc:  # aiohttp's other timeouts are TimeoutError subclasses
            raise AnswerTimeout(f"no complete answer within {allowed:g} s") from exc
        except aiohttp.ClientConnectorError as exc:
            raise CannotConnect(exc.strerror or str(exc)) from exc
        except (aiohttp.ClientPayloadError, aiohttp.ServerDisconnectedError) as exc:
            raise ConnectionLost(f"connection closed mid-answer: {type(exc).__name__}") from exc
        except aiohttp.ClientResponseError as exc:
            raise HttpProtocolError(f"unparseable HTTP answer: {exc.message}") from exc
        except aiohttp.ClientError as exc:
            raise ConnectionLost(f"{type(exc).__name__}: {exc}") from exc

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None
