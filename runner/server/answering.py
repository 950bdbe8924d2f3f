"""One request answered by a model, outside the online transport: what a batch item gets.

:func:`answer_request` takes the steps of the online route's model path
(``runner.server.app.LocalServer._complete``) in the same order and with the same errors:
the codec's ``parse`` (the protocol's validation), model resolution (400 for bad options,
404 for an unknown name), the model, stop sequences and ``max_tokens``
(:func:`~runner.server.protocol.apply_limits`) and the codec's ``render``. What the online
route adds around it (API key, server rate limit, injected faults, latency) belongs to the
HTTP request, not to a batch item. So a batch item's answer equals the online answer to the
same body, but for its ``id`` and ``created`` time.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from runner.server.models import Model, UnknownModel, UnknownPrompt, known_models, resolve_model
from runner.server.protocol import BadRequest, WireProtocol, apply_limits

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


def answer_request(proto: WireProtocol, body: Any, models: dict[str, Model], serial: int) -> Answer:
    """Answer ``body`` (a request of ``proto``) as the online route does; ``models`` caches
    resolved models by name, ``serial`` numbers the answer's id."""
    if not isinstance(body, dict):
        return _error(proto, 400, "the request body must be a JSON object", None)
    try:
        req = proto.parse(body)
    except BadRequest as exc:
        return Answer(exc.status, proto.bad_request_body(exc), None)
    name = req.model
    model = models.get(name)
    if model is None:
        try:
            model = resolve_model(name)
        except UnknownModel as exc:
            return _error(proto, 404, f"model {name!r} not found: {exc}", name)
        except ValueError as exc:
            return _error(proto, 400, f"bad model options in {name!r}: {exc}", name)
        if model is None:
            known = ", ".join(known_models())
            return _error(proto, 404, f"model {name!r} not found; known models: {known}", name)
        models[name] = model
    try:
        done = model.complete(req.messages, req.params)
    except UnknownPrompt as exc:
        message = f"model {name!r} has no recorded answer for this prompt: {exc}"
        return _error(proto, 404, message, name)
    except Exception as exc:
        _log.exception("model %r failed", name)  # a bug in a simulated model
        return _error(proto, 500, f"model {name!r} failed: {type(exc).__name__}: {exc}", name)
    done, stop_hit = apply_limits(done, req.params)
    return Answer(
        200,
        proto.render(serial, req, done, stop_hit),
        name,
        done.input_tokens,
        done.output_tokens,
        0 if done.reasoning is None else done.reasoning.tokens,
    )


def _error(proto: WireProtocol, status: int, message: str, model: str | None) -> Answer:
    return Answer(status, proto.error_body(status, message), model)
