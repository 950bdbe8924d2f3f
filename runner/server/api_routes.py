"""The local server's routes beyond the two completion routes, and the checks before them.

:func:`register_api_routes` adds to an app, in one call from
:meth:`runner.server.app.LocalServer.build_app`:

- two middlewares, run before every handler: the API key (when ``require_api_key`` is set,
  a missing or wrong key is a 401 in the request's protocol's shape on every ``/v1`` route;
  ``/stats`` is the operator's and stays open on loopback), and, on the two completion
  routes, the protocols' request validation (:mod:`runner.server.validation`) answered with
  the providers' full error bodies (``param`` and ``code`` included);
- the model listings and ``count_tokens`` (:mod:`runner.server.listings`), the Files API
  (:mod:`runner.server.files`) and both batch APIs (:mod:`runner.server.openai_batches`,
  :mod:`runner.server.anthropic_batches`), which share one :class:`BatchContext`.
"""

from __future__ import annotations

import orjson
from aiohttp import web
from aiohttp.typedefs import Handler, Middleware

from runner.server.anthropic_batches import AnthropicBatchRoutes
from runner.server.anthropic_codec import ROUTE_ANTHROPIC
from runner.server.batch_jobs import BatchContext
from runner.server.files import FileRoutes, FileStore
from runner.server.listings import ListingRoutes
from runner.server.openai_batches import OpenAIBatchRoutes
from runner.server.openai_codec import ROUTE_OPENAI
from runner.server.protocol import NO_CODE, BadRequest
from runner.server.route_support import (
    ANTHROPIC,
    COMPLETION_MAX_BYTES,
    JSON_TYPE,
    OPENAI,
    ServerState,
    protocol_of,
    route_name,
    too_large,
)

_COMPLETION_ROUTES = {ROUTE_OPENAI: OPENAI, ROUTE_ANTHROPIC: ANTHROPIC}


def register_api_routes(app: web.Application, state: ServerState) -> None:
    """Add the middlewares and the listing, file and batch routes to ``app``."""
    app.middlewares.append(_api_key_check(state))
    app.middlewares.append(_request_validation(state))
    context = BatchContext()
    files = FileStore(context.token)
    ListingRoutes(state).register(app)
    FileRoutes(state, files).register(app)
    OpenAIBatchRoutes(state, context, files).register(app)
    AnthropicBatchRoutes(state, context).register(app)


def _unauthorized(state: ServerState, request: web.Request, sent: str | None) -> web.Response:
    proto = protocol_of(request)
    if proto is ANTHROPIC:
        message = "x-api-key header is required" if sent is None else "invalid x-api-key"
    elif sent is None:
        message = (
            "You didn't provide an API key. You need to provide your API key in an "
            "Authorization header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY)."
        )
    else:
        message = "Incorrect API key provided."  # never the key itself
    code = NO_CODE if sent is None else "invalid_api_key"
    state.stats.record(route_name(request), None, "401", None)
    return web.Response(
        status=401, body=proto.error_body(401, message, code=code), content_type=JSON_TYPE
    )


def _api_key_check(
    state: ServerState,
) -> Middleware:
    @web.middleware
    async def check(request: web.Request, handler: Handler) -> web.StreamResponse:
        key = state.config.require_api_key
        if key is None or not request.path.startswith("/v1/"):
            return await handler(request)
        sent = protocol_of(request).api_key(request)
        if sent != key:
            return _unauthorized(state, request, sent)
        return await handler(request)

    return check


def _request_validation(
    state: ServerState,
) -> Middleware:
    # The completion handler parses the body again: its own 400s (bad JSON) stay its own,
    # and this check only adds the full error body of a request the protocol refuses.
    @web.middleware
    async def validate(request: web.Request, handler: Handler) -> web.StreamResponse:
        proto = _COMPLETION_ROUTES.get(request.path)
        if proto is None or request.method != "POST":
            return await handler(request)
        try:
            try:
                body = orjson.loads(await request.read())
            except web.HTTPRequestEntityTooLarge:  # a long-context prompt past the limit
                raise too_large("The request", COMPLETION_MAX_BYTES) from None
            if isinstance(body, dict):
                proto.parse(body)
        except orjson.JSONDecodeError:
            pass
        except BadRequest as exc:
            state.stats.record(proto.route, None, str(exc.status), None)
            return web.Response(
                status=exc.status, body=proto.bad_request_body(exc), content_type=JSON_TYPE
            )
        return await handler(request)

    return validate
