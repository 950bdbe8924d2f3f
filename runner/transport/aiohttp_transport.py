"""Every request through aiohttp: one ``ClientSession`` for the whole run.

aiohttp's exceptions are translated into the transport contract of
:mod:`runner.transport.base`, so providers never see which client sent a request, and each
failure says whether the request may have reached the server.
"""

from __future__ import annotations

import io

import aiohttp

from runner.transport.base import (
    AnswerTimeout,
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


class AiohttpTransport:
    """One ``aiohttp.ClientSession`` for the run, opened on first use.

    ``pool_size`` caps its connections (the engine passes the sum of the endpoints'
    concurrency). ``trust_env`` makes the session honour ``HTTPS_PROXY``, ``HTTP_PROXY``,
    ``NO_PROXY`` and ``~/.netrc``, as a user behind a proxy expects.
    """

    def __init__(self, pool_size: int) -> None:
        self.pool_size = max(1, pool_size)
        self._session: aiohttp.ClientSession | None = None
        self._timeouts: dict[Route, aiohttp.ClientTimeout] = {}

    def _open(self) -> aiohttp.ClientSession:
        connector = aiohttp.TCPConnector(limit=self.pool_size, ttl_dns_cache=300)
        self._session = aiohttp.ClientSession(
            connector=connector, raise_for_status=False, trust_env=True
        )
        return self._session

    def _timeout(self, route: Route) -> aiohttp.ClientTimeout:
        timeout = self._timeouts.get(route)
        if timeout is None:
            timeout = aiohttp.ClientTimeout(
                total=route.timeout_s, sock_connect=route.connect_timeout_s
            )
            self._timeouts[route] = timeout
        return timeout

    async def post(self, route: Route, body: bytes) -> HttpAnswer:
        session = self._session or self._open()
        data: bytes | io.BytesIO = body if len(body) <= LARGE_BODY_BYTES else io.BytesIO(body)
        try:
            async with session.post(
                route.url, data=data, headers=route.headers, timeout=self._timeout(route)
            ) as resp:
                payload = await resp.read()
                headers = {name.lower(): value for name, value in resp.headers.items()}
                return HttpAnswer(resp.status, headers, payload)
        except aiohttp.ConnectionTimeoutError as exc:
            raise ConnectTimeout(f"no connection within {route.connect_timeout_s:g} s") from exc
        except TimeoutError as exc:  # aiohttp's other timeouts are TimeoutError subclasses
            raise AnswerTimeout(f"no complete answer within {route.timeout_s:g} s") from exc
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
