"""OpenAI's Files API on the local server, as much as batches need.

- ``POST /v1/files``: multipart ``purpose=batch`` and ``file`` (a JSONL file of batch
  requests, at most ``BatchSpec.openai_max_bytes``: 200 MB); answers the file object
  ``{"id", "object": "file", "bytes", "created_at", "filename", "purpose", "status",
  "status_details", "expires_at"}``.
- ``GET /v1/files/{file_id}``: the file object; ``GET /v1/files/{file_id}/content``: its
  bytes (a batch's output and error files are made here too, purpose ``batch_output``);
  ``DELETE /v1/files/{file_id}``: ``{"id", "object": "file", "deleted": true}``.
  ``BatchSpec.results_faults`` applies to the first downloads of ``batch_output`` files
  (:func:`send_results`, which Anthropic's results route shares).

Files live in the server's memory for as long as it runs (docs/server.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from aiohttp import BodyPartReader, web

from runner.server.batch_jobs import FaultScript
from runner.server.faults import FaultKind, malformed_jsonl, send_truncated
from runner.server.protocol import BadRequest
from runner.server.route_support import (
    OPENAI,
    ServerState,
    bad_request_response,
    error_response,
    json_response,
    send_file_body,
    slow_upload,
    too_large,
)

ROUTE_FILES = "/v1/files"
ROUTE_FILE = "/v1/files/{file_id}"
ROUTE_FILE_CONTENT = "/v1/files/{file_id}/content"
UPLOAD_PURPOSES = ("batch",)
BATCH_OUTPUT = "batch_output"  # the purpose of a batch's output and error files


@dataclass(frozen=True, slots=True)
class StoredFile:
    file_id: str
    filename: str
    purpose: str
    data: bytes
    created_at: int

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.file_id,
            "object": "file",
            "bytes": len(self.data),
            "created_at": self.created_at,
            "filename": self.filename,
            "purpose": self.purpose,
            "status": "processed",
            "status_details": None,
            "expires_at": None,
        }


class FileStore:
    """The files of one server: uploads and batch output, by id."""

    def __init__(self, token: str) -> None:
        self._token = token
        self._serial = 0
        self._files: dict[str, StoredFile] = {}
        self.results = FaultScript()  # downloads of batch_output files

    def add(self, filename: str, purpose: str, data: bytes, created_at: float) -> StoredFile:
        self._serial += 1
        file_id = f"file-{self._token}{self._serial:08d}"
        stored = StoredFile(file_id, filename, purpose, data, int(created_at))
        self._files[file_id] = stored
        return stored

    def get(self, file_id: str) -> StoredFile | None:
        return self._files.get(file_id)

    def delete(self, file_id: str) -> bool:
        return self._files.pop(file_id, None) is not None


def no_such_file(file_id: str) -> BadRequest:
    return BadRequest(f"No such File object: {file_id}", status=404, param="id")


class FileRoutes:
    """The handlers of the Files API."""

    def __init__(self, state: ServerState, store: FileStore) -> None:
        self.state = state
        self.store = store

    def register(self, app: web.Application) -> None:
        app.router.add_post(ROUTE_FILES, self.upload)
        app.router.add_get(ROUTE_FILE, self.retrieve)
        app.router.add_delete(ROUTE_FILE, self.delete)
        app.router.add_get(ROUTE_FILE_CONTENT, self.content)

    async def upload(self, request: web.Request) -> web.Response:
        try:
            purpose, filename, data = await self._read_upload(request)
        except BadRequest as exc:
            return bad_request_response(self.state, request, exc, OPENAI)
        stored = self.store.add(filename, purpose, data, self.state.config.wall_clock())
        await slow_upload(self.state)
        return json_response(self.state, request, stored.to_json())

    async def _read_upload(self, request: web.Request) -> tuple[str, str, bytes]:
        if not request.content_type.startswith("multipart/"):
            raise BadRequest(
                "POST /v1/files takes a multipart/form-data body with 'purpose' and 'file'",
                param="file",
            )
        limit = self.state.config.batches.openai_max_bytes
        purpose: str | None = None
        filename: str | None = None
        data: bytes | None = None
        reader = await request.multipart()
        while (part := await reader.next()) is not None:
            if not isinstance(part, BodyPartReader):
                continue  # a nested multipart: not a form field
            if part.name == "purpose":
                purpose = await part.text()
            elif part.name == "file":
                filename = part.filename or "upload.jsonl"
                data = await _read_part(part, limit)
        if purpose is None:
            raise BadRequest("Missing required parameter: 'purpose'.", param="purpose")
        if purpose not in UPLOAD_PURPOSES:
            raise BadRequest(
                f"Invalid value for 'purpose': {purpose!r}; the local server stores batch input "
                "files only ('batch').",
                param="purpose",
                code="invalid_value",
            )
        if data is None or filename is None:
            raise BadRequest("Missing required parameter: 'file'.", param="file")
        return purpose, filename, data

    def _find(self, request: web.Request) -> StoredFile:
        file_id = request.match_info["file_id"]
        stored = self.store.get(file_id)
        if stored is None:
            raise no_such_file(file_id)
        return stored

    async def retrieve(self, request: web.Request) -> web.Response:
        try:
            stored = self._find(request)
        except BadRequest as exc:
            return bad_request_response(self.state, request, exc, OPENAI)
        return json_response(self.state, request, stored.to_json())

    async def delete(self, request: web.Request) -> web.Response:
        file_id = request.match_info["file_id"]
        if not self.store.delete(file_id):
            return bad_request_response(self.state, request, no_such_file(file_id), OPENAI)
        return json_response(
            self.state, request, {"id": file_id, "object": "file", "deleted": True}
        )

    async def content(self, request: web.Request) -> web.StreamResponse:
        try:
            stored = self._find(request)
        except BadRequest as exc:
            return error_response(self.state, request, exc.status, exc.message, param=exc.param)
        fault = None
        if stored.purpose == BATCH_OUTPUT:
            fault = self.store.results.next(self.state.config.batches.results_faults)
        return await send_results(
            self.state, request, ROUTE_FILE_CONTENT, stored.data, "application/octet-stream", fault
        )


async def send_results(
    state: ServerState,
    request: web.Request,
    route: str,
    body: bytes,
    content_type: str,
    fault: FaultKind | None,
) -> web.StreamResponse:
    """A batch's results file (OpenAI's output or error file, Anthropic's results), counted,
    with its ``BatchSpec.results_faults`` fault if any: ``malformed`` (a line in the middle
    not JSON) or ``truncated`` (half of it sent, then the connection closed)."""
    state.stats.record(route, None, "200", None if fault is None else fault.value)
    if fault is FaultKind.TRUNCATED:
        send_truncated(request, body, content_type)
        return web.Response()  # never sent: the transport is already closed
    if fault is FaultKind.MALFORMED:
        body = malformed_jsonl(body)
    return await send_file_body(state, request, body, content_type)


async def _read_part(part: BodyPartReader, limit: int) -> bytes:
    chunks = []
    size = 0
    while chunk := await part.read_chunk():
        size += len(chunk)
        if size > limit:
            raise too_large("The file", limit)
        chunks.append(chunk)
    return b"".join(chunks)
