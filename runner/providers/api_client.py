"""The API's routes beyond completions: model listings, files and batches.

Completions go through the run's transport (``runner/transport/``), which only posts JSON.
The few other calls a run makes (one ``GET /models`` per endpoint at preflight; a batch's
upload, create, poll and download) go through this small client over its own
``aiohttp.ClientSession`` (public API), with the provider's headers (the key included, never
logged), the proxy the environment names as the transport reads it (``env_proxy``), and the
same error tree: a non-2xx answer is :func:`classify_status`'s error, a
connection failure a ``ConnectionReset`` or ``Timeout``.

A call is bounded by the endpoint's ``timeout_s`` in all, as a completion is; a batch file
upload or download (:func:`transfer_timeout`) is not: files go up to 200-256 MB, and results
with reasoning traces further, so a transfer may take as long as it needs while bytes keep
moving, and times out only when none arrive for ``BATCH_TRANSFER_STALL_S`` (an upload is
also bounded by ``BATCH_UPLOAD_MIN_BYTES_PER_S``: a peer that stops reading it never gets to
the read). A download of results is read as a stream of lines (:meth:`ApiClient.lines`), never
whole: a batch of 100,000 answers with reasoning traces is a body of gigabytes.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator, Mapping
from contextlib import asynccontextmanager
from types import TracebackType
from typing import Any
from urllib.parse import urlsplit

import aiohttp
import orjson

from cotaudit.constants import (
    API_ERROR_BODY_MAX_BYTES,
    BATCH_TRANSFER_STALL_S,
    BATCH_UPLOAD_MIN_BYTES_PER_S,
    CONNECT_TIMEOUT_S,
    RESPONSE_BODY_MAX_BYTES,
)
from runner.providers.base import (
    ConnectionReset,
    MalformedResponse,
    PermanentError,
    Provider,
    Timeout,
    classify_status,
)
from runner.transport.aiohttp_transport import env_proxy

DEFAULT_PORTS = {"http": 80, "https": 443}


def origin(url: str) -> tuple[str, str, int | None]:
    """A URL's scheme, host and port, default ports made explicit and the host lower-cased
    (``https://API.anthropic.com`` and ``https://api.anthropic.com:443`` are one origin)."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    try:
        port = parts.port or DEFAULT_PORTS.get(scheme)
    except ValueError:  # not a number: matches no configured base URL
        port = None
    return scheme, (parts.hostname or "").lower(), port


def transfer_timeout(timeout_s: float, upload_bytes: int = 0) -> aiohttp.ClientTimeout:
    """The timeout of a batch file transfer (see the module docstring): no total for a
    download; for an upload of ``upload_bytes``, the time it takes at
    ``BATCH_UPLOAD_MIN_BYTES_PER_S`` on top of the stall allowance. The stall allowance (no
    byte for that long) is ``BATCH_TRANSFER_STALL_S``, or ``timeout_s`` where that is longer."""
    stall = max(timeout_s, BATCH_TRANSFER_STALL_S)
    total = stall + upload_bytes / BATCH_UPLOAD_MIN_BYTES_PER_S if upload_bytes else None
    return aiohttp.ClientTimeout(total=total, connect=CONNECT_TIMEOUT_S, sock_read=stall)


class ApiClient:
    """Calls on an endpoint's API root (``provider.base_url``); use as an async context."""

    def __init__(self, provider: Provider, *, timeout_s: float | None = None) -> None:
        self.provider = provider
        self.base_url = provider.base_url
        self._headers = {
            k: v for k, v in provider.route.headers.items() if k.lower() != "content-type"
        }
        self.timeout_s = timeout_s or provider.endpoint.timeout_s
        self._timeout = aiohttp.ClientTimeout(total=self.timeout_s)
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

    def transfer_timeout(self, upload_bytes: int = 0) -> aiohttp.ClientTimeout:
        """:func:`transfer_timeout` for this endpoint."""
        return transfer_timeout(self.timeout_s, upload_bytes)

    def same_origin(self, url: str) -> bool:
        """Whether an absolute ``url`` is on the API root's scheme, host and port."""
        return origin(url) == origin(self.base_url)

    def url(self, path_or_url: str) -> str:
        """An absolute URL as is (Anthropic's ``results_url``), else one under the API root.

        An absolute URL must be on the API's own scheme, host and port (:meth:`same_origin`):
        the request carries the key, which must never go to a host the config does not name."""
        if not path_or_url.startswith(("http://", "https://")):
            return self.base_url + path_or_url
        if not self.same_origin(path_or_url):
            given, ours = urlsplit(path_or_url), urlsplit(self.base_url)
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
        timeout: aiohttp.ClientTimeout | None = None,
    ) -> bytes:
        """The body of a 2xx answer; raises a ``ProviderError`` for anything else.

        The body sent is ``json`` (encoded here), ``raw_json`` (already encoded) or ``form``.
        ``timeout`` replaces the endpoint's (a file transfer's: :meth:`transfer_timeout`).
        """
        sent = dict(self._headers)
        data: Any = form
        if json is not None:
            raw_json = orjson.dumps(json)
        if raw_json is not None:
            sent["content-type"] = "application/json"
            data = raw_json
        sent.update(headers or {})
        async with self._request(method, path, data, sent, timeout) as resp:
            body = await self._read(method, path, resp, timeout)
            status, answer_headers = resp.status, resp.headers
        if status >= 300:
            raise classify_status(status, body, answer_headers)
        return body

    async def lines(
        self, method: str, path: str, *, timeout: aiohttp.ClientTimeout | None = None
    ) -> AsyncGenerator[bytes, None]:
        """The lines of a 2xx answer as they arrive, stripped of their ``\\n`` and white
        space (a blank one is ``b""``), so memory holds a line, not the body; raises a
        ``ProviderError`` for anything else, as :meth:`call` does, and ``MalformedResponse``
        for a line over ``RESPONSE_BODY_MAX_BYTES``. A last line without its newline is given
        as it is (the caller's parse tells a cut one). Close it (``contextlib.aclosing``) if
        not read to the end."""
        async with self._request(method, path, None, dict(self._headers), timeout) as resp:
            if resp.status >= 300:
                body = await self._read(method, path, resp, timeout, API_ERROR_BODY_MAX_BYTES)
                raise classify_status(resp.status, body, resp.headers)
            # The part of a line that spans chunks, joined once its newline comes: a line
            # is copied once whatever its length, never once per chunk it spans.
            parts: list[bytes] = []
            size = 0
            while chunk := await self._chunk(method, path, resp, timeout):
                start = 0
                while (end := chunk.find(b"\n", start)) >= 0:
                    line = chunk[start:end]
                    if parts:
                        parts.append(line)
                        line, parts, size = b"".join(parts), [], 0
                    yield line.strip()
                    start = end + 1
                if start < len(chunk):
                    parts.append(chunk[start:])
                    size += len(chunk) - start
                    if size > RESPONSE_BODY_MAX_BYTES:
                        raise MalformedResponse(
                            f"{method} {path}: a line is longer than {RESPONSE_BODY_MAX_BYTES:,} "
                            "bytes, more than any one result: the body is not JSON lines"
                        )
            if last := b"".join(parts).strip():
                yield last

    @asynccontextmanager
    async def _request(
        self,
        method: str,
        path: str,
        data: Any,
        headers: dict[str, str],
        timeout: aiohttp.ClientTimeout | None,
    ) -> AsyncIterator[aiohttp.ClientResponse]:
        assert self._session is not None, "use ApiClient as an async context manager"
        url = self.url(path)
        try:
            async with self._session.request(
                method,
                url,
                data=data,
                headers=headers,
                proxy=env_proxy(url),
                timeout=timeout or self._timeout,
            ) as resp:
                yield resp
        except TimeoutError as exc:
            raise _transfer_error(method, path, exc, timeout) from exc
        except aiohttp.ClientConnectorError as exc:
            raise ConnectionReset(
                f"cannot connect to {self.base_url}: {exc.strerror or exc}", maybe_sent=False
            ) from exc
        except aiohttp.ClientError as exc:
            raise _transfer_error(method, path, exc, timeout) from exc

    async def _read(
        self,
        method: str,
        path: str,
        resp: aiohttp.ClientResponse,
        timeout: aiohttp.ClientTimeout | None,
        limit: int | None = None,
    ) -> bytes:
        """The body, or (``limit``) its first ``limit`` bytes."""
        try:
            if limit is None:
                return await resp.read()
            chunks: list[bytes] = []
            size = 0
            while size < limit and (chunk := await resp.content.read(limit - size)):
                chunks.append(chunk)
                size += len(chunk)
            return b"".join(chunks)
        except (TimeoutError, aiohttp.ClientError) as exc:
            raise _transfer_error(method, path, exc, timeout) from exc

    async def _chunk(
        self,
        method: str,
        path: str,
        resp: aiohttp.ClientResponse,
        timeout: aiohttp.ClientTimeout | None,
    ) -> bytes:
        try:
            return await resp.content.readany()
        except (TimeoutError, aiohttp.ClientError) as exc:
            raise _transfer_error(method, path, exc, timeout) from exc

    async def json(self, method: str, path: str, **kwargs: Any) -> Any:
        """:meth:`call`, its body decoded as JSON (``MalformedResponse`` if it is not)."""
        body = await self.call(method, path, **kwargs)
        try:
            return orjson.loads(body)
        except orjson.JSONDecodeError as exc:
            raise MalformedResponse(f"{method} {path}: the answer is not JSON") from exc


def _transfer_error(
    method: str, path: str, exc: BaseException, timeout: aiohttp.ClientTimeout | None
) -> Timeout | ConnectionReset:
    """What a call that failed on the way is (both retryable): a timeout, or a reset (a
    connection lost, a body cut short)."""
    if isinstance(exc, TimeoutError):
        what = "the transfer stalled" if timeout is not None else "no complete answer in time"
        return Timeout(f"{method} {path}: {what}", maybe_sent=True)
    return ConnectionReset(f"{method} {path}: {type(exc).__name__}: {exc}")
