"""OpenAI Batch and Anthropic Message Batches, as the runner uses them.

Wire formats: ``../shared/PROVIDERS.md``. Each API builds one line per request (its size
counts against the provider's limit), submits a batch, polls it, reads its results back as
:class:`ItemResult` by ``custom_id``, and finds a batch whose create call may have reached
the provider before a crash (:meth:`BatchApi.find_submitted`). Uploads and downloads of batch
files are timed as transfers (:func:`runner.providers.api_client.transfer_timeout`), not as
one completion. Results are read as a stream, one line at a time, and handed over as each
line comes (:meth:`BatchApi.stream_results`); a line that is not a result (not JSON, not an
object, fields of the wrong shape) is a ``MalformedResponse``, which the runner retries as a
damaged download.
"""

from __future__ import annotations

import dataclasses
from abc import ABC, abstractmethod
from collections.abc import AsyncGenerator, Callable
from contextlib import aclosing
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import aiohttp
import orjson

from cotaudit.constants import (
    ANTHROPIC_BATCH_MAX_BYTES,
    ANTHROPIC_BATCH_MAX_REQUESTS,
    OPENAI_BATCH_MAX_BYTES,
    OPENAI_BATCH_MAX_REQUESTS,
)
from cotaudit.errors import UsageError
from cotaudit.schema import JSONDict
from runner.batch.store import BatchState
from runner.providers.api_client import ApiClient
from runner.providers.base import (
    MalformedResponse,
    NotFound,
    Provider,
    ProviderError,
    ProviderResult,
    classify_status,
)

# Within the providers' limits with room for the envelope (Anthropic's JSON array, OpenAI's
# multipart framing).
BYTES_MARGIN = 0.98
FIND_LOOKBACK_S = 3600.0  # a batch created this long before our create call is not ours
# Anthropic's is matched by its creation time: a batch created this long before our create
# call began (a clock skew allowance) is not ours.
ANTHROPIC_FIND_SKEW_S = 300.0
LIST_PAGE = 100
OPENAI_ENDED = frozenset({"completed", "failed", "expired", "cancelled"})
# Statuses of a batch not yet ended that a cancel call cannot stop, and the provider refuses to
# cancel (a 400): being cancelled already (OpenAI's spelling and Anthropic's), or OpenAI's
# ``finalizing``, where every request has run and only the output files are being written.
UNCANCELLABLE = frozenset({"finalizing", "cancelling", "canceling", "cancelled"})
# Anthropic's error types as the HTTP statuses the online API gives them.
ANTHROPIC_ERROR_STATUS = {
    "invalid_request_error": 400,
    "authentication_error": 401,
    "billing_error": 402,  # permanent: resubmitting cannot pay
    "permission_error": 403,
    "not_found_error": 404,
    "request_too_large": 413,
    "rate_limit_error": 429,
    "api_error": 500,
    "timeout_error": 504,
    "overloaded_error": 529,
}


@dataclass(frozen=True, slots=True)
class Poll:
    """A batch as the provider last described it."""

    ended: bool
    status: str
    counts: JSONDict
    detail: JSONDict  # the whole batch object

    @property
    def cancellable(self) -> bool:
        """Whether a cancel call can still stop the batch (see :data:`UNCANCELLABLE`)."""
        return not self.ended and self.status not in UNCANCELLABLE

    @property
    def done(self) -> int:
        """Requests the provider has finished, as its counts say (OpenAI's ``completed`` and
        ``failed``; Anthropic's every count but ``processing``)."""
        return sum(int(v) for k, v in self.counts.items() if k not in ("total", "processing") and v)


@dataclass(frozen=True, slots=True)
class ItemResult:
    """One request's result: an answer, an error, or ``unrun`` ("expired" / "cancelled")."""

    custom_id: str
    result: ProviderResult | None = None
    error: ProviderError | None = None
    unrun: str | None = None
    size: int = 0  # bytes of its line in the results


class BatchApi(ABC):
    """One provider's batch API over an :class:`ApiClient`."""

    name: str
    max_requests: int
    max_bytes: int
    # Whether find_submitted's match proves a batch is the one looked for (OpenAI: its input
    # file). If not (Anthropic: size and time), the runner checks the found batch's results
    # against its custom ids before writing any of them.
    identifies_batches: bool = False

    def __init__(self, provider: Provider, client: ApiClient) -> None:
        self.provider = provider
        self.client = client

    @abstractmethod
    def line(self, custom_id: str, body: JSONDict) -> bytes:
        """One request as the batch carries it."""

    @abstractmethod
    async def submit(self, batch: BatchState, lines: list[bytes], on_upload: Any) -> str:
        """Create the batch; its provider id. ``on_upload(file_id)`` is called (OpenAI) once
        the input file is uploaded, before the batch is created."""

    @abstractmethod
    async def poll(self, remote_id: str) -> Poll: ...

    async def stream_results(
        self, poll: Poll, finished: set[str]
    ) -> AsyncGenerator[ItemResult, None]:
        """Every result the ended batch has (in any order), as its lines arrive: what the
        runner reads. A result file read to its end is added to ``finished``, and one
        already there is not read again (a download tried again after the next one was
        cut). Close it (``contextlib.aclosing``) if not read to the end. The APIs here
        override it; this default gives :meth:`results`' list (an API of small results,
        such as a test's, may define that one only)."""
        for item in await self.results(poll):
            yield item

    async def results(self, poll: Poll) -> list[ItemResult]:
        """Every result the ended batch has, at once: :meth:`stream_results` collected
        (held whole in memory: for small batches; the runner reads the stream)."""
        async with aclosing(self.stream_results(poll, set())) as items:
            return [item async for item in items]

    @abstractmethod
    async def find_submitted(self, batch: BatchState, claimed: set[str]) -> str | None:
        """The provider id of ``batch`` if its create call got through, else None; never one
        of ``claimed`` (other batches' ids) or of ``batch.rejected``."""

    async def cancel(self, remote_id: str) -> None:
        await self.client.call("POST", f"{self.batches_path}/{remote_id}/cancel")

    batches_path: str


def _parse_answer(provider: Provider, custom_id: str, status: int, body: Any) -> ItemResult:
    if status == 200:
        try:
            return ItemResult(custom_id, result=provider.parse_success(body))
        except (KeyError, IndexError, TypeError, ValueError, AttributeError) as exc:
            error: ProviderError = MalformedResponse(
                f"batch result lacks expected field ({type(exc).__name__}: {exc})", status=200
            )
            return ItemResult(custom_id, error=error)
    return ItemResult(custom_id, error=classify_status(status, orjson.dumps(body), {}))


async def _read_results(
    client: ApiClient, path: str, item: Callable[[dict[str, Any]], ItemResult]
) -> AsyncGenerator[ItemResult, None]:
    """The results of one file (or Anthropic's results), ``item`` reading each line."""
    number = 0
    stream = client.lines("GET", path, timeout=client.transfer_timeout())
    async with aclosing(stream) as lines:
        async for raw in lines:
            number += 1
            if raw:
                yield _result(raw, item, f"GET {path}", number)


def _result(
    raw: bytes, item: Callable[[dict[str, Any]], ItemResult], where: str, number: int
) -> ItemResult:
    """One line of results; ``MalformedResponse`` (retried: the file was damaged or cut on
    its way) for a line that is not one. An answer that is a result but not a completion
    (a body without its fields) is that item's error instead (:func:`_parse_answer`)."""
    try:
        line = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise MalformedResponse(
            f"{where}: line {number} of the results is not JSON ({exc}): the file was damaged "
            "or cut short on its way"
        ) from exc
    try:
        if not isinstance(line, dict):
            raise TypeError(f"a JSON {type(line).__name__}, not an object")
        if not isinstance(line.get("custom_id"), str):
            raise TypeError("no custom_id")
        return dataclasses.replace(item(line), size=len(raw))
    except (AttributeError, KeyError, TypeError, ValueError) as exc:
        raise MalformedResponse(
            f"{where}: line {number} of the results is not a batch result ({exc})"
        ) from exc


class OpenAIBatchApi(BatchApi):
    """``POST /files`` (purpose ``batch``), ``POST /batches``, poll, output and error files."""

    name = "openai"
    max_requests = OPENAI_BATCH_MAX_REQUESTS
    max_bytes = OPENAI_BATCH_MAX_BYTES
    batches_path = "/batches"
    endpoint_path = "/v1/chat/completions"
    identifies_batches = True

    def line(self, custom_id: str, body: JSONDict) -> bytes:
        return orjson.dumps(
            {"custom_id": custom_id, "method": "POST", "url": self.endpoint_path, "body": body}
        )

    async def submit(self, batch: BatchState, lines: list[bytes], on_upload: Any) -> str:
        # An input file uploaded before a crash is used again; one the provider no longer
        # has (deleted, or another server at the URL) is uploaded anew.
        if batch.input_file_id is not None:
            try:
                return await self._create(batch, batch.input_file_id)
            except NotFound:
                pass
        data = b"\n".join(lines) + b"\n"
        form = aiohttp.FormData()
        form.add_field("purpose", "batch")
        form.add_field(
            "file",
            data,
            filename=f"cotaudit-{batch.local_id}.jsonl",
            content_type="application/jsonl",
        )
        timeout = self.client.transfer_timeout(len(data))
        uploaded = await self.client.json("POST", "/files", form=form, timeout=timeout)
        file_id = str(uploaded["id"])
        on_upload(file_id)
        return await self._create(batch, file_id)

    async def _create(self, batch: BatchState, file_id: str) -> str:
        metadata = {"cotaudit_batch": batch.local_id}
        if batch.nonce is not None:
            metadata["cotaudit_nonce"] = batch.nonce
        created = await self.client.json(
            "POST",
            self.batches_path,
            json={
                "input_file_id": file_id,
                "endpoint": self.endpoint_path,
                "completion_window": "24h",
                "metadata": metadata,
            },
        )
        return str(created["id"])

    async def poll(self, remote_id: str) -> Poll:
        data = await self.client.json("GET", f"{self.batches_path}/{remote_id}")
        status = str(data.get("status"))
        return Poll(status in OPENAI_ENDED, status, dict(data.get("request_counts") or {}), data)

    async def stream_results(
        self, poll: Poll, finished: set[str]
    ) -> AsyncGenerator[ItemResult, None]:
        if poll.status == "failed":
            return  # nothing ran: the runner turns every item into an error
        for key in ("output_file_id", "error_file_id"):
            file_id = poll.detail.get(key)
            if not file_id or str(file_id) in finished:
                continue
            path = f"/files/{file_id}/content"
            async with aclosing(_read_results(self.client, path, self._item)) as items:
                async for item in items:
                    yield item
            finished.add(str(file_id))

    def _item(self, line: dict[str, Any]) -> ItemResult:
        custom_id = str(line["custom_id"])
        response = line.get("response")
        if response is None:
            error = line.get("error") or {}
            code = str(error.get("code") or "")
            if code in ("batch_expired", "batch_cancelled"):
                return ItemResult(custom_id, unrun=code.removeprefix("batch_"))
            return ItemResult(
                custom_id,
                error=classify_status(500, orjson.dumps({"error": error}), {}),
            )
        return _parse_answer(
            self.provider, custom_id, int(response.get("status_code") or 0), response.get("body")
        )

    def failure(self, poll: Poll) -> str:
        """What a ``failed`` batch's ``errors`` say, for its items' error records."""
        errors = _errors(poll)
        return "; ".join(f"{e.get('code')}: {e.get('message')}" for e in errors[:3]) or "failed"

    def failed_as_a_whole(self, poll: Poll) -> bool:
        """Whether a ``failed`` batch failed for none of its lines: no error names a line
        (``token_limit_exceeded``: the organisation's enqueued-token limit for the model, a
        queue that empties as earlier batches end), so the same file may pass later. An
        error naming a line is the file's own fault, which sending it again cannot mend."""
        return all(e.get("line") is None for e in _errors(poll))

    async def find_submitted(self, batch: BatchState, claimed: set[str]) -> str | None:
        # The input file is uploaded (and its id saved) before the create call, and is this
        # run's alone: a batch made from another file is not this one, whatever its metadata
        # says (every run's first batch is "<endpoint>-00001").
        if batch.input_file_id is None:
            return None  # the upload never answered, so no create call was made
        skip = claimed | set(batch.rejected)
        since = (batch.submitting_at or batch.queued_at) - FIND_LOOKBACK_S
        after: str | None = None
        while True:
            query = f"?limit={LIST_PAGE}" + (f"&after={after}" if after else "")
            page = await self.client.json("GET", self.batches_path + query)
            data = page.get("data") or []
            for entry in data:
                if entry["id"] in skip or entry.get("input_file_id") != batch.input_file_id:
                    continue
                meta = entry.get("metadata") or {}
                if meta.get("cotaudit_batch") != batch.local_id:
                    continue
                if batch.nonce is not None and meta.get("cotaudit_nonce") != batch.nonce:
                    continue
                return str(entry["id"])
            if not page.get("has_more") or not data:
                return None
            if float(data[-1].get("created_at") or 0) < since:
                return None  # newest first: older pages cannot hold it
            after = str(data[-1]["id"])


class AnthropicBatchApi(BatchApi):
    """``POST /messages/batches``, poll, stream ``results_url``."""

    name = "anthropic"
    max_requests = ANTHROPIC_BATCH_MAX_REQUESTS
    max_bytes = ANTHROPIC_BATCH_MAX_BYTES
    batches_path = "/messages/batches"

    def line(self, custom_id: str, body: JSONDict) -> bytes:
        return orjson.dumps({"custom_id": custom_id, "params": body})

    async def submit(self, batch: BatchState, lines: list[bytes], on_upload: Any) -> str:
        raw = b'{"requests":[' + b",".join(lines) + b"]}"  # up to 256 MB: a transfer
        timeout = self.client.transfer_timeout(len(raw))
        created = await self.client.json("POST", self.batches_path, raw_json=raw, timeout=timeout)
        return str(created["id"])

    async def poll(self, remote_id: str) -> Poll:
        data = await self.client.json("GET", f"{self.batches_path}/{remote_id}")
        status = str(data.get("processing_status"))
        return Poll(status == "ended", status, dict(data.get("request_counts") or {}), data)

    async def stream_results(
        self, poll: Poll, finished: set[str]
    ) -> AsyncGenerator[ItemResult, None]:
        # results_url names the provider's host; behind a gateway or proxy base URL (or a
        # base URL with an explicit default port) that is another host than the configured
        # one, which the key is never sent to: the relative route is the same resource.
        url = poll.detail.get("results_url")
        if not isinstance(url, str) or not url or not self.client.same_origin(url):
            url = f"{self.batches_path}/{poll.detail['id']}/results"
        if url in finished:
            return
        async with aclosing(_read_results(self.client, url, self._item)) as items:
            async for item in items:
                yield item
        finished.add(url)

    def _item(self, line: dict[str, Any]) -> ItemResult:
        custom_id = str(line["custom_id"])
        result = line.get("result") or {}
        kind = result.get("type")
        if kind == "succeeded":
            return _parse_answer(self.provider, custom_id, 200, result.get("message"))
        if kind in ("expired", "canceled"):
            return ItemResult(custom_id, unrun="cancelled" if kind == "canceled" else "expired")
        error = result.get("error") or {}
        nested = error.get("error")
        inner = nested if isinstance(nested, dict) else error
        status = ANTHROPIC_ERROR_STATUS.get(str(inner.get("type")), 500)
        return ItemResult(custom_id, error=classify_status(status, orjson.dumps(error), {}))

    async def find_submitted(self, batch: BatchState, claimed: set[str]) -> str | None:
        # Message Batches carry no metadata: a batch created after our create call began
        # (less a clock skew allowance), with as many requests, that no batch file claims.
        # That may be another run's batch of the same size: the runner takes it as unverified
        # and checks its results' custom ids (which carry this batch's nonce) before writing.
        skip = claimed | set(batch.rejected)
        since = (batch.submitting_at or batch.queued_at) - ANTHROPIC_FIND_SKEW_S
        found: list[str] = []
        after: str | None = None
        while True:
            query = f"?limit={LIST_PAGE}" + (f"&after_id={after}" if after else "")
            page = await self.client.json("GET", self.batches_path + query)
            data = page.get("data") or []
            for entry in data:
                created = _rfc3339(entry.get("created_at"))
                total = sum(int(v or 0) for v in (entry.get("request_counts") or {}).values())
                if (
                    created is not None
                    and created >= since
                    and total == len(batch.items)
                    and entry["id"] not in skip
                ):
                    found.append(str(entry["id"]))
            if not page.get("has_more") or not data:
                break
            # Listed newest first: past a page whose oldest batch is older than ``since``, no
            # page can hold it (an account of thousands of batches is not read through on
            # every resume).
            oldest = _rfc3339(data[-1].get("created_at"))
            if oldest is not None and oldest < since:
                break
            after = str(page.get("last_id") or data[-1]["id"])
        if len(found) > 1:
            raise UsageError(
                f"batch {batch.local_id} was being created when the run stopped, and "
                f"{len(found)} batches at the provider could be it ({', '.join(found)})",
                where=f"{batch.endpoint}: batches/{batch.local_id}.json",
                fix="Cancel the ones that are not this run's, or write the right id into "
                'the file as "remote_id" with "state": "submitted", then rerun.',
            )
        return found[0] if found else None


def _errors(poll: Poll) -> list[dict[str, Any]]:
    """The ``errors.data`` of an OpenAI batch (empty when it has none)."""
    errors = poll.detail.get("errors")
    data = errors.get("data") if isinstance(errors, dict) else None
    return [e for e in data if isinstance(e, dict)] if isinstance(data, list) else []


def _rfc3339(text: Any) -> float | None:
    if not isinstance(text, str):
        return None
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def batch_api(provider: Provider, client: ApiClient) -> BatchApi:
    """The batch API of ``provider``'s protocol."""
    if provider.kind == "anthropic":
        return AnthropicBatchApi(provider, client)
    return OpenAIBatchApi(provider, client)
