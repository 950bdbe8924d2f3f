"""Anthropic's Message Batches on the local server (timeline: :mod:`runner.server.batch_jobs`).

- ``POST /v1/messages/batches`` ``{"requests": [{"custom_id", "params": {<a Messages
  request>}}]}``: at most ``BatchSpec.anthropic_max_requests`` (100,000) requests and
  ``anthropic_max_bytes`` (256 MB; 413 ``request_too_large`` above); each ``custom_id`` 1-64
  characters of ``[a-zA-Z0-9_-]``, unique in the batch. These are checked at once (400);
  each request's ``params`` are checked when it is processed, as ``POST /v1/messages`` checks
  them, and an invalid one is an ``errored`` result.
- ``GET /v1/messages/batches/{batch_id}``, ``GET /v1/messages/batches`` (``limit``,
  ``after_id``, ``before_id``; newest first), ``POST /v1/messages/batches/{batch_id}/cancel``,
  ``DELETE /v1/messages/batches/{batch_id}`` (an ended batch only).
- The batch object: ``{"id", "type": "message_batch", "processing_status": "in_progress" |
  "canceling" | "ended", "request_counts": {"processing", "succeeded", "errored",
  "canceled", "expired"}, "ended_at", "created_at", "expires_at", "archived_at",
  "cancel_initiated_at", "results_url"}`` (times RFC 3339; ``results_url`` once ended).
- ``GET /v1/messages/batches/{batch_id}/results`` (once ended): JSONL lines ``{"custom_id",
  "result": {"type": "succeeded", "message"} | {"type": "errored", "error": {"type":
  "error", "error": {"type", "message"}}} | {"type": "canceled"} | {"type": "expired"}}``, in
  processing order, not the input's; ``BatchSpec.results_faults`` applies to the first of
  these downloads (:func:`runner.server.files.send_results`).
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

import orjson
from aiohttp import web

from runner.server.batch_jobs import BatchContext, BatchJob, Item, Outcome, Phase
from runner.server.files import send_results
from runner.server.listings import anthropic_page
from runner.server.protocol import BadRequest
from runner.server.route_support import (
    ANTHROPIC,
    ServerState,
    bad_request_response,
    create_fault_response,
    json_response,
    parse_json_object,
    read_capped,
    reset_after_create,
    slow_upload,
)

ROUTE_MESSAGE_BATCHES = "/v1/messages/batches"
ROUTE_MESSAGE_BATCH = "/v1/messages/batches/{batch_id}"
ROUTE_MESSAGE_BATCH_CANCEL = "/v1/messages/batches/{batch_id}/cancel"
ROUTE_MESSAGE_BATCH_RESULTS = "/v1/messages/batches/{batch_id}/results"
CUSTOM_ID = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
_RESULT_TYPES = {Outcome.CANCELLED: "canceled", Outcome.EXPIRED: "expired"}


def rfc3339(unix: float) -> str:
    """A Unix time as Anthropic writes times: ``2026-11-30T10:20:00.123456Z``."""
    return datetime.fromtimestamp(unix, tz=UTC).isoformat().replace("+00:00", "Z")


def read_requests(body: dict[str, Any], max_requests: int) -> list[Item]:
    """The items of a create request, or the BadRequest the real API gives."""
    requests = body.get("requests")
    if not isinstance(requests, list):
        raise BadRequest(
            "requests: Field required"
            if requests is None
            else "requests: Input should be a valid list"
        )
    if not requests:
        raise BadRequest("requests: List should have at least 1 item after validation, not 0")
    if len(requests) > max_requests:
        raise BadRequest(
            f"requests: List should have at most {max_requests} items after validation, not "
            f"{len(requests)}"
        )
    items: list[Item] = []
    seen: set[str] = set()
    for i, entry in enumerate(requests):
        if not isinstance(entry, dict):
            raise BadRequest(f"requests.{i}: Input should be a valid dictionary or object")
        custom_id = entry.get("custom_id")
        if not isinstance(custom_id, str):
            raise BadRequest(f"requests.{i}.custom_id: Field required")
        if not CUSTOM_ID.match(custom_id):
            raise BadRequest(
                f"requests.{i}.custom_id: String should match pattern '^[a-zA-Z0-9_-]{{1,64}}$'"
            )
        if custom_id in seen:
            raise BadRequest(
                f"requests.{i}.custom_id: duplicate custom_id {custom_id!r}; each request in a "
                "batch needs a unique custom_id"
            )
        seen.add(custom_id)
        params = entry.get("params")
        if not isinstance(params, dict):
            raise BadRequest(f"requests.{i}.params: Input should be a valid dictionary or object")
        items.append(Item(custom_id, params))
    return items


class AnthropicBatchRoutes:
    """The handlers of Message Batches."""

    def __init__(self, state: ServerState, context: BatchContext) -> None:
        self.state = state
        self.context = context
        self.batches: dict[str, BatchJob] = {}

    def register(self, app: web.Application) -> None:
        app.router.add_post(ROUTE_MESSAGE_BATCHES, self.create)
        app.router.add_get(ROUTE_MESSAGE_BATCHES, self.list)
        app.router.add_get(ROUTE_MESSAGE_BATCH, self.retrieve)
        app.router.add_delete(ROUTE_MESSAGE_BATCH, self.delete)
        app.router.add_post(ROUTE_MESSAGE_BATCH_CANCEL, self.cancel)
        app.router.add_get(ROUTE_MESSAGE_BATCH_RESULTS, self.results)

    async def create(self, request: web.Request) -> web.Response:
        config = self.state.config
        spec = config.batches
        try:
            raw = await read_capped(request, spec.anthropic_max_bytes, "The request")
            items = read_requests(parse_json_object(raw), spec.anthropic_max_requests)
        except BadRequest as exc:
            return bad_request_response(self.state, request, exc, ANTHROPIC)
        await slow_upload(self.state)
        fault = self.context.create_fault(spec)
        refused = create_fault_response(self.state, request, fault, ANTHROPIC)
        if refused is not None:
            return refused
        serial = self.context.next_batch()
        job = BatchJob(
            batch_id=f"msgbatch_{self.context.token}{serial:08d}",
            serial=serial,
            proto=ANTHROPIC,
            spec=spec,
            clock=config.clock,
            created=config.clock(),
            created_wall=config.wall_clock(),
            validating_s=0.0,
            finalizing_s=0.0,
        )
        job.load(items)
        self.batches[job.batch_id] = job
        # Answered as a look at the batch: with no processing time its items are due at once,
        # and unanswered they would count as expired in a batch already "ended".
        await self._refresh(job)
        if fault is not None:  # reset: created, the answer lost
            return reset_after_create(request)
        return json_response(self.state, request, self._render(job, request))

    def _find(self, request: web.Request) -> BatchJob:
        batch_id = request.match_info["batch_id"]
        job = self.batches.get(batch_id)
        if job is None:
            raise BadRequest(f"No message batch with id {batch_id!r}", status=404)
        return job

    async def _refresh(self, job: BatchJob) -> None:
        for model, completed in await job.catch_up(
            self.context.models, self.context.next_answer, loaded=self.state.config.loaded_model
        ):
            self.state.stats.record_batch_item(model, completed=completed)

    async def _current(self, request: web.Request) -> BatchJob:
        """The batch the request names, caught up to now (``BadRequest`` 404 if unknown)."""
        job = self._find(request)
        await self._refresh(job)
        return job

    async def retrieve(self, request: web.Request) -> web.Response:
        try:
            job = await self._current(request)
        except BadRequest as exc:
            return bad_request_response(self.state, request, exc, ANTHROPIC)
        return json_response(self.state, request, self._render(job, request))

    async def list(self, request: web.Request) -> web.Response:
        ids = list(reversed(self.batches))  # newest first
        try:
            page = anthropic_page(ids, dict(request.query))
        except BadRequest as exc:
            return bad_request_response(self.state, request, exc, ANTHROPIC)
        data = []
        for batch_id in page.pop("page"):
            job = self.batches[batch_id]
            await self._refresh(job)
            data.append(self._render(job, request))
        return json_response(self.state, request, {"data": data, **page})

    async def cancel(self, request: web.Request) -> web.Response:
        try:
            job = await self._current(request)
            if job.can_cancel():
                job.cancel()
            elif job.cancel_at is None:
                raise BadRequest(f"Batch {job.batch_id} has already ended and cannot be canceled.")
        except BadRequest as exc:
            return bad_request_response(self.state, request, exc, ANTHROPIC)
        return json_response(self.state, request, self._render(job, request))

    async def delete(self, request: web.Request) -> web.Response:
        try:
            job = await self._current(request)
            if job.ended_at() is None:
                raise BadRequest(
                    f"Batch {job.batch_id} is still processing; cancel it and wait for it to "
                    "end before deleting it."
                )
        except BadRequest as exc:
            return bad_request_response(self.state, request, exc, ANTHROPIC)
        del self.batches[job.batch_id]
        return json_response(
            self.state, request, {"id": job.batch_id, "type": "message_batch_deleted"}
        )

    async def results(self, request: web.Request) -> web.StreamResponse:
        try:
            job = await self._current(request)
            if job.ended_at() is None:
                raise BadRequest(
                    f"Batch {job.batch_id} has not ended; its results are available once its "
                    "processing_status is 'ended'."
                )
        except BadRequest as exc:
            return bad_request_response(self.state, request, exc, ANTHROPIC)
        lines = []
        for _, item, outcome in job.results():
            result: dict[str, Any]
            if outcome is Outcome.ANSWERED:
                answer = item.answer
                assert answer is not None
                body = orjson.Fragment(answer.body)
                result = (
                    {"type": "succeeded", "message": body}
                    if answer.ok
                    else {"type": "errored", "error": body}
                )
            else:
                result = {"type": _RESULT_TYPES[outcome]}
            lines.append(orjson.dumps({"custom_id": item.custom_id, "result": result}))
        jsonl = b"\n".join(lines) + b"\n"
        fault = self.context.results.next(self.state.config.batches.results_faults)
        return await send_results(
            self.state, request, ROUTE_MESSAGE_BATCH_RESULTS, jsonl, "application/x-jsonl", fault
        )

    def _render(self, job: BatchJob, request: web.Request) -> dict[str, Any]:
        phase = job.phase(job.clock())
        ended = job.ended_at()
        counts = job.counts()
        status = (
            "ended"
            if ended is not None
            else "canceling"
            if phase is Phase.CANCELLING
            else "in_progress"
        )
        # Absolute, on the server's own origin, or (results_origin) the one a provider
        # behind a gateway names.
        origin = job.spec.results_origin or str(request.url.origin())
        results_url = (
            f"{origin}{ROUTE_MESSAGE_BATCH_RESULTS.format(batch_id=job.batch_id)}"
            if ended is not None
            else None
        )
        return {
            "id": job.batch_id,
            "type": "message_batch",
            "processing_status": status,
            # As the Message Batches reference has it: every request counts as processing
            # until the whole batch has ended, then moves to its outcome at once.
            "request_counts": {
                "processing": counts.processing if ended is not None else counts.total,
                "succeeded": counts.succeeded if ended is not None else 0,
                "errored": counts.errored if ended is not None else 0,
                "canceled": counts.cancelled if ended is not None else 0,
                "expired": counts.expired if ended is not None else 0,
            },
            "ended_at": None if ended is None else rfc3339(job.wall(ended)),
            "created_at": rfc3339(job.wall(job.created)),
            "expires_at": rfc3339(job.wall(job.expires)),
            "archived_at": None,
            "cancel_initiated_at": None
            if job.cancel_at is None
            else rfc3339(job.wall(job.cancel_at)),
            "results_url": results_url,
        }
