"""What the local server's non-completion routes share: the server state they read, which
protocol a request speaks, and JSON answers and errors counted in the server's stats."""

from __future__ import annotations

from typing import Any, Protocol

import orjson
from aiohttp import web

from runner.server.anthropic_codec import AnthropicCodec
from runner.server.faults import FaultKind, reset_connection
from runner.server.openai_codec import OpenAICodec
from runner.server.protocol import BadRequest, WireProtocol
from runner.server.settings import ServerConfig
from runner.server.stats import ServerStats

JSON_TYPE = "application/json"
OPENAI = OpenAICodec()
ANTHROPIC = AnthropicCodec()
_READ_CHUNK = 1 << 16


class ServerState(Protocol):
    """What routes read of the server: its config (swapped whole) and its counters."""

    @property
    def config(self) -> ServerConfig: ...

    @property
    def stats(self) -> ServerStats: ...


def speaks_anthropic(request: web.BaseRequest) -> bool:
    """Whether a client speaks Anthropic's protocol on a route both protocols share
    (``/v1/models``): it sends ``anthropic-version`` (every Anthropic SDK does), or an
    ``x-api-key`` without an ``Authorization`` header. Anything else is OpenAI's."""
    headers = request.headers
    if "anthropic-version" in headers:
        return True
    return "x-api-key" in headers and "Authorization" not in headers


def protocol_of(request: web.BaseRequest) -> WireProtocol:
    """The protocol whose shapes a request gets: Anthropic's under ``/v1/messages``,
    detected by headers on ``/v1/models`` (:func:`speaks_anthropic`), OpenAI's elsewhere."""
    path = request.path
    if path.startswith("/v1/messages"):
        return ANTHROPIC
    if path.startswith("/v1/models") and speaks_anthropic(request):
        return ANTHROPIC
    return OPENAI


def route_name(request: web.Request) -> str:
    """The route a request matched, as counted in stats (``/v1/batches/{batch_id}``)."""
    info = request.match_info.route.resource
    return info.canonical if info is not None else request.path


def json_response(
    state: ServerState, request: web.Request, payload: Any, *, model: str | None = None
) -> web.Response:
    """A 200 JSON answer, counted."""
    state.stats.record(route_name(request), model, "200", None)
    return web.Response(body=orjson.dumps(payload), content_type=JSON_TYPE)


def error_response(
    state: ServerState,
    request: web.Request,
    status: int,
    message: str,
    *,
    param: str | None = None,
    code: str | None = None,
    model: str | None = None,
    proto: WireProtocol | None = None,
) -> web.Response:
    """An error in the request's protocol's shape, counted."""
    proto = proto or protocol_of(request)
    state.stats.record(route_name(request), model, str(status), None)
    return web.Response(
        status=status,
        body=proto.error_body(status, message, param=param, code=code),
        content_type=JSON_TYPE,
    )


def bad_request_response(
    state: ServerState, request: web.Request, exc: BadRequest, proto: WireProtocol | None = None
) -> web.Response:
    return error_response(
        state, request, exc.status, exc.message, param=exc.param, code=exc.code, proto=proto
    )


# The largest completion request taken (Anthropic's Messages limit, 32 MB; the app's
# client_max_size): a long-context prompt passes as it would at a provider, instead of
# aiohttp's default 1 MiB; above it the answer is the protocol's JSON 413.
COMPLETION_MAX_BYTES = 32 * 2**20


async def read_capped(request: web.Request, limit: int, what: str) -> bytes:
    """The request body, refusing (413) one over ``limit`` bytes: the batch routes take
    bodies far above aiohttp's ``client_max_size``, up to the providers' own limits."""
    if request.content_length is not None and request.content_length > limit:
        raise too_large(what, limit)
    chunks: list[bytes] = []
    size = 0
    while True:
        chunk = await request.content.read(_READ_CHUNK)
        if not chunk:
            return b"".join(chunks)
        size += len(chunk)
        if size > limit:
            raise too_large(what, limit)
        chunks.append(chunk)


def too_large(what: str, limit: int) -> BadRequest:
    return BadRequest(
        f"{what} exceeds the maximum allowed number of bytes ({limit}).",
        status=413,
        code="request_too_large",
    )


TRANSFER_CHUNKS = 10  # pieces a slow download (BatchSpec.transfer_s) is sent in


async def send_file_body(
    state: ServerState, request: web.Request, body: bytes, content_type: str
) -> web.StreamResponse:
    """A batch file's bytes: at once, or with ``BatchSpec.transfer_s`` set, in chunks spread
    over that many seconds (a slow link: bytes keep coming, the whole takes long)."""
    seconds = state.config.batches.transfer_s
    if seconds <= 0:
        return web.Response(body=body, content_type=content_type)
    response = web.StreamResponse(headers={"Content-Type": content_type})
    response.content_length = len(body)
    await response.prepare(request)
    step = max(1, -(-len(body) // TRANSFER_CHUNKS))
    for start in range(0, len(body), step):
        await state.config.sleep(seconds / TRANSFER_CHUNKS)
        await response.write(body[start : start + step])
    await response.write_eof()
    return response


async def slow_upload(state: ServerState) -> None:
    """An upload's answer waits ``BatchSpec.transfer_s`` (the time a slow link takes)."""
    seconds = state.config.batches.transfer_s
    if seconds > 0:
        await state.config.sleep(seconds)


def create_fault_response(
    state: ServerState, request: web.Request, fault: FaultKind | None, proto: WireProtocol
) -> web.Response | None:
    """The answer to a create call that ``BatchSpec.create_faults`` fails with a status
    (nothing is created); None to create the batch (``reset`` is dealt with after)."""
    if fault is None or fault.status is None:
        return None
    return error_response(
        state, request, fault.status, f"injected fault: {fault.value}", proto=proto
    )


def reset_after_create(request: web.Request) -> web.Response:
    """``reset`` of ``create_faults``: the batch exists, its answer is lost."""
    reset_connection(request)
    return web.Response()  # never sent: the connection is gone


def parse_json_object(raw: bytes) -> dict[str, Any]:
    """A JSON object body, or a BadRequest saying what it is instead."""
    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise BadRequest(f"request body is not valid JSON: {exc}") from exc
    if not isinstance(body, dict):
        raise BadRequest("the request body must be a JSON object")
    return body
