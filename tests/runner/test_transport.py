"""The transport against raw loopback servers: framing, reuse and every way an answer fails.

Each server here writes HTTP bytes by hand, so the tests can send what real servers send
(chunked, close-delimited, gzip, interim 100) and what broken ones do (truncated bodies,
garbage, silence), and check that each failure says whether the request may have reached the
server.
"""

from __future__ import annotations

import asyncio
import contextlib
import gzip
import socket
from collections.abc import AsyncIterator, Awaitable, Callable

import orjson
import pytest

from cotaudit.errors import UsageError
from runner.config import EndpointConfig
from runner.providers import make_provider
from runner.transport import (
    AnswerTimeout,
    AnswerTooLarge,
    CannotConnect,
    ConnectionLost,
    ConnectTimeout,
    HttpAnswer,
    HttpProtocolError,
    Route,
    Transport,
    default_transport,
    maybe_sent,
)

Answer = Callable[[bytes, asyncio.StreamWriter], Awaitable[bool]]  # -> keep the connection?
OK_BODY = b'{"ok": true}'


class RawServer:
    """Reads requests off each connection and lets ``answer`` write whatever bytes it likes.

    ``requests`` holds every request as received (head and body); ``connections`` counts
    the connections opened; ``closed`` is set each time the server sees one end."""

    def __init__(self, answer: Answer) -> None:
        self.answer = answer
        self.requests: list[bytes] = []
        self.connections = 0
        self.closed = asyncio.Event()
        self._handlers: set[asyncio.Task[None]] = set()
        self._writers: list[asyncio.StreamWriter] = []

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        task = asyncio.current_task()
        assert task is not None
        self._handlers.add(task)
        self._writers.append(writer)
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n"):
                    name, _, value = line.partition(b":")
                    if name.strip().lower() == b"content-length":
                        length = int(value)
                request = head + await reader.readexactly(length)
                self.requests.append(request)
                if not await self.answer(request, writer):
                    break
        except (asyncio.IncompleteReadError, OSError):
            pass  # the client went away, or the test's teardown closed the socket
        finally:
            writer.close()
            with contextlib.suppress(OSError):
                await writer.wait_closed()
            self.closed.set()

    @contextlib.asynccontextmanager
    async def url(self) -> AsyncIterator[str]:
        server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        try:
            yield f"http://127.0.0.1:{port}/v1/chat/completions"
        finally:
            server.close()
            # Handlers still reading end with a ConnectionError once their socket is gone.
            # Cancelling them instead makes asyncio 3.11 log "Exception in callback".
            for writer in self._writers:
                writer.transport.abort()
            await asyncio.wait_for(asyncio.gather(*self._handlers), 5)
            await server.wait_closed()


def _answer(*parts: bytes, keep: bool = True) -> Answer:
    async def answer(request: bytes, writer: asyncio.StreamWriter) -> bool:
        for part in parts:
            writer.write(part)
            await writer.drain()
        return keep

    return answer


def _ok(body: bytes = OK_BODY, extra: bytes = b"") -> bytes:
    return (
        b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n%s\r\n%s"
        % (len(body), extra, body)
    )


def _route(url: str, timeout_s: float = 5.0, **headers: str) -> Route:
    return Route(url, headers, timeout_s=timeout_s, connect_timeout_s=timeout_s)


@contextlib.asynccontextmanager
async def _transport() -> AsyncIterator[Transport]:
    transport = default_transport(4)
    try:
        yield transport
    finally:
        await transport.close()


async def _ask(*parts: bytes, keep: bool = True) -> HttpAnswer:
    """One request through a fresh transport to a server that writes ``parts``."""
    server = RawServer(_answer(*parts, keep=keep))
    async with server.url() as url, _transport() as transport:
        return await transport.post(_route(url), b"{}")


async def test_chunked_answer_is_joined() -> None:
    head = (
        b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n"
    )
    chunks = [b'{"ok"', b": tr", b"ue}"]
    framed = [b"%x\r\n%s\r\n" % (len(c), c) for c in chunks] + [b"0\r\n\r\n"]
    answer = await _ask(head, *framed)
    assert (answer.status, answer.body) == (200, OK_BODY)
    assert answer.headers["content-type"] == "application/json"


async def test_large_answer_arrives_whole() -> None:
    big = orjson.dumps({"text": "x" * 1_000_000})  # many reads on the client's side
    server = RawServer(_answer(_ok(big)))
    async with server.url() as url, _transport() as transport:
        answers = [await transport.post(_route(url), b"{}") for _ in range(2)]
    assert [a.body for a in answers] == [big, big]


async def test_large_request_body_is_sent_whole() -> None:
    body = orjson.dumps({"prompt": "y" * 3_000_000})  # a long-context prompt, over 1 MiB
    server = RawServer(_answer(_ok()))
    async with server.url() as url, _transport() as transport:
        answer = await transport.post(_route(url), body)
    assert answer.body == OK_BODY
    assert server.requests[0].partition(b"\r\n\r\n")[2] == body


async def test_close_delimited_answer_is_complete_at_close() -> None:
    head = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n\r\n"
    server = RawServer(_answer(head, OK_BODY, keep=False))
    async with server.url() as url, _transport() as transport:
        first = await transport.post(_route(url), b"{}")
        second = await transport.post(_route(url), b"{}")
    assert first.body == second.body == OK_BODY
    assert server.connections == 2  # such a connection cannot carry a second request


async def test_gzip_answer_is_decoded() -> None:
    answer = await _ask(_ok(gzip.compress(OK_BODY), b"content-encoding: gzip\r\n"))
    assert answer.body == OK_BODY


async def test_multi_member_gzip_is_decoded_whole() -> None:
    body = gzip.compress(b'{"ok": ') + gzip.compress(b"true}")  # two members (RFC 1952)
    answer = await _ask(_ok(body, b"content-encoding: gzip\r\n"))
    assert answer.body == OK_BODY


@pytest.mark.parametrize("encoding", ["gzip", "deflate"])
async def test_empty_encoded_body_is_an_empty_answer(encoding: str) -> None:
    head = b"HTTP/1.1 429 Too Many Requests\r\nretry-after: 7\r\ncontent-encoding: %s\r\n"
    answer = await _ask(head % encoding.encode() + b"content-length: 0\r\n\r\n")
    assert (answer.status, answer.body, answer.headers["retry-after"]) == (429, b"", "7")


async def test_chunked_trailers_do_not_override_headers() -> None:
    head = b"HTTP/1.1 429 Too Many Requests\r\nretry-after: 2\r\ntransfer-encoding: chunked\r\n\r\n"
    chunk = b"%x\r\n%s\r\n" % (len(OK_BODY), OK_BODY)
    trailer = b"0\r\nretry-after: 3600\r\ncontent-encoding: gzip\r\n\r\n"
    answer = await _ask(head, chunk, trailer)
    assert (answer.body, answer.headers["retry-after"]) == (OK_BODY, "2")


async def test_identity_transfer_encoding_ends_at_close() -> None:
    head = b"HTTP/1.1 200 OK\r\ntransfer-encoding: identity\r\n\r\n"
    answer = await _ask(head, OK_BODY, keep=False)
    assert answer.body == OK_BODY


async def test_interim_100_is_skipped() -> None:
    answer = await _ask(b"HTTP/1.1 100 Continue\r\n\r\n", _ok())
    assert (answer.status, answer.body) == (200, OK_BODY)


async def test_error_status_is_an_answer_with_its_headers() -> None:
    body = b'{"error": "slow down"}'
    head = b"HTTP/1.1 429 Too Many Requests\r\nRetry-After-Ms: 120\r\ncontent-length: %d\r\n\r\n"
    answer = await _ask(head % len(body), body)
    assert (answer.status, answer.body, answer.headers["retry-after-ms"]) == (429, body, "120")


LIMIT = 4096  # a route's max_body_bytes in the tests below


def _limited(url: str) -> Route:
    return Route(url, {}, timeout_s=5.0, connect_timeout_s=5.0, max_body_bytes=LIMIT)


def _chunked(body: bytes, extra: bytes = b"") -> bytes:
    head = b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n%s\r\n" % extra
    step = 1000
    chunks = [body[i : i + step] for i in range(0, len(body), step)]
    return head + b"".join(b"%x\r\n%s\r\n" % (len(c), c) for c in chunks) + b"0\r\n\r\n"


@pytest.mark.parametrize(
    ("name", "answer"),
    [
        ("declared length", _ok(b"x" * (LIMIT + 1))),
        ("chunked", _chunked(b"x" * (LIMIT + 1))),
        (
            "gzip that inflates past it",
            _ok(gzip.compress(b"x" * 100 * LIMIT), b"content-encoding: gzip\r\n"),
        ),
        (
            "chunked gzip",
            _chunked(gzip.compress(b"x" * 100 * LIMIT), b"content-encoding: gzip\r\n"),
        ),
    ],
)
async def test_an_answer_longer_than_the_route_allows_is_refused(name: str, answer: bytes) -> None:
    # A hostile server costs at most the route's limit: whatever the framing or encoding.
    server = RawServer(_answer(answer, keep=False))
    async with server.url() as url, _transport() as transport:
        with pytest.raises(AnswerTooLarge) as info:
            await transport.post(_limited(url), b"{}")
    assert maybe_sent(info.value), name


@pytest.mark.parametrize(
    "answer",
    [
        _ok(b"y" * LIMIT),
        _chunked(b"y" * LIMIT),
        _ok(gzip.compress(b"y" * LIMIT), b"content-encoding: gzip\r\n"),
    ],
)
async def test_an_answer_of_exactly_the_limit_arrives_whole(answer: bytes) -> None:
    server = RawServer(_answer(answer, keep=False))
    async with server.url() as url, _transport() as transport:
        got = await transport.post(_limited(url), b"{}")
    assert got.body == b"y" * LIMIT


async def test_truncated_body_is_a_reset() -> None:
    truncated = b"HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\n" + OK_BODY
    server = RawServer(_answer(truncated, keep=False))
    async with server.url() as url, _transport() as transport:
        with pytest.raises(ConnectionLost) as info:
            await transport.post(_route(url), b"{}")
    assert maybe_sent(info.value)  # the server had the request: it may have been billed


async def test_close_before_the_answer_is_a_reset() -> None:
    server = RawServer(_answer(keep=False))
    async with server.url() as url, _transport() as transport:
        with pytest.raises(ConnectionResetError) as info:
            await transport.post(_route(url), b"{}")
    assert isinstance(info.value, ConnectionLost) and maybe_sent(info.value)


async def test_garbage_is_a_protocol_error() -> None:
    server = RawServer(_answer(b"SMTP ready\r\n\r\n", keep=False))
    async with server.url() as url, _transport() as transport:
        with pytest.raises(HttpProtocolError) as info:
            await transport.post(_route(url), b"{}")
    assert maybe_sent(info.value)


async def test_refused_connection_cannot_connect() -> None:
    with socket.socket() as sock:  # a port that was free a moment ago, now closed
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    async with _transport() as transport:
        with pytest.raises(CannotConnect) as info:
            await transport.post(_route(f"http://127.0.0.1:{port}/v1/x"), b"{}")
    assert not maybe_sent(info.value)  # no connection: nothing was sent


async def test_silence_times_out_and_the_next_request_gets_a_fresh_connection() -> None:
    answers = [_answer(), _answer(_ok())]  # the first request is never answered

    async def answer(request: bytes, writer: asyncio.StreamWriter) -> bool:
        return await answers.pop(0)(request, writer)

    server = RawServer(answer)
    async with server.url() as url, _transport() as transport:
        with pytest.raises(AnswerTimeout) as info:
            await transport.post(_route(url, timeout_s=0.05), b"{}")
        assert maybe_sent(info.value)  # the server has the request and may answer it yet
        answer_ = await transport.post(_route(url), b"{}")
        await asyncio.wait_for(server.closed.wait(), 5)
    assert answer_.body == OK_BODY
    assert server.connections == 2  # the timed-out connection was closed, not reused


def test_route_refuses_header_injection() -> None:
    with pytest.raises(ValueError, match="line break"):
        Route("http://h/v1", {"x-a": "1\r\nx-b: 2"}, timeout_s=1, connect_timeout_s=1)
    with pytest.raises(ValueError, match="not a valid name"):
        Route("http://h/v1", {"x:a": "1"}, timeout_s=1, connect_timeout_s=1)
    with pytest.raises(ValueError, match="not a valid host name"):
        Route("http://a..b/v1", {}, timeout_s=1, connect_timeout_s=1)
    with pytest.raises(ValueError, match="not an http"):
        Route("ftp://h/v1", {}, timeout_s=1, connect_timeout_s=1)


@pytest.mark.parametrize(
    ("key", "says"),
    [("sk-canary-123\n", "line break"), ("sk-canary-\u20ac", "outside latin-1")],
    ids=["newline", "euro-sign"],
)
def test_a_key_http_cannot_carry_is_a_usage_error_that_hides_it(
    monkeypatch: pytest.MonkeyPatch, key: str, says: str
) -> None:
    monkeypatch.setenv("TEST_OPENAI_KEY", key)
    ep = EndpointConfig("o", "openai", "m", api_key_env="TEST_OPENAI_KEY")
    with pytest.raises(UsageError) as info:
        make_provider(ep)
    message = str(info.value)  # what, where and fix, as the CLI prints it
    assert "TEST_OPENAI_KEY" in message and says in message
    assert "sk-canary" not in message and "\u20ac" not in message


async def test_one_session_reuses_its_connection_and_sends_the_route_headers() -> None:
    server = RawServer(_answer(_ok()))
    async with server.url() as url:
        route = Route(
            url,
            {"content-type": "application/json", "authorization": "Bearer sk-1"},
            timeout_s=5,
            connect_timeout_s=5,
        )
        transport = default_transport(4)
        bodies = [orjson.dumps({"n": i}) for i in range(5)]
        answers = [await transport.post(route, body) for body in bodies]
        await transport.close()
    assert [a.body for a in answers] == [OK_BODY] * 5
    assert server.connections == 1
    head = server.requests[0].partition(b"\r\n\r\n")[0].lower()
    assert head.startswith(b"post /v1/chat/completions http/1.1")
    assert b"authorization: bearer sk-1" in head
    assert b"user-agent: cotaudit/" in head and b"accept: application/json" in head
    assert [r.partition(b"\r\n\r\n")[2] for r in server.requests] == bodies


def test_a_configured_user_agent_replaces_the_default_one() -> None:
    route = Route("http://h/v1", {"User-Agent": "lab/1"}, timeout_s=1, connect_timeout_s=1)
    assert [k for k in route.headers if k.lower() == "user-agent"] == ["User-Agent"]


async def test_a_proxy_named_in_the_environment_carries_the_requests(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # HTTP(S)_PROXY and NO_PROXY work as users behind a proxy expect. The proxy here is a raw
    # server: a plain-HTTP request through a proxy names the absolute URL.
    proxy, direct = RawServer(_answer(_ok())), RawServer(_answer(_ok()))
    async with proxy.url() as proxy_url, direct.url() as direct_url:
        for name in ("NO_PROXY", "no_proxy", "http_proxy", "ALL_PROXY", "all_proxy"):
            monkeypatch.delenv(name, raising=False)
        monkeypatch.setenv("HTTP_PROXY", proxy_url.rsplit("/v1", 1)[0])
        monkeypatch.setenv("NO_PROXY", "localhost")
        async with _transport() as transport:
            answer = await transport.post(_route("http://api.invalid/v1/chat"), b"{}")
            local = direct_url.replace("127.0.0.1", "localhost")
            await transport.post(_route(local), b"{}")  # NO_PROXY: straight to the server
    assert answer.body == OK_BODY
    assert proxy.requests[0].startswith(b"POST http://api.invalid/v1/chat HTTP/1.1")
    assert len(proxy.requests) == 1 and len(direct.requests) == 1


async def test_a_connect_timeout_was_never_sent() -> None:
    # A listening socket whose backlog is full and never accepted: the kernel drops further
    # connection attempts, so connecting hangs until the connect timeout.
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(0)
        port = listener.getsockname()[1]
        fillers = [socket.socket() for _ in range(3)]
        try:
            for sock in fillers:
                sock.setblocking(False)
                with contextlib.suppress(BlockingIOError):
                    sock.connect(("127.0.0.1", port))
            route = Route(f"http://127.0.0.1:{port}/v1", {}, timeout_s=5, connect_timeout_s=0.1)
            async with _transport() as transport:
                with pytest.raises(ConnectTimeout) as info:
                    await transport.post(route, b"{}")
        finally:
            for sock in fillers:
                sock.close()
    assert not maybe_sent(info.value) and isinstance(info.value, TimeoutError)
