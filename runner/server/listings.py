"""Model listings and token counting on the local server, in each protocol's own shape.

- ``GET /v1/models``: OpenAI ``{"object": "list", "data": [{"id", "object": "model",
  "created", "owned_by"}]}``; Anthropic ``{"data": [{"type": "model", "id",
  "display_name", "created_at", "lifecycle"}], "has_more", "first_id", "last_id"}`` with
  ``limit`` / ``after_id`` / ``before_id`` paging. Which shape a client gets is decided by
  its headers (:func:`runner.server.route_support.speaks_anthropic`).
- ``GET /v1/models/{model_id}``: one entry of that list, for any model string the server
  serves (options included: ``shortcut:p=0.3``); 404 for a name no model answers, 400 for
  bad options.
- ``POST /v1/messages/count_tokens``: ``{"input_tokens": N}``, counted as the simulated
  models count a Messages request's input (system prompt included), after the same
  validation as ``POST /v1/messages`` (less ``max_tokens``, which it does not take).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from aiohttp import web

from runner.server.anthropic_codec import parse_anthropic_messages
from runner.server.models import UnknownModel, approx_tokens, known_models, resolve_model
from runner.server.protocol import BadRequest, text_of
from runner.server.route_support import (
    ANTHROPIC,
    ServerState,
    bad_request_response,
    error_response,
    json_response,
    parse_json_object,
    speaks_anthropic,
)
from runner.server.validation import check_anthropic, check_anthropic_model

ROUTE_MODELS = "/v1/models"
ROUTE_MODEL = "/v1/models/{model_id}"
ROUTE_COUNT_TOKENS = "/v1/messages/count_tokens"
# The models' "created" time: fixed, so listings are stable (the simulated models do not age).
MODELS_CREATED = 1_767_225_600  # 2026-01-01T00:00:00Z
OWNER = "cotaudit"
ANTHROPIC_PAGE_DEFAULT = 20
ANTHROPIC_PAGE_MAX = 1000


def openai_model(model_id: str) -> dict[str, Any]:
    return {"id": model_id, "object": "model", "created": MODELS_CREATED, "owned_by": OWNER}


def anthropic_model(model_id: str) -> dict[str, Any]:
    created = datetime.fromtimestamp(MODELS_CREATED, tz=UTC).isoformat().replace("+00:00", "Z")
    return {
        "type": "model",
        "id": model_id,
        "display_name": f"{model_id} (cotaudit local server)",
        "created_at": created,
        "lifecycle": "active",
    }


def anthropic_page(ids: list[str], query: dict[str, str]) -> dict[str, Any]:
    """One page of an Anthropic listing: ``limit`` items after ``after_id`` or before
    ``before_id`` (ids in listing order). Raises BadRequest for a bad ``limit``."""
    raw = query.get("limit", str(ANTHROPIC_PAGE_DEFAULT))
    try:
        limit = int(raw)
    except ValueError:
        raise BadRequest(f"limit: Input should be a valid integer, got {raw!r}") from None
    if not 1 <= limit <= ANTHROPIC_PAGE_MAX:
        raise BadRequest(f"limit: Input should be between 1 and {ANTHROPIC_PAGE_MAX}")
    after, before = query.get("after_id"), query.get("before_id")
    if after is not None and before is not None:
        raise BadRequest("after_id and before_id cannot both be set")
    if after is not None:
        start = ids.index(after) + 1 if after in ids else len(ids)
        page = ids[start : start + limit]
        has_more = start + limit < len(ids)
    elif before is not None:
        end = ids.index(before) if before in ids else 0
        page = ids[max(0, end - limit) : end]
        has_more = end - limit > 0
    else:
        page = ids[:limit]
        has_more = limit < len(ids)
    return {
        "has_more": has_more,
        "first_id": page[0] if page else None,
        "last_id": page[-1] if page else None,
        "page": page,
    }


class ListingRoutes:
    """The handlers of the model listings and of token counting."""

    def __init__(self, state: ServerState) -> None:
        self.state = state

    def register(self, app: web.Application) -> None:
        app.router.add_get(ROUTE_MODELS, self.list_models)
        app.router.add_get(ROUTE_MODEL, self.get_model)
        app.router.add_post(ROUTE_COUNT_TOKENS, self.count_tokens)

    async def list_models(self, request: web.Request) -> web.Response:
        loaded = self.state.config.loaded_model
        names = [loaded] if loaded is not None else known_models()
        if not speaks_anthropic(request):
            data = [openai_model(name) for name in names]
            return json_response(self.state, request, {"object": "list", "data": data})
        try:
            page = anthropic_page(names, dict(request.query))
        except BadRequest as exc:
            return bad_request_response(self.state, request, exc)
        ids = page.pop("page")
        return json_response(
            self.state, request, {"data": [anthropic_model(i) for i in ids], **page}
        )

    async def get_model(self, request: web.Request) -> web.Response:
        model_id = request.match_info["model_id"]
        try:
            model = resolve_model(model_id)
        except UnknownModel:
            model = None  # the providers' 404 below: a listing does not explain itself
        except ValueError as exc:
            return error_response(
                self.state, request, 400, f"bad model options in {model_id!r}: {exc}", param="model"
            )
        if model is None:
            anthropic = speaks_anthropic(request)
            message = (
                f"model: {model_id}"
                if anthropic
                else f"The model '{model_id}' does not exist or you do not have access to it."
            )
            return error_response(self.state, request, 404, message, code="model_not_found")
        entry = anthropic_model(model_id) if speaks_anthropic(request) else openai_model(model_id)
        return json_response(self.state, request, entry, model=model_id)

    async def count_tokens(self, request: web.Request) -> web.Response:
        try:
            body = parse_json_object(await request.read())
            model_id = check_anthropic_model(body)
            messages = parse_anthropic_messages(body.get("messages"))
            check_anthropic(body)
            system = body.get("system")
            system_text = "" if system is None else text_of(system, "system")
        except BadRequest as exc:
            return bad_request_response(self.state, request, exc, ANTHROPIC)
        try:
            model = resolve_model(model_id)
        except UnknownModel:
            model = None
        except ValueError as exc:
            return error_response(
                self.state, request, 400, f"bad model options in {model_id!r}: {exc}"
            )
        if model is None:
            return error_response(self.state, request, 404, f"model: {model_id}")
        texts = [m["content"] for m in messages] + ([system_text] if system is not None else [])
        count = sum(approx_tokens(text) for text in texts)
        return json_response(self.state, request, {"input_tokens": count}, model=model_id)
