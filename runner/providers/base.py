"""The provider interface, its result, the error tree and server retry hints.

One small class per wire protocol implements :meth:`Provider.build_request` and
:meth:`Provider.parse_success`; the shared :meth:`Provider.complete` sends one attempt and
turns every failure into exactly one of these errors (retrying is the engine's business)::

    ProviderError                  .status, .body_excerpt, .retry_after_s, .outcome
    +-- RetryableError
    |   +-- RateLimited            429
    |   +-- ServerError            5xx, 408, 409
    |   +-- Timeout                no complete answer within the per-attempt timeout
    |   +-- ConnectionReset        connection refused, reset or closed mid-answer
    |   +-- MalformedResponse      2xx whose body is not JSON or lacks the expected fields
    +-- PermanentError
        +-- BadRequest             400, 422 and other 4xx
        +-- AuthError              401, 403
        +-- NotFound               404 (unknown model or wrong base URL)
        +-- QuotaExhausted         429 whose body says the quota/credit is used up

Errors carry an excerpt of the response body but never request headers, so a key cannot
leak through an error message into a record. A failure without an answer says whether the
request may have reached the server (``maybe_sent``: a connection that could not be opened
never sent it; a reset or a timeout after sending may have been billed). Results and errors
alike carry the rate-limit budgets their answer reported (:mod:`runner.providers.rate_limits`).
"""

from __future__ import annotations

import dataclasses
import email.utils
import os
import time
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

import orjson

from cotaudit.constants import CONNECT_TIMEOUT_S
from cotaudit.errors import UsageError
from cotaudit.schema import JSONDict
from runner.config import EndpointConfig
from runner.providers.rate_limits import (
    Budget,
    dating_clock,
    finite_number,
    parse_duration_s,
    read_budgets,
    rfc3339_in_s,
)
from runner.redaction import redact, redact_bytes, register_key
from runner.request_spec import RequestSpec
from runner.transport import (
    AnswerTooLarge,
    HttpProtocolError,
    Route,
    Transport,
    answer_limit_bytes,
    maybe_sent,
)

BODY_EXCERPT_CHARS = 300  # characters of a failed response body kept in errors and records
# What Provider.parse_success raises for a 2xx body of another shape than a completion.
SHAPE_ERRORS = (KeyError, IndexError, TypeError, ValueError, AttributeError)


@dataclass(frozen=True, slots=True)
class ProviderResult:
    """A successful completion."""

    text: str  # the visible answer (an inline <think> block cut out, where it is read)
    finish_reason: str | None
    usage: JSONDict  # {"input_tokens": int, "output_tokens": int}
    budgets: Mapping[str, Budget] = field(default_factory=dict)  # from the answer's headers
    served_model: str | None = None  # the answer's ``model``: what the server says answered
    system_fingerprint: str | None = None
    reasoning: str | None = None  # a reasoning model's trace, where the server returned one
    reasoning_tokens: int | None = None  # the trace's tokens, where the server counted them
    # The server said the model reasoned but withheld (some of) the trace's text: Anthropic's
    # redacted_thinking or omitted thinking blocks, OpenAI's reasoning tokens without text.
    # Without it a hidden trace reads as a model that did not reason.
    reasoning_withheld: bool = False


class ProviderError(Exception):
    """A failed attempt. ``outcome`` is the short label kept in ``attempt_outcomes``."""

    retryable: ClassVar[bool] = False
    family: ClassVar[str] = "error"

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        body_excerpt: str = "",
        retry_after_s: float | None = None,
        maybe_sent: bool | None = None,
    ) -> None:
        # The one place every error is built: a key a server echoed never gets further.
        message, body_excerpt = redact(message), redact(body_excerpt)
        super().__init__(message)
        self.message = message
        self.status = status
        self.body_excerpt = body_excerpt
        self.retry_after_s = retry_after_s
        # None: the server answered; False: never sent; True: it may have reached the server.
        self.maybe_sent = maybe_sent
        self.budgets: Mapping[str, Budget] = {}  # from the answer's headers, if it had any

    @property
    def outcome(self) -> str:
        return str(self.status) if self.status is not None else self.family

    def to_record(self, attempts: int) -> JSONDict:
        """The structured ``error`` field of a response record."""
        record: JSONDict = {
            "type": type(self).__name__,
            "status": self.status,
            "message": self.message,
            "body": self.body_excerpt,
            "attempts": attempts,
        }
        if self.maybe_sent is not None:
            record["maybe_sent"] = self.maybe_sent
        return record


class RetryableError(ProviderError):
    retryable = True


class RateLimited(RetryableError):
    family = "429"


class ServerError(RetryableError):
    family = "5xx"


class Timeout(RetryableError):
    family = "timeout"


class ConnectionReset(RetryableError):
    family = "reset"


class MalformedResponse(RetryableError):
    family = "malformed"

    @property
    def outcome(self) -> str:
        return self.family  # the status (200) would hide what went wrong


class PermanentError(ProviderError):
    retryable = False


class BadRequest(PermanentError):
    family = "400"


class AuthError(PermanentError):
    family = "auth"


class NotFound(PermanentError):
    family = "404"


class QuotaExhausted(PermanentError):
    family = "quota"


class AnswerTooLong(PermanentError):
    """The answer's body passed the endpoint's limit (``runner.transport.answer_limit_bytes``):
    dropped unread, recorded as this error, never handed to the evaluator."""

    family = "too-large"


_QUOTA_MARKERS = ("insufficient_quota", "quota exceeded", "exceeded your current quota", "credit")
# OpenAI's 429 for a request larger than the whole per-minute budget ("Request too large for
# gpt-4o ... on tokens per min (TPM): Limit 30000, Requested 45000"): no wait makes it fit.
_TOO_LARGE_MARKERS = ("request too large",)


def classify_status(status: int, body: bytes, headers: Mapping[str, str]) -> ProviderError:
    """The error for a non-2xx answer (openai-python's order: 408/409/429/5xx retryable)."""
    body = redact_bytes(body)  # before the excerpt is cut: a key cut in two is still a key
    excerpt = body[:BODY_EXCERPT_CHARS].decode("utf-8", "replace")
    kind = error_kind(body)
    # The API's type and code too: the excerpt can end before them (OpenAI puts the message
    # first), and they are what names a quota apart from a rate limit.
    lowered = f"{excerpt} {kind}".lower()
    summary = error_summary(body)
    head = f"HTTP {status} ({kind})" if kind else f"HTTP {status}"
    msg = f"{head}: {summary}" if summary else head
    if status == 429:
        if any(m in lowered for m in _QUOTA_MARKERS):
            return QuotaExhausted(msg, status=status, body_excerpt=excerpt)
        if any(m in lowered for m in _TOO_LARGE_MARKERS):
            return BadRequest(msg, status=status, body_excerpt=excerpt)
        hint = retry_hint_s(headers)
        return RateLimited(msg, status=status, body_excerpt=excerpt, retry_after_s=hint)
    if status >= 500 or status in (408, 409):
        # The budgets' reset headers say when a rate limit refills, which has nothing to do
        # with a server error: only an explicit retry-after is a hint here, else the backoff.
        hint = explicit_retry_after_s(headers)
        return ServerError(msg, status=status, body_excerpt=excerpt, retry_after_s=hint)
    if status in (401, 403):
        return AuthError(msg, status=status, body_excerpt=excerpt)
    if status == 404:
        return NotFound(msg, status=status, body_excerpt=excerpt)
    return BadRequest(msg, status=status, body_excerpt=excerpt)


ERROR_SUMMARY_CHARS = 400  # characters of a server's error message kept in an error's message


ERROR_KIND_CHARS = 80  # characters of an API's error type and of its code kept in a message


def error_kind(body: bytes) -> str:
    """The API's name for a failed answer's error, for a message: the ``type`` and ``code``
    of its ``error`` object (OpenAI: ``invalid_request_error, code context_length_exceeded``;
    Anthropic: ``rate_limit_error``), or of the body itself where it has no such object (vLLM,
    Mistral); Google's ``status`` where there is no ``type``. "" when the body is no such
    JSON. A code that repeats the type is left out, and so is a numeric one: it is the HTTP
    status again (gateways' ``{"code": 429, ...}``)."""
    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError:
        return ""
    if not isinstance(data, dict):
        return ""
    inner = data.get("error")
    fields = inner if isinstance(inner, dict) else data
    kind, code = (_short(fields.get(name)) for name in ("type", "code"))
    if kind == "error":  # Anthropic's envelope ({"type": "error", ...}) names no error
        kind = ""
    kind = kind or _short(fields.get("status"))
    if code == kind:
        code = ""
    if kind and code:
        return f"{kind}, code {code}"
    return kind or (f"code {code}" if code else "")


def _short(value: Any) -> str:
    """A string field on one line, cut to ``ERROR_KIND_CHARS``; "" for anything else."""
    return " ".join(value.split())[:ERROR_KIND_CHARS] if isinstance(value, str) else ""


def error_summary(body: bytes) -> str:
    """What a failed answer says, for a message: the API's ``error.message`` (OpenAI,
    Anthropic) or ``message`` when the body is such JSON, else the body's start; whole
    sentences, cut (with an ellipsis) only past ``ERROR_SUMMARY_CHARS``."""
    text = ""
    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError:
        data = None
    if isinstance(data, dict):
        inner = data.get("error")
        found = inner.get("message") if isinstance(inner, dict) else data.get("message")
        if isinstance(found, str):
            text = found
    if not text:
        text = body[: ERROR_SUMMARY_CHARS * 4].decode("utf-8", "replace")
    text = " ".join(text.split())
    if len(text) > ERROR_SUMMARY_CHARS:
        cut = text[:ERROR_SUMMARY_CHARS].rsplit(" ", 1)[0]
        text = cut + " ..."
    return text


def explicit_retry_after_s(headers: Mapping[str, str], *, now: float | None = None) -> float | None:
    """The wait an answer asks for explicitly, in seconds, or None; never negative:
    ``retry-after-ms``, else ``retry-after`` as seconds or an HTTP date. A date is the
    server's clock's: it is dated against the answer's ``Date`` where this machine's clock is
    off that (:func:`~runner.providers.rate_limits.dating_clock`). ``now`` (UNIX seconds) is
    injectable for tests."""
    lower = {k.lower(): v for k, v in headers.items()}
    millis = finite_number(lower.get("retry-after-ms"))
    if millis is not None:
        return max(0.0, millis / 1000.0)
    value = lower.get("retry-after")
    if value is None:
        return None
    seconds = finite_number(value)
    if seconds is not None:
        return max(0.0, seconds)
    try:
        parsed = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if parsed.tzinfo is None:
        return None
    clock_now = dating_clock(lower, time.time() if now is None else now)
    return max(0.0, parsed.timestamp() - clock_now)


def retry_hint_s(headers: Mapping[str, str], *, now: float | None = None) -> float | None:
    """Seconds a 429 asks us to wait, or None (then the backoff decides); never negative.

    The explicit wait first (:func:`explicit_retry_after_s`). Else the budgets' reset headers
    (OpenAI ``x-ratelimit-reset-{requests,tokens}``, Anthropic ``anthropic-ratelimit-*-reset``
    in RFC 3339) of the budgets that can have refused the request: those whose ``remaining`` is
    0, or not given; the longest of them, since every one must refill. A budget with room
    left did not refuse it (a request larger than the tokens left is refused by a budget
    whose ``remaining`` is not 0, and its reset is when it is *full*, far later than the
    request needs): then there is no hint, and the backoff and the header pacing decide.
    Anthropic's resets are dated as :func:`~runner.providers.rate_limits.read_budgets` dates
    them (against ``Date`` where this machine's clock is off the server's): a clock minutes
    fast would otherwise read every reset as past, a hint of 0, and retry the 429 at once
    until the attempts run out. ``now`` (UNIX seconds) is injectable for tests.
    """
    explicit = explicit_retry_after_s(headers, now=now)
    if explicit is not None:
        return explicit
    lower = {k.lower(): v for k, v in headers.items()}
    clock_now = dating_clock(lower, time.time() if now is None else now)
    refusing: list[float] = []
    for name, raw in lower.items():
        if name.startswith("x-ratelimit-reset-"):
            seconds = parse_duration_s(raw)
            remaining = lower.get("x-ratelimit-remaining-" + name[len("x-ratelimit-reset-") :])
        elif name.startswith("anthropic-ratelimit-") and name.endswith("-reset"):
            seconds = rfc3339_in_s(raw, clock_now)
            remaining = lower.get(name[: -len("-reset")] + "-remaining")
        else:
            continue
        if seconds is not None and (remaining is None or remaining.strip() == "0"):
            refusing.append(max(0.0, seconds))
    return max(refusing) if refusing else None


def _header_safe_excerpt(body: bytes) -> str:
    return body[:BODY_EXCERPT_CHARS].decode("utf-8", "replace")


class Provider(ABC):
    """One wire protocol. Subclasses build the HTTP request and parse a 2xx body."""

    kind: ClassVar[str]

    def __init__(self, endpoint: EndpointConfig, *, base_url: str | None = None) -> None:
        url = base_url or endpoint.effective_base_url()
        if url is None:
            raise UsageError(
                "no base_url for this endpoint",
                where=f"endpoint {endpoint.name!r}",
                fix="Set base_url, or let the run start the embedded local server.",
            )
        self.endpoint = endpoint
        self.base_url = url.rstrip("/")
        # Read once: parse_success runs for every answer.
        self.reads_inline_think = endpoint.reads_inline_think
        headers = {"content-type": "application/json", **dict(endpoint.headers)}
        headers.update(read_header_values(endpoint))
        headers.update(self.auth_headers(read_api_key(endpoint)))
        self.url = self.base_url + self.path
        try:
            self.route = Route(
                self.url,
                headers,
                timeout_s=endpoint.timeout_s,
                connect_timeout_s=CONNECT_TIMEOUT_S,
                max_body_bytes=answer_limit_bytes(endpoint.max_tokens),
            )
        except (ValueError, UnicodeEncodeError) as exc:
            # Neither message can contain the key: Route names the header, not its value.
            raise UsageError(
                f"cannot send to this endpoint: {_key_free(exc)}",
                where=f"endpoint {endpoint.name!r}",
                fix="Check base_url and headers, and that the key variable "
                f"({endpoint.api_key_env or 'none'}) holds the key alone, with no line break.",
            ) from None

    path: ClassVar[str]

    @abstractmethod
    def auth_headers(self, api_key: str | None) -> dict[str, str]:
        """Headers carrying the key (kept only inside the provider object)."""

    @abstractmethod
    def build_body(self, spec: RequestSpec, max_tokens: int | None = None) -> JSONDict:
        """The JSON body of one request."""

    @abstractmethod
    def parse_success(self, data: Any) -> ProviderResult:
        """Parse a decoded 2xx body. A body of another shape raises ``KeyError``,
        ``IndexError``, ``TypeError``, ``ValueError`` or ``AttributeError`` (:data:`SHAPE_ERRORS`),
        never ``MalformedResponse``: each caller (:meth:`complete`, a batch's results) turns
        those into the ``MalformedResponse`` that carries what it knows of the answer."""

    def payload(self, spec: RequestSpec, max_tokens: int | None = None) -> bytes:
        """The request body of ``spec`` as sent: the JSON of :meth:`build_body`."""
        return orjson.dumps(self.build_body(spec, max_tokens))

    async def complete(
        self,
        spec: RequestSpec,
        transport: Transport,
        *,
        max_tokens: int | None = None,
        payload: bytes | None = None,
        timeout_s: float | None = None,
    ) -> ProviderResult:
        """Send one attempt of ``spec``; return the result or raise a ``ProviderError``.

        ``payload`` is :meth:`payload` made beforehand (the engine builds a batch of them at
        once); without it, the body is built here. ``timeout_s`` shortens this attempt's
        timeout (what the request's time budget has left)."""
        if payload is None:
            payload = self.payload(spec, max_tokens)
        try:
            if timeout_s is None:
                answer = await transport.post(self.route, payload)
            else:
                answer = await transport.post(self.route, payload, timeout_s=timeout_s)
        except TimeoutError as exc:
            raise Timeout(f"{exc or 'timed out'}", maybe_sent=maybe_sent(exc)) from exc
        except ConnectionError as exc:  # could not connect, or reset/closed mid-answer
            where = f"cannot connect to {self.base_url}" if not maybe_sent(exc) else "connection"
            raise ConnectionReset(
                f"{where}: {exc.strerror or exc}", maybe_sent=maybe_sent(exc)
            ) from exc
        except AnswerTooLarge as exc:
            raise AnswerTooLong(
                f"{exc}; max_tokens is {self.endpoint.max_tokens}", maybe_sent=True
            ) from exc
        except HttpProtocolError as exc:
            raise MalformedResponse(f"unreadable HTTP answer: {exc}", maybe_sent=True) from exc
        status, body = answer.status, answer.body
        budgets = read_budgets(answer.headers, now=time.time())
        if status >= 300:
            error = classify_status(status, body, answer.headers)
            error.budgets = budgets
            raise error
        try:
            data = orjson.loads(body)
        except orjson.JSONDecodeError as exc:
            raise _malformed("response body is not JSON", status, body, budgets) from exc
        try:
            result = self.parse_success(data)
        except SHAPE_ERRORS as exc:
            what = f"response lacks expected field ({type(exc).__name__}: {exc})"
            raise _malformed(what, status, body, budgets, data) from exc
        return dataclasses.replace(result, budgets=budgets) if budgets else result


def _malformed(
    what: str, status: int, body: bytes, budgets: Mapping[str, Budget], data: Any = None
) -> MalformedResponse:
    """A 2xx answer that is no completion, with its body's start and its headers' budgets
    (the server counted the request against them all the same). Some gateways (OpenRouter)
    answer an upstream failure with a 200 whose body is an ``error`` object: its message is
    what the user needs, where "lacks field 'choices'" says nothing."""
    if isinstance(data, dict) and data.get("error"):
        kind = error_kind(body)
        what = "the answer is an error, not a completion" + (f" ({kind})" if kind else "")
        what += f": {error_summary(body)}"
    error = MalformedResponse(what, status=status, body_excerpt=_header_safe_excerpt(body))
    error.budgets = budgets
    return error


def _key_free(exc: Exception) -> str:
    if isinstance(exc, UnicodeEncodeError):
        return "a header value has characters HTTP headers cannot carry (outside latin-1)"
    return str(exc)


def read_header_values(endpoint: EndpointConfig) -> dict[str, str]:
    """The ``headers_env`` headers with their values from the environment variables they
    name (UsageError when one is unset); each value is redacted as a key is."""
    values: dict[str, str] = {}
    for header, variable in endpoint.headers_env:
        value = os.environ.get(variable)
        register_key(value)  # a secret: whatever a server echoes of it is redacted
        if not value:
            raise UsageError(
                f"environment variable {variable} is not set",
                where=f"endpoint {endpoint.name!r}.headers_env.{header}",
                fix=f"Export {variable}=<the value of the {header} header> before running.",
            )
        values[header] = value
    return values


def read_api_key(endpoint: EndpointConfig) -> str | None:
    """The key from the environment variable the endpoint names (UsageError when unset)."""
    if endpoint.api_key_env is None:
        return None
    key = os.environ.get(endpoint.api_key_env)
    register_key(key)  # whatever a server echoes of it is redacted (runner.redaction)
    if not key:
        raise UsageError(
            f"environment variable {endpoint.api_key_env} is not set",
            where=f"endpoint {endpoint.name!r}.api_key_env",
            fix=f"Export {endpoint.api_key_env}=<your key> before running.",
        )
    return key
