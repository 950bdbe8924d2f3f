"""A lean HTTP/1.1 keep-alive client for plain ``http://`` routes (local model servers).

Why the engine has its own client: against a model server on the same machine, aiohttp's
client costs ~130 µs of CPU per request on this project's 2-core reference machine, more
than the engine's own work and more than the server's answer; this client does the same
job in about half that (``benchmarks/README.md``). It is deliberately small:

- one ``asyncio.Protocol`` per connection, one request at a time on it (no pipelining);
- answers are parsed by llhttp (Node.js's parser, through ``httptools``): content-length,
  chunked and close-delimited bodies, interim 1xx answers, keep-alive and ``connection:
  close``; gzip and deflate bodies are decoded should a server send them unasked;
- idle connections are reused last-in first-out; one the server closed is never reused;
- every request has one deadline (``route.timeout_s``, the connection included), enforced
  by a loop timer rather than a wrapping task;
- a connection whose request failed, timed out or was cancelled is closed, never reused,
  since an answer may still be on its way.

TLS, proxies and redirects are not its business: ``https://`` routes go to aiohttp
(:mod:`runner.transport.aiohttp_transport`), and APIs answer POSTs without redirects.
"""

from __future__ import annotations

import asyncio
import zlib

import httptools

from runner.transport.base import CannotConnect, HttpAnswer, HttpProtocolError, Route


class _Connection(asyncio.Protocol):
    """One TCP connection: it parses the answer to the request in flight into its waiter."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self._parser = httptools.HttpResponseParser(self)
        self._waiter: asyncio.Future[HttpAnswer] | None = None
        self._reset_answer()

    def _reset_answer(self) -> None:
        self._status = 0
        self._headers: dict[str, str] = {}
        self._body: list[bytes] = []
        self._headers_done = False
        self._ends_at_close = False
        self._answered = False

    # asyncio.Protocol
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        waiter = self._waiter
        if waiter is None or waiter.done():
            self.abort()  # bytes nobody asked for: this connection cannot be trusted
            return
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserError as exc:
            self._fail(HttpProtocolError(f"unparseable HTTP answer: {exc}"))
        except httptools.HttpParserUpgrade:
            self._fail(HttpProtocolError("the server switched protocols"))

    def connection_lost(self, exc: Exception | None) -> None:
        aborted_here = self.closed  # our own abort(): not the server's end of the body
        self.closed = True
        waiter = self._waiter
        if waiter is None or waiter.done():
            return
        if self._headers_done and self._ends_at_close and exc is None and not aborted_here:
            self._finish()  # a body delimited by the end of the connection is complete now
            return
        where = "mid-answer" if self._headers_done else "before the answer"
        error = ConnectionResetError(f"connection closed {where}")
        if exc is not None:
            error.__cause__ = exc
        waiter.set_exception(error)

    # httptools callbacks
    def on_message_begin(self) -> None:
        if self._answered:
            self.abort()  # a second answer to one request: this connection cannot be trusted
            raise _Unasked()  # and stop llhttp here, before it reports that answer's headers

    def on_header(self, name: bytes, value: bytes) -> None:
        if self._headers_done:
            return  # a chunked body's trailer fields are not headers
        self._headers[name.decode("latin-1").lower()] = value.decode("latin-1")

    def on_headers_complete(self) -> None:
        self._status = self._parser.get_status_code()
        self._headers_done = True
        headers = self._headers
        te = headers.get("transfer-encoding", "").lower().rstrip()
        self._ends_at_close = "content-length" not in headers and not te.endswith("chunked")

    def on_body(self, body: bytes) -> None:
        self._body.append(body)

    def on_message_complete(self) -> None:
        if 100 <= self._status < 200:
            self._reset_answer()  # an interim answer (100 Continue): the real one follows
            return
        self._finish()
        if not self._parser.should_keep_alive():
            self.abort()

    # requests
    def send(self, request: bytes, waiter: asyncio.Future[HttpAnswer]) -> None:
        assert self.transport is not None
        self._waiter = waiter
        self._reset_answer()
        self.transport.write(request)

    def time_out(self, timeout_s: float) -> None:
        waiter = self._waiter
        if waiter is not None and waiter.done():
            return  # answered in the same loop turn: the connection is sound, keep it
        self._fail(TimeoutError(f"no complete answer within {timeout_s:g} s"))

    def abort(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.abort()

    def _fail(self, error: Exception) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_exception(error)
        self.abort()

    def _finish(self) -> None:
        body = b"".join(self._body)
        encoding = self._headers.get("content-encoding", "identity").strip().lower()
        if body and encoding in ("gzip", "deflate"):
            try:
                body = _gunzip(body) if encoding == "gzip" else _inflate(body)
            except zlib.error as exc:
                self._fail(HttpProtocolError(f"undecodable {encoding} body: {exc}"))
                return
        self._answered = True
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(HttpAnswer(self._status, self._headers, body))


class _Unasked(Exception):
    """Raised from a parser callback to stop llhttp at an answer nobody asked for."""


def _gunzip(body: bytes) -> bytes:
    """Every member of a gzip body (RFC 1952 allows several); junk after one is an error."""
    out: list[bytes] = []
    while body:
        member = zlib.decompressobj(47)  # wbits 47: gzip or zlib framing, from the header
        out.append(member.decompress(body))
        if not member.eof:
            raise zlib.error("truncated gzip member")
        body = member.unused_data
    return b"".join(out)


def _inflate(body: bytes) -> bytes:
    try:
        return zlib.decompress(body)
    except zlib.error:
        return zlib.decompress(body, -zlib.MAX_WBITS)  # raw deflate, as some servers send


class KeepAliveTransport:
    """Plain-HTTP requests over pooled keep-alive connections; see the module docstring.

    ``max_idle`` bounds the connections kept open between requests (the engine sizes it to
    the run's total concurrency, which also bounds the connections in use).
    """

    def __init__(self, max_idle: int) -> None:
        self._max_idle = max(1, max_idle)
        self._idle: dict[tuple[str, int], list[_Connection]] = {}
        self._busy: set[_Connection] = set()
        self._closed = False
        self._loop = asyncio.get_running_loop()

    async def post(self, route: Route, body: bytes) -> HttpAnswer:
        loop = self._loop
        deadline = loop.time() + route.timeout_s
        conn = self._take_idle(route)
        if conn is None:
            conn = await self._connect(route)
        self._busy.add(conn)
        waiter: asyncio.Future[HttpAnswer] = loop.create_future()
        timer = loop.call_at(deadline, conn.time_out, route.timeout_s)
        try:
            conn.send(route.head + b"content-length: %d\r\n\r\n" % len(body) + body, waiter)
            answer = await waiter
        except BaseException:
            conn.abort()  # failed, timed out or cancelled: the answer may still be coming
            raise
        finally:
            timer.cancel()
            self._busy.discard(conn)
        if not conn.closed:
            self._release(route, conn)
        return answer

    async def close(self) -> None:
        self._closed = True
        for pool in self._idle.values():
            for conn in pool:
                conn.abort()
        self._idle.clear()
        for conn in list(self._busy):
            conn.abort()
        self._busy.clear()

    def _take_idle(self, route: Route) -> _Connection | None:
        pool = self._idle.get((route.host, route.port))
        while pool:
            conn = pool.pop()
            # is_closing() covers the loop turn between the server's close being read and
            # connection_lost running.
            if not conn.closed and conn.transport is not None and not conn.transport.is_closing():
                return conn
            conn.abort()
        return None

    def _release(self, route: Route, conn: _Connection) -> None:
        pool = self._idle.setdefault((route.host, route.port), [])
        if not self._closed and len(pool) < self._max_idle:
            pool.append(conn)
        else:
            conn.abort()

    async def _connect(self, route: Route) -> _Connection:
        try:
            async with asyncio.timeout(route.connect_timeout_s):
                _, conn = await self._loop.create_connection(_Connection, route.host, route.port)
        except TimeoutError as exc:
            raise TimeoutError(f"no connection within {route.connect_timeout_s:g} s") from exc
        except OSError as exc:
            raise CannotConnect(exc.strerror or str(exc)) from exc
        return conn
