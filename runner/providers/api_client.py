"""The API's routes beyond completions: model listings, files and batches.

Completions go through the run's transport (``runner/transport/``), which only posts JSON.
The few other calls a run makes (one ``GET /models`` per endpoint at preflight; a batch's
upload, create, poll and download) go through this small client over its own
``aiohttp.ClientSession`` (public API), with the provider's headers (the key included, never
logged), the proxy the environment names as the transport reads it (``env_proxy``), and the
same error tree: a non-2xx answer is :func:`classify_status`'s error, a
connection failure a ``ConnectionReset`` or ``Timeout``.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import TracebackType
from typing import Any
from urllib.parse import urlsplit

import aiohttp
import orjson

from runner.providers.base import (
    ConnectionReset,
    MalformedResponse,
    PermanentError,
    Provider,
    Timeout,
    classify_status,
)
from runner.transport.aiohttp_transport import env_proxy


class ApiClient:
    """Calls on an endpoint's API root (``provider.base_url``); use as an async context."""

    def __init__(self, provider: Provider, *, timeout_s: float | None = None) -> None:
        self.provider = provider
        self.base_url = provider.base_url
        self._headers = {
            k: v for k, v in provider.route.headers.items() if k.lower() != "content-type"
        }
        self._timeout = aiohttp.ClientTimeout(total=timeout_s or provider.endpoint.timeout_s)
        self._session: aiohttp.ClientSession | None = None

    async def __aenter__(self) -> ApiClient:
        self._session = aiohttp.ClientSession(timeout=self._timeout)
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    def url(self, path_or_url: str) -> str:
        """An absolute URL as is (Anthropic's ``results_url``), else one under the API root.

        An absolute URL must be on the API's own scheme, host and port: the request carries
        the key, which must never go to a host the config does not name."""
        if not path_or_url.startswith(("http://", "https://")):
            return self.base_url + path_or_url
        given, ours = urlsplit(path_or_url), urlsplit(self.base_url)
        if (given.scheme, given.netloc) != (ours.scheme, ours.netloc):
            raise PermanentError(
                f"the server named a URL on another host ({given.scheme}://{given.netloc}); "
                f"the key is sent only to {ours.scheme}://{ours.netloc}"
            )
        return path_or_url

    async def call(
        self,
        method: str,
        path: str,
        *,
        json: Any = None,
        raw_json: bytes | None = None,
        form: aiohttp.FormData | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> bytes:
        """The body of a 2xx answer; raises a ``ProviderError`` for anything else.

        The body sent is ``json`` (encoded here), ``raw_json`` (already encoded) or ``form``.
        """
        assert self._session is not None, "use ApiClient as an async context manager"
        sent = dict(self._headers)
        data: Any = form
        if json is not None:
            raw_json = orjson.dumps(json)
        if raw_json is not None:
            sent["content-type"] = "application/json"
            data = raw_json
        sent.update(headers or {})
        url = self.url(path)
        try:
            async with self._session.request(
                method, url, data=data, headers=sent, proxy=env_proxy(url)
            ) as resp:
                body = await resp.read()
                status, answer_headers = resp.status, resp.headers
        except TimeoutError as exc:
            raise Timeout(f"{method} {path}: no complete answer in time", maybe_sent=True) from exc
        except aiohttp.ClientConnectorError as exc:
            raise ConnectionReset(
                f"cannot connect to {self.base_url}: {exc.strerror or exc}", maybe_sent=False
            ) from exc
        except aiohttp.ClientError as exc:
            raise ConnectionReset(f"{method} {path}: {type(exc).__name__}: {exc}") from exc
        if status >= 300:
            raise classify_status(status, body, answer_headers)
        return body

    async def json(self, method: str, path: str, **kwargs: Any) -> Any:
        """:meth:`call`, its body decoded as JSON (``MalformedResponse`` if it is not)."""
        body = await self.call(method, path, **kwargs)
        try:
            return orjson.loads(body)
        except orjson.JSONDecodeError as exc:
            raise MalformedResponse(f"{method} {path}: the answer is not JSON") from exc
