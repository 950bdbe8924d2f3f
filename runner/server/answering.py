"""One request answered by a model, outside the online transport: what a batch item gets.

:func:`answer_request` takes the steps of the online route's model path
(``runner.server.app.LocalServer._complete``) in the same order and with the same errors:
the codec's ``parse`` (the protocol's validation), then :func:`model_completion`, which the
online route calls too (model resolution, 400 for bad options and 404 for an unknown name,
the loaded model of ``serve --model`` answering every name; the model; stop sequences and
``max_tokens``), and the codec's ``render``. What the online
route adds around it (API key, server rate limit, injected faults, latency) belongs to the
HTTP request, not to a batch item. So a batch item's answer equals the online answer to the
same body, but for its ``id`` and ``created`` time.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from runner.server.models import Completion, Model, ModelRefused, UnknownPrompt, model_for_request
from runner.server.protocol import BadRequest, ParsedRequest, WireProtocol, apply_limits

_log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Answer:
    """A model's answer (status 200, the protocol's body) or the error the route gives."""

    status: int
    body: bytes  # JSON: the protocol's answer or error body
    model: str | None  # the request's model, once the body named one
    input_tokens: int = 0
    output_tokens: int = 0  # reasoning included
    reasoning_tokens: int = 0

    @property
    def ok(self) -> bool:
        return self.status == 200


def answer_request(
    proto: WireProtocol,
    body: Any,
    models: dict[str, Model],
    serial: int,
    *,
    loaded: str | None = None,
) -> Answer:
    """Answer ``body`` (a request of ``proto``) as the online route does; ``models`` caches
    resolved models by name, ``serial`` numbers the answer's id, ``loaded``: the model the
    server answers every name with (``serve --model``), as online."""
    if not isinstance(body, dict):
        return _error(proto, 400, "the request body must be a JSON object", None)
    try:
        req = proto.parse(body)
    except BadRequest as exc:
        return Answer(exc.status, proto.bad_request_body(exc), None)
    try:
        done, stop_hit = model_completion(req, models, loaded=loaded)
    except ModelRefused as exc:
        return _error(proto, exc.status, exc.message, req.model)
    return Answer(
        200,
        proto.render(serial, req, done, stop_hit),
        req.model,
        done.input_tokens,
        done.output_tokens,
        0 if done.reasoning is None else done.reasoning.tokens,
    )


def model_completion(
    req: ParsedRequest, models: dict[str, Model], *, loaded: str | None
) -> tuple[Completion, str | None]:
    """The completion of a parsed request, cut at its stop sequences and ``max_tokens``
    (:func:`~runner.server.protocol.apply_limits`), and the stop sequence that cut it: the
    model path the online route and a batch item share. Raises ``ModelRefused``: an unknown
    model or bad options (:func:`~runner.server.models.model_for_request`), a prompt a
    replayed model has no answer for (404), a simulated model that failed (500, logged)."""
    name = req.model
    model = model_for_request(name, models, loaded=loaded)
    try:
        done = model.complete(req.messages, req.params)
    except UnknownPrompt as exc:
        raise ModelRefused(
            404, f"model {name!r} has no recorded answer for this prompt: {exc}"
        ) from None
    except Exception as exc:
        _log.exception("model %r failed", name)  # a bug in a simulated model
        raise ModelRefused(500, f"model {name!r} failed: {type(exc).__name__}: {exc}") from None
    return apply_limits(done, req.params)


def _error(proto: WireProtocol, status: int, message: str, model: str | None) -> Answer:
    return Answer(status, proto.error_body(status, message), model)
