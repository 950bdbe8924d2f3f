"""The transports against raw loopback servers: framing, reuse and every way an answer fails.

Each server here writes HTTP bytes by hand, so the tests can send what real servers send
(chunked, close-delimited, gzip, interim 100) and what broken ones do (truncated bodies,
garbage, silence). The contract tests run against both transports: a provider must not be
able to tell which client sent its request.
"""

from __future__ import annotations

import asyncio
import contextlib
import gzip
import random
import socket
import struct
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import orjson
import pytest

from cotaudit.errors import UsageError
from runner.config import EndpointConfig
from runner.providers import make_provider
from runner.transport import (
    CannotConnect,
    HttpAnswer,
    HttpProtocolError,
    KeepAliveTransport,
    Route,
    Transport,
    TransportFactory,
    aiohttp_only,
    default_transport,
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
async def _transport(make: TransportFactory) -> AsyncIterator[Transport]:
    transport = make(4)
    try:
        yield transport
    finally:
        await transport.close()


async def _ask(make: TransportFactory, *parts: bytes, keep: bool = True) -> HttpAnswer:
    """One request through a fresh transport to a server that writes ``parts``."""
    server = RawServer(_answer(*parts, keep=keep))
    async with server.url() as url, _transport(make) as transport:
        return await transport.post(_route(url), b"{}")


BOTH = pytest.mark.parametrize(
    "make", [default_transport, aiohttp_only], ids=["keepalive", "aiohttp"]
)


@BOTH
async def test_chunked_answer_is_joined(make: TransportFactory) -> None:
    head = (
        b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n"
    )
    chunks = [b'{"ok"', b": tr", b"ue}"]
    framed = [b"%x\r\n%s\r\n" % (len(c), c) for c in chunks] + [b"0\r\n\r\n"]
    answer = await _ask(make, head, *framed)
    assert (answer.status, answer.body) == (200, OK_BODY)
    assert answer.headers["content-type"] == "application/json"


@BOTH
async def test_large_answer_arrives_whole(make: TransportFactory) -> None:
    big = orjson.dumps({"text": "x" * 1_000_000})  # many reads on the client's side
    server = RawServer(_answer(_ok(big)))
    async with server.url() as url, _transport(make) as transport:
        answers = [await transport.post(_route(url), b"{}") for _ in range(2)]
    assert [a.body for a in answers] == [big, big]


@BOTH
async def test_large_request_body_is_sent_whole(make: TransportFactory) -> None:
    body = orjson.dumps({"prompt": "y" * 3_000_000})  # a long-context prompt, over 1 MiB
    server = RawServer(_answer(_ok()))
    async with server.url() as url, _transport(make) as transport:
        answer = await transport.post(_route(url), body)
    assert answer.body == OK_BODY
    assert server.requests[0].partition(b"\r\n\r\n")[2] == body


@BOTH
async def test_close_delimited_answer_is_complete_at_close(make: TransportFactory) -> None:
    head = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n\r\n"
    server = RawServer(_answer(head, OK_BODY, keep=False))
    async with server.url() as url, _transport(make) as transport:
        first = await transport.post(_route(url), b"{}")
        second = await transport.post(_route(url), b"{}")
    assert first.body == second.body == OK_BODY
    assert server.connections == 2  # such a connection cannot carry a second request


@BOTH
async def test_gzip_answer_is_decoded(make: TransportFactory) -> None:
    answer = await _ask(make, _ok(gzip.compress(OK_BODY), b"content-encoding: gzip\r\n"))
    assert answer.body == OK_BODY


@BOTH
async def test_multi_member_gzip_is_decoded_whole(make: TransportFactory) -> None:
    body = gzip.compress(b'{"ok": ') + gzip.compress(b"true}")  # two members (RFC 1952)
    answer = await _ask(make, _ok(body, b"content-encoding: gzip\r\n"))
    assert answer.body == OK_BODY


@BOTH
@pytest.mark.parametrize("encoding", ["gzip", "deflate"])
async def test_empty_encoded_body_is_an_empty_answer(make: TransportFactory, encoding: str) -> None:
    head = b"HTTP/1.1 429 Too Many Requests\r\nretry-after: 7\r\ncontent-encoding: %s\r\n"
    answer = await _ask(make, head % encoding.encode() + b"content-length: 0\r\n\r\n")
    assert (answer.status, answer.body, answer.headers["retry-after"]) == (429, b"", "7")


@BOTH
async def test_chunked_trailers_do_not_override_headers(make: TransportFactory) -> None:
    head = b"HTTP/1.1 429 Too Many Requests\r\nretry-after: 2\r\ntransfer-encoding: chunked\r\n\r\n"
    chunk = b"%x\r\n%s\r\n" % (len(OK_BODY), OK_BODY)
    trailer = b"0\r\nretry-after: 3600\r\ncontent-encoding: gzip\r\n\r\n"
    answer = await _ask(make, head, chunk, trailer)
    assert (answer.body, answer.headers["retry-after"]) == (OK_BODY, "2")


@BOTH
async def test_identity_transfer_encoding_ends_at_close(make: TransportFactory) -> None:
    head = b"HTTP/1.1 200 OK\r\ntransfer-encoding: identity\r\n\r\n"
    answer = await _ask(make, head, OK_BODY, keep=False)
    assert answer.body == OK_BODY


@BOTH
async def test_interim_100_is_skipped(make: TransportFactory) -> None:
    answer = await _ask(make, b"HTTP/1.1 100 Continue\r\n\r\n", _ok())
    assert (answer.status, answer.body) == (200, OK_BODY)


@BOTH
async def test_error_status_is_an_answer_with_its_headers(make: TransportFactory) -> None:
    body = b'{"error": "slow down"}'
    head = b"HTTP/1.1 429 Too Many Requests\r\nRetry-After-Ms: 120\r\ncontent-length: %d\r\n\r\n"
    answer = await _ask(make, head % len(body), body)
    assert (answer.status, answer.body, answer.headers["retry-after-ms"]) == (429, body, "120")


@BOTH
async def test_truncated_body_is_a_reset(make: TransportFactory) -> None:
    truncated = b"HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\n" + OK_BODY
    server = RawServer(_answer(truncated, keep=False))
    async with server.url() as url, _transport(make) as transport:
        with pytest.raises(ConnectionResetError):
            await transport.post(_route(url), b"{}")


@BOTH
async def test_close_before_the_answer_is_a_reset(make: TransportFactory) -> None:
    server = RawServer(_answer(keep=False))
    async with server.url() as url, _transport(make) as transport:
        with pytest.raises(ConnectionResetError):
            await transport.post(_route(url), b"{}")


@BOTH
async def test_garbage_is_a_protocol_error(make: TransportFactory) -> None:
    server = RawServer(_answer(b"SMTP ready\r\n\r\n", keep=False))
    async with server.url() as url, _transport(make) as transport:
        with pytest.raises(HttpProtocolError):
            await transport.post(_route(url), b"{}")


@BOTH
async def test_refused_connection_cannot_connect(make: TransportFactory) -> None:
    with socket.socket() as sock:  # a port that was free a moment ago, now closed
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    async with _transport(make) as transport:
        with pytest.raises(CannotConnect):
            await transport.post(_route(f"http://127.0.0.1:{port}/v1/x"), b"{}")


@BOTH
async def test_silence_times_out_and_the_next_request_gets_a_fresh_connection(
    make: TransportFactory,
) -> None:
    answers = [_answer(), _answer(_ok())]  # the first request is never answered

    async def answer(request: bytes, writer: asyncio.StreamWriter) -> bool:
        return await answers.pop(0)(request, writer)

    server = RawServer(answer)
    async with server.url() as url, _transport(make) as transport:
        with pytest.raises(TimeoutError):
            await transport.post(_route(url, timeout_s=0.05), b"{}")
        answer_ = await transport.post(_route(url), b"{}")
        await asyncio.wait_for(server.closed.wait(), 5)
    assert answer_.body == OK_BODY
    assert server.connections == 2  # the timed-out connection was closed, not reused


async def test_keepalive_reuses_one_connection_and_writes_the_request_exactly() -> None:
    server = RawServer(_answer(_ok()))
    async with server.url() as url:
        route = Route(
            url,
            {"content-type": "application/json", "authorization": "Bearer sk-1"},
            timeout_s=5,
            connect_timeout_s=5,
        )
        transport = KeepAliveTransport(4)
        bodies = [orjson.dumps({"n": i}) for i in range(5)]
        answers = [await transport.post(route, body) for body in bodies]
        await transport.close()
    assert [a.body for a in answers] == [OK_BODY] * 5
    assert server.connections == 1
    first = server.requests[0]
    head = first.partition(b"\r\n\r\n")[0]
    lines = head.split(b"\r\n")
    assert lines[0] == b"POST /v1/chat/completions HTTP/1.1"
    fields = dict(line.split(b": ", 1) for line in lines[1:])
    assert fields[b"host"] == url.split("/")[2].encode()
    assert fields[b"authorization"] == b"Bearer sk-1"
    assert fields[b"content-length"] == b"%d" % len(bodies[0])
    assert [r.partition(b"\r\n\r\n")[2] for r in server.requests] == bodies


async def test_keepalive_does_not_reuse_a_connection_the_server_closed() -> None:
    server = RawServer(_answer(_ok(), keep=False))  # keep-alive advertised, then closed
    async with server.url() as url:
        transport = KeepAliveTransport(4)
        await transport.post(_route(url), b"{}")
        await asyncio.wait_for(server.closed.wait(), 5)
        for _ in range(20):  # the client's side of the close arrives within a few loop turns
            await asyncio.sleep(0)
        answer = await transport.post(_route(url), b"{}")
        await transport.close()
    assert answer.body == OK_BODY
    assert server.connections == 2


def _reset(writer: asyncio.StreamWriter) -> None:
    """End the connection with a TCP reset (SO_LINGER 0), not a clean close."""
    sock = writer.get_extra_info("socket")
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()


async def test_keepalive_reset_mid_close_delimited_body_is_not_an_answer() -> None:
    async def answer(request: bytes, writer: asyncio.StreamWriter) -> bool:
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n\r\n" + OK_BODY[:5])
        await writer.drain()
        for _ in range(20):  # the client reads the head and the part of the body
            await asyncio.sleep(0)
        _reset(writer)
        return False

    server = RawServer(answer)
    async with server.url() as url:
        transport = KeepAliveTransport(4)
        with pytest.raises(ConnectionResetError):
            await transport.post(_route(url), b"{}")
        await transport.close()


async def _received(
    transport: Transport, route: Route, server: RawServer
) -> asyncio.Future[HttpAnswer]:
    """A request the server has read, its answer still to come."""
    pending = asyncio.ensure_future(transport.post(route, b"{}"))
    while not server.requests:
        await asyncio.sleep(0)
    return pending


async def test_keepalive_close_mid_close_delimited_body_is_not_an_answer() -> None:
    async def answer(request: bytes, writer: asyncio.StreamWriter) -> bool:
        writer.write(b"HTTP/1.1 200 OK\r\n\r\n" + OK_BODY[:5])  # and the rest never comes
        await writer.drain()
        return True

    server = RawServer(answer)
    async with server.url() as url:
        transport = KeepAliveTransport(4)
        pending = await _received(transport, _route(url), server)
        for _ in range(20):
            await asyncio.sleep(0)
        await transport.close()  # the run shutting down with this answer half read
        with pytest.raises(ConnectionResetError):
            await pending


async def test_keepalive_close_while_connecting_leaves_no_connection_open() -> None:
    server = RawServer(_answer(_ok()))
    async with server.url() as url:
        transport = KeepAliveTransport(4)
        pending = asyncio.ensure_future(transport.post(_route(url), b"{}"))
        await asyncio.sleep(0)  # the request is now opening its connection
        await transport.close()
        assert (await pending).body == OK_BODY
        await asyncio.wait_for(server.closed.wait(), 5)  # and the connection was not kept


async def test_keepalive_a_second_answer_in_the_packet_leaves_the_first_intact() -> None:
    second = b"HTTP/1.1 429 Too Many Requests\r\nretry-after: 999\r\ncontent-encoding: gzip\r\n"
    server = RawServer(_answer(_ok() + second))
    async with server.url() as url:
        transport = KeepAliveTransport(4)
        answer = await transport.post(_route(url), b"{}")
        await transport.close()
    assert (answer.status, answer.body) == (200, OK_BODY)
    assert "retry-after" not in answer.headers and "content-encoding" not in answer.headers


async def test_keepalive_connection_close_answer_is_not_reused() -> None:
    server = RawServer(_answer(_ok(extra=b"connection: close\r\n")))
    async with server.url() as url:
        transport = KeepAliveTransport(4)
        for _ in range(3):
            assert (await transport.post(_route(url), b"{}")).body == OK_BODY
        await transport.close()
    assert server.connections == 3


async def test_keepalive_cancelled_request_closes_its_connection() -> None:
    answers = [_answer(), _answer(_ok())]

    async def answer(request: bytes, writer: asyncio.StreamWriter) -> bool:
        return await answers.pop(0)(request, writer)

    server = RawServer(answer)
    async with server.url() as url:
        transport = KeepAliveTransport(4)
        pending = await _received(transport, _route(url), server)
        pending.cancel()
        with pytest.raises(asyncio.CancelledError):
            await pending
        await asyncio.wait_for(server.closed.wait(), 5)  # the server saw it close
        assert (await transport.post(_route(url), b"{}")).body == OK_BODY
        await transport.close()
    assert server.connections == 2


async def test_keepalive_unasked_bytes_on_an_idle_connection_drop_it() -> None:
    async def answer(request: bytes, writer: asyncio.StreamWriter) -> bool:
        writer.write(_ok() + b"HTTP/1.1 200 OK\r\n")  # one answer too many
        await writer.drain()
        return True

    server = RawServer(answer)
    async with server.url() as url:
        transport = KeepAliveTransport(4)
        first = await transport.post(_route(url), b"{}")
        second = await transport.post(_route(url), b"{}")
        await transport.close()
    assert first.body == second.body == OK_BODY
    assert server.connections == 2


def test_route_refuses_header_injection() -> None:
    with pytest.raises(ValueError, match="line break"):
        Route("http://h/v1", {"x-a": "1\r\nx-b: 2"}, timeout_s=1, connect_timeout_s=1)
    route = Route("http://user:pw@h:81/v1", {}, timeout_s=1, connect_timeout_s=1)
    assert b"host: h:81\r\n" in route.head and b"pw" not in route.head
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


@pytest.mark.parametrize(
    ("base_url", "http_client", "keepalive"),
    [
        ("http://127.0.0.1:8000/v1", "auto", True),
        ("http://127.0.0.1:8000/v1", "aiohttp", False),
        ("https://api.example.com/v1", "auto", False),  # TLS is aiohttp's
    ],
)
def test_endpoint_chooses_its_client(base_url: str, http_client: str, keepalive: bool) -> None:
    ep = EndpointConfig("o", "openai", "m", base_url=base_url, http_client=http_client)
    assert make_provider(ep).route.keepalive is keepalive


async def test_routing_sends_an_aiohttp_route_through_aiohttp() -> None:
    server = RawServer(_answer(_ok()))
    async with server.url() as url, _transport(default_transport) as transport:
        route = Route(url, {}, timeout_s=5, connect_timeout_s=5, keepalive=False)
        await transport.post(route, b"{}")
    assert b"aiohttp" in server.requests[0].lower()  # aiohttp's user-agent, not ours


def _storm_frame(rid: bytes, rng: random.Random) -> tuple[bytes, bool]:
    """An answer echoing ``rid`` in a random framing; True when it must end the connection."""
    body = b'{"id": %s, "pad": "%s"}' % (rid, b"x" * rng.choice([0, 10, 5000, 70000]))
    kind = rng.choice(["length", "length", "chunked", "gzip", "close", "http10"])
    if kind == "chunked":
        parts = [body[i : i + 777] for i in range(0, len(body), 777)]
        framed = b"".join(b"%x;ext=1\r\n%s\r\n" % (len(p), p) for p in parts)
        return (
            b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n" + framed + b"0\r\n\r\n",
            False,
        )
    if kind == "gzip":
        return _ok(gzip.compress(body), b"content-encoding: gzip\r\n"), False
    if kind == "close":
        return b"HTTP/1.1 200 OK\r\n\r\n" + body, True
    if kind == "http10":
        return b"HTTP/1.0 200 OK\r\ncontent-length: %d\r\n\r\n%s" % (len(body), body), True
    return _ok(body), False


async def test_keepalive_storm_every_answer_reaches_its_own_request() -> None:
    """300 requests, 32 at a time, against a server that answers in random framings after
    random delays (some past the 0.15 s deadline), and resets or closes connections before,
    during and after answers: every answer carries its own request's id, complete; every
    failure is one of the contract's; the event loop logs nothing."""
    rng = random.Random(7)
    loop_errors: list[dict[str, Any]] = []
    loop = asyncio.get_running_loop()
    previous_handler = loop.get_exception_handler()
    loop.set_exception_handler(lambda _loop, context: loop_errors.append(context))

    async def answer(request: bytes, writer: asyncio.StreamWriter) -> bool:
        data, ends = _storm_frame(request.partition(b"\r\n\r\n")[2], rng)
        await asyncio.sleep(rng.choice([0, 0, 0, 0.001, 0.01, 0.2]))
        if rng.random() < 0.2:
            data = b"HTTP/1.1 100 Continue\r\n\r\n" + data
        fate = rng.random()
        if fate < 0.04:
            _reset(writer)
            return False
        if fate < 0.08:
            writer.write(data[: rng.randrange(1, len(data))])
            await writer.drain()
            await asyncio.sleep(0.001)
            _reset(writer)
            return False
        step = max(1, len(data) // rng.choice([1, 1, 2, 5]))
        for i in range(0, len(data), step):
            writer.write(data[i : i + step])
            await writer.drain()
            await asyncio.sleep(0)
        return not ends and fate >= 0.14  # 0.08-0.14: close without saying so

    outcomes: Counter[str] = Counter()
    server = RawServer(answer)
    try:
        async with server.url() as url:
            transport = KeepAliveTransport(32)
            route = _route(url, timeout_s=0.15)
            gate = asyncio.Semaphore(32)

            async def one(i: int) -> None:
                async with gate:
                    try:
                        got = await transport.post(route, b"%d" % i)
                    except (TimeoutError, ConnectionError, HttpProtocolError) as exc:
                        outcomes[type(exc).__name__] += 1
                        return
                    own = got.body.startswith(b'{"id": %d,' % i) and got.body.endswith(b'"}')
                    outcomes["ok" if own and got.status == 200 else "WRONG"] += 1

            await asyncio.gather(*(one(i) for i in range(300)))
            await transport.close()
    finally:
        loop.set_exception_handler(previous_handler)
    assert outcomes["WRONG"] == 0, outcomes
    assert outcomes["ok"] > 150 and outcomes["TimeoutError"] > 0, outcomes
    assert outcomes["ConnectionResetError"] > 0, outcomes
    assert not loop_errors, loop_errors


class _RecordingTransport(asyncio.Transport):
    """A transport that only remembers being aborted (for _Connection alone)."""

    def __init__(self) -> None:
        super().__init__()
        self.aborted = False

    def write(self, data: bytes | bytearray | memoryview) -> None:
        pass

    def abort(self) -> None:
        self.aborted = True

    def is_closing(self) -> bool:
        return self.aborted


@pytest.mark.parametrize("answer_first", [True, False], ids=["answer-first", "deadline-first"])
async def test_keepalive_deadline_in_the_answers_loop_turn(answer_first: bool) -> None:
    from runner.transport.keepalive import _Connection

    conn, fake = _Connection(), _RecordingTransport()
    conn.connection_made(fake)
    waiter: asyncio.Future[HttpAnswer] = asyncio.get_running_loop().create_future()
    conn.send(b"POST / HTTP/1.1\r\n\r\n", waiter)
    events: list[Callable[[], None]] = [
        lambda: conn.data_received(_ok()),
        lambda: conn.time_out(0.05),
    ]
    for event in events if answer_first else events[::-1]:
        event()
    if answer_first:  # the answer stands and its sound connection is kept for reuse
        assert waiter.result().body == OK_BODY and not fake.aborted
    else:  # the deadline wins: no answer, and a connection that may still be answering goes
        assert isinstance(waiter.exception(), TimeoutError) and fake.aborted
