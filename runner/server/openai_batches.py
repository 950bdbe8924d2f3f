"""OpenAI's Batch API on the local server (timeline and errors: :mod:`runner.server.batch_jobs`).

- ``POST /v1/batches`` ``{"input_file_id", "endpoint": "/v1/chat/completions",
  "completion_window": "24h", "metadata"?}`` -> the batch object, ``status: "validating"``.
- ``GET /v1/batches/{batch_id}``, ``GET /v1/batches`` (``limit``, ``after``; newest first),
  ``POST /v1/batches/{batch_id}/cancel``.
- The batch object: ``{"id", "object": "batch", "endpoint", "errors", "input_file_id",
  "completion_window", "status", "output_file_id", "error_file_id", "created_at",
  "in_progress_at", "expires_at", "finalizing_at", "completed_at", "failed_at",
  "expired_at", "cancelling_at", "cancelled_at", "request_counts": {"total", "completed",
  "failed"}, "metadata", "model", "usage"}``; ``status`` one of ``validating``, ``failed``,
  ``in_progress``, ``finalizing``, ``completed``, ``expired``, ``cancelling``,
  ``cancelled``.
- Validation of the input file (when ``validating`` ends): each line a JSON object with a
  unique ``custom_id`` (a string), ``method: "POST"``, ``url`` equal to the batch's
  ``endpoint`` and an object ``body``; one model for the whole file; at most
  ``BatchSpec.openai_max_requests`` (50,000) lines. Otherwise the batch is ``failed`` with
  ``errors.data`` = ``[{"code", "message", "param", "line"}]``. With
  ``BatchSpec.openai_enqueued_tokens`` set, a valid file whose input tokens, with those of
  the model's batches still queued or running at its validation, pass that limit fails as a
  whole: ``token_limit_exceeded``, ``line`` null (the organisation's enqueued-token limit).
- Output and error files (``GET /v1/files/{id}/content``), made when the batch ends: JSONL
  lines ``{"id", "custom_id", "response": {"status_code", "request_id", "body"}, "error":
  null}`` (200 answers in the output file, other statuses in the error file) and, for
  items an expired or cancelled batch did not run, ``{"id", "custom_id", "response": null,
  "error": {"code": "batch_expired" | "batch_cancelled", "message"}}`` in the error file.
  Lines come in processing order, not the input's. ``BatchSpec.results_faults`` applies to
  the first downloads of these files (:func:`runner.server.files.send_results`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import orjson
from aiohttp import web

from runner.server.batch_jobs import BatchContext, BatchJob, Item, Outcome, Phase
from runner.server.files import BATCH_OUTPUT, FileStore, no_such_file
from runner.server.models import approx_tokens
from runner.server.protocol import BadRequest
from runner.server.route_support import (
    OPENAI,
    ServerState,
    bad_request_response,
    create_fault_response,
    json_response,
    parse_json_object,
    reset_after_create,
)

ROUTE_BATCHES = "/v1/batches"
ROUTE_BATCH = "/v1/batches/{batch_id}"
ROUTE_BATCH_CANCEL = "/v1/batches/{batch_id}/cancel"
SUPPORTED_ENDPOINTS = ("/v1/chat/completions",)
# What the real API batches; the local server refuses all but chat completions, saying so.
OPENAI_ENDPOINTS = (
    "/v1/responses",
    "/v1/chat/completions",
    "/v1/embeddings",
    "/v1/completions",
    "/v1/moderations",
)
COMPLETION_WINDOWS = ("24h",)
MAX_REPORTED_ERRORS = 100
PAGE_DEFAULT = 20
PAGE_MAX = 100
_EXPIRED = "This request could not be executed before the completion window expired."
_CANCELLED = "This request was not executed because the batch was cancelled."


@dataclass
class OpenAIBatch:
    job: BatchJob
    input_file_id: str
    endpoint: str
    completion_window: str
    metadata: dict[str, Any] | None
    raw: bytes
    validated: bool = False
    errors: list[dict[str, Any]] = field(default_factory=list)
    model: str | None = None
    tokens: int = 0  # input tokens of its requests, once validated
    files_written: bool = False
    output_file_id: str | None = None
    error_file_id: str | None = None


def validate_lines(
    raw: bytes, endpoint: str, max_requests: int
) -> tuple[list[Item], list[dict[str, Any]], str | None]:
    """The items of a batch input file, the validation errors (empty when it is valid) and
    the model its requests name."""
    items: list[Item] = []
    errors: list[dict[str, Any]] = []
    seen: set[str] = set()
    model: str | None = None

    def fail(line: int, code: str, message: str, param: str | None = None) -> None:
        errors.append({"code": code, "message": message, "param": param, "line": line})

    for number, line in enumerate(raw.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            obj = orjson.loads(line)
        except orjson.JSONDecodeError:
            fail(number, "invalid_json_line", "This line is not parseable as valid JSON.")
            continue
        if not isinstance(obj, dict):
            fail(number, "invalid_json_line", "This line is not a JSON object.")
            continue
        custom_id = obj.get("custom_id")
        if not isinstance(custom_id, str) or not custom_id:
            fail(number, "missing_required_parameter", "Missing 'custom_id'.", "custom_id")
            continue
        if custom_id in seen:
            fail(
                number,
                "duplicate_custom_id",
                "The custom_id for this request is a duplicate of another request. The "
                "custom_id parameter must be unique for each request in a batch.",
                "custom_id",
            )
            continue
        seen.add(custom_id)
        if obj.get("method") != "POST":
            fail(number, "invalid_method", "The method must be 'POST'.", "method")
            continue
        if obj.get("url") != endpoint:
            fail(
                number,
                "mismatched_url",
                f"The url {obj.get('url')!r} does not match the batch's endpoint {endpoint!r}.",
                "url",
            )
            continue
        body = obj.get("body")
        if not isinstance(body, dict):
            fail(number, "invalid_body", "'body' must be a JSON object.", "body")
            continue
        line_model = body.get("model")
        if isinstance(line_model, str):
            if model is None:
                model = line_model
            elif line_model != model:
                fail(
                    number,
                    "mismatched_model",
                    f"The model {line_model!r} differs from the batch's model {model!r}; a "
                    "batch input file can name one model only.",
                    "body.model",
                )
                continue
        items.append(Item(custom_id, body))
    if not items and not errors:
        errors.append(
            {
                "code": "empty_file",
                "message": "The input file has no requests.",
                "param": None,
                "line": None,
            }
        )
    if len(items) > max_requests:
        errors.append(
            {
                "code": "too_many_requests",
                "message": f"The input file has {len(items)} requests; a batch takes at most "
                f"{max_requests}.",
                "param": None,
                "line": None,
            }
        )
    return items, errors[:MAX_REPORTED_ERRORS], model


def input_tokens(items: list[Item]) -> int:
    """The input tokens of a batch's requests, as the simulated models count them."""
    total = 0
    for item in items:
        for message in item.body.get("messages") or []:
            content = message.get("content") if isinstance(message, dict) else None
            if isinstance(content, str):
                total += approx_tokens(content)
    return total


class OpenAIBatchRoutes:
    """The handlers of the Batch API."""

    def __init__(self, state: ServerState, context: BatchContext, files: FileStore) -> None:
        self.state = state
        self.context = context
        self.files = files
        self.batches: dict[str, OpenAIBatch] = {}

    def register(self, app: web.Application) -> None:
        app.router.add_post(ROUTE_BATCHES, self.create)
        app.router.add_get(ROUTE_BATCHES, self.list)
        app.router.add_get(ROUTE_BATCH, self.retrieve)
        app.router.add_post(ROUTE_BATCH_CANCEL, self.cancel)

    async def create(self, request: web.Request) -> web.Response:
        try:
            body = parse_json_object(await request.read())
            fault = self.context.create_fault(self.state.config.batches)
            refused = create_fault_response(self.state, request, fault, OPENAI)
            if refused is not None:
                return refused
            batch = self._new_batch(body)
        except BadRequest as exc:
            return bad_request_response(self.state, request, exc, OPENAI)
        self.batches[batch.job.batch_id] = batch
        # Answered as a look at the batch (validated and answered as far as is due): with no
        # validating or processing time, it would otherwise show an end that wrote no files.
        await self._refresh(batch)
        if fault is not None:  # reset: created, the answer lost
            return reset_after_create(request)
        return json_response(self.state, request, self._render(batch))

    def _new_batch(self, body: dict[str, Any]) -> OpenAIBatch:
        file_id = body.get("input_file_id")
        if not isinstance(file_id, str):
            raise BadRequest("Missing required parameter: 'input_file_id'.", param="input_file_id")
        endpoint = body.get("endpoint")
        if endpoint not in OPENAI_ENDPOINTS:
            raise BadRequest(
                f"Invalid value: {endpoint!r}. Supported values are: "
                f"{', '.join(repr(e) for e in OPENAI_ENDPOINTS)}.",
                param="endpoint",
                code="invalid_value",
            )
        if endpoint not in SUPPORTED_ENDPOINTS:
            raise BadRequest(
                f"the local server batches {', '.join(SUPPORTED_ENDPOINTS)} only, not {endpoint}",
                param="endpoint",
                code="invalid_value",
            )
        window = body.get("completion_window")
        if window not in COMPLETION_WINDOWS:
            raise BadRequest(
                f"Invalid value: {window!r}. Supported values are: '24h'.",
                param="completion_window",
                code="invalid_value",
            )
        metadata = body.get("metadata")
        if metadata is not None and not isinstance(metadata, dict):
            raise BadRequest("Invalid type for 'metadata': expected an object.", param="metadata")
        stored = self.files.get(file_id)
        if stored is None:
            raise no_such_file(file_id)
        if stored.purpose != "batch":
            raise BadRequest(
                f"The file {file_id} has purpose {stored.purpose!r}; a batch's input file must "
                "have purpose 'batch'.",
                param="input_file_id",
            )
        config = self.state.config
        serial = self.context.next_batch()
        job = BatchJob(
            batch_id=f"batch_{self.context.token}{serial:08d}",
            serial=serial,
            proto=OPENAI,
            spec=config.batches,
            clock=config.clock,
            created=config.clock(),
            created_wall=config.wall_clock(),
            validating_s=config.batches.validating_s,
            finalizing_s=config.batches.finalizing_s,
        )
        return OpenAIBatch(job, file_id, str(endpoint), str(window), metadata, stored.data)

    def _validate(self, batch: OpenAIBatch) -> None:
        """Validate a batch whose validating time is over (once), earlier batches first:
        the enqueued-token limit counts those still queued or running at its validation."""
        job = batch.job
        if batch.validated or job.clock() < job.start or job.cancel_at is not None:
            return
        items, errors, model = validate_lines(
            batch.raw, batch.endpoint, job.spec.openai_max_requests
        )
        batch.validated, batch.model = True, model
        limit = job.spec.openai_enqueued_tokens
        if not errors and limit is not None:
            tokens = input_tokens(items)
            queued = 0
            for other in self.batches.values():
                if other is batch:
                    break  # the ones created before it
                self._validate(other)
                if (
                    other.validated
                    and other.model == model
                    and not other.job.phase(job.start).ended
                ):
                    queued += other.tokens
            if queued + tokens > limit:
                errors = [_token_limit_error(model, limit)]
            batch.tokens = tokens
        if errors:
            batch.errors, job.failed = errors, True
        else:
            job.load(items)

    async def _refresh(self, batch: OpenAIBatch) -> None:
        """Validate, answer what is due, and write the files of a batch that has ended."""
        job = batch.job
        self._validate(batch)
        for model, completed in await job.catch_up(
            self.context.models, self.context.next_answer, loaded=self.state.config.loaded_model
        ):
            self.state.stats.record_batch_item(model, completed=completed)
        ended = job.ended_at()
        if ended is not None and not batch.files_written and not job.failed:
            self._write_files(batch, job.wall(ended))
            batch.files_written = True

    def _write_files(self, batch: OpenAIBatch, when: float) -> None:
        job = batch.job
        output: list[bytes] = []
        errors: list[bytes] = []
        for index, item, outcome in job.results():
            line_id = f"batch_req_{job.batch_id[6:]}{index:08d}"
            if outcome is Outcome.ANSWERED:
                answer = item.answer
                assert answer is not None
                line = {
                    "id": line_id,
                    "custom_id": item.custom_id,
                    "response": {
                        "status_code": answer.status,
                        "request_id": f"req_{line_id[10:]}",
                        "body": orjson.Fragment(answer.body),
                    },
                    "error": None,
                }
                (output if answer.ok else errors).append(orjson.dumps(line))
            else:
                code, message = (
                    ("batch_expired", _EXPIRED)
                    if outcome is Outcome.EXPIRED
                    else ("batch_cancelled", _CANCELLED)
                )
                line = {
                    "id": line_id,
                    "custom_id": item.custom_id,
                    "response": None,
                    "error": {"code": code, "message": message},
                }
                errors.append(orjson.dumps(line))
        name = job.batch_id
        if output:
            data = b"\n".join(output) + b"\n"
            stored = self.files.add(f"{name}_output.jsonl", BATCH_OUTPUT, data, when)
            batch.output_file_id = stored.file_id
        if errors:
            data = b"\n".join(errors) + b"\n"
            stored = self.files.add(f"{name}_error.jsonl", BATCH_OUTPUT, data, when)
            batch.error_file_id = stored.file_id

    def _find(self, request: web.Request) -> OpenAIBatch:
        batch_id = request.match_info["batch_id"]
        batch = self.batches.get(batch_id)
        if batch is None:
            raise BadRequest(f"No such batch: {batch_id}", status=404, param="batch_id")
        return batch

    async def retrieve(self, request: web.Request) -> web.Response:
        try:
            batch = self._find(request)
        except BadRequest as exc:
            return bad_request_response(self.state, request, exc, OPENAI)
        await self._refresh(batch)
        return json_response(self.state, request, self._render(batch))

    async def list(self, request: web.Request) -> web.Response:
        try:
            limit = int(request.query.get("limit", PAGE_DEFAULT))
        except ValueError:
            limit = 0
        if not 1 <= limit <= PAGE_MAX:
            refusal = BadRequest(
                f"Invalid 'limit': expected an integer between 1 and {PAGE_MAX}.", param="limit"
            )
            return bad_request_response(self.state, request, refusal, OPENAI)
        ids = list(reversed(self.batches))  # newest first
        after = request.query.get("after")
        if after is not None:
            ids = ids[ids.index(after) + 1 :] if after in ids else []
        page = ids[:limit]
        data = []
        for batch_id in page:
            batch = self.batches[batch_id]
            await self._refresh(batch)
            data.append(self._render(batch))
        listing = {
            "object": "list",
            "data": data,
            "first_id": page[0] if page else None,
            "last_id": page[-1] if page else None,
            "has_more": len(ids) > limit,
        }
        return json_response(self.state, request, listing)

    async def cancel(self, request: web.Request) -> web.Response:
        try:
            batch = self._find(request)
        except BadRequest as exc:
            return bad_request_response(self.state, request, exc, OPENAI)
        await self._refresh(batch)
        job = batch.job
        if not job.can_cancel():
            status = job.phase(job.clock()).value
            refusal = BadRequest(f"Cannot cancel a batch with status '{status}'.")
            return bad_request_response(self.state, request, refusal, OPENAI)
        job.cancel()
        return json_response(self.state, request, self._render(batch))

    def _render(self, batch: OpenAIBatch) -> dict[str, Any]:
        job = batch.job
        now = job.clock()
        phase = job.phase(now)
        end = job.ending()
        ended = job.ended_at()

        def at(t: float | None) -> int | None:
            return None if t is None else int(job.wall(t))

        started = (
            not job.failed
            and now >= job.start
            and (job.cancel_at is None or job.cancel_at >= job.start)
        )
        counts = job.counts()
        in_tokens, out_tokens, reasoning = job.usage()
        return {
            "id": job.batch_id,
            "object": "batch",
            "endpoint": batch.endpoint,
            "errors": {"object": "list", "data": batch.errors} if batch.errors else None,
            "input_file_id": batch.input_file_id,
            "completion_window": batch.completion_window,
            "status": phase.value,
            "output_file_id": batch.output_file_id,
            "error_file_id": batch.error_file_id,
            "created_at": at(job.created),
            "in_progress_at": at(job.start) if started else None,
            "expires_at": at(job.expires),
            "finalizing_at": at(end.stop)
            if end.kind is Phase.COMPLETED and not job.failed and now >= end.stop
            else None,
            "completed_at": at(ended) if phase is Phase.COMPLETED else None,
            "failed_at": at(ended) if phase is Phase.FAILED else None,
            "expired_at": at(ended) if phase is Phase.EXPIRED else None,
            "cancelling_at": at(job.cancel_at),
            "cancelled_at": at(ended) if phase is Phase.CANCELLED else None,
            "request_counts": {
                "total": counts.total,
                "completed": counts.succeeded,
                "failed": counts.errored + counts.cancelled + counts.expired,
            },
            "metadata": batch.metadata,
            "model": batch.model,
            "usage": {
                "input_tokens": in_tokens,
                "input_tokens_details": {"cached_tokens": 0},
                "output_tokens": out_tokens,
                "output_tokens_details": {"reasoning_tokens": reasoning},
                "total_tokens": in_tokens + out_tokens,
            },
        }


def _token_limit_error(model: str | None, limit: int) -> dict[str, Any]:
    """OpenAI's error for a batch past the organisation's enqueued-token limit: no line is
    at fault, and the same file passes once earlier batches have ended."""
    return {
        "code": "token_limit_exceeded",
        "message": f"Enqueued token limit reached for {model} in organization org-local. "
        f"Limit: {limit:,} enqueued tokens. Please try submitting fewer tokens, or try again "
        "once some of your in-progress batches have completed.",
        "param": None,
        "line": None,
    }
