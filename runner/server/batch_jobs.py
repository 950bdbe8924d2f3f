"""What both batch APIs share on the local server: a batch's timeline and its items' answers.

A batch is processed *lazily* against the server's injectable clock: nothing runs in the
background; whenever a client looks at a batch (get, list, results, output files), the
items whose time has come are answered then, in the batch's processing order, by the same
code path as the online routes (:func:`runner.server.answering.answer_request`). So tests
move a fake clock instead of sleeping, and a real client polling a real-clock server sees
a batch progress.

The timeline of a batch of ``n`` items created at ``t0`` (:class:`BatchSpec`, seconds):

- ``t0 .. t0 + validating_s``: validating (OpenAI's ``validating``; an Anthropic batch is
  ``in_progress`` from ``t0``, its ``validating_s`` is 0).
- item ``j`` of the processing order is answered at ``start + (j + 1) / n * (processing_s +
  n * item_s)``; the order is a seeded shuffle, so results come "in any order".
- after the last item: ``finalizing_s`` (OpenAI's ``finalizing``; 0 for Anthropic), then
  the batch has ended.
- ``t0 + expire_s``: a batch not done by then expires; items not answered are expired.
- cancel at ``tc`` (while validating or in progress): no item is answered after ``tc``; the
  batch is cancelling (Anthropic: canceling) for ``cancelling_s``, then ended; the items not
  answered are cancelled.

Per-item errors: a share ``error_rate`` of the items (a seeded draw per batch and
``custom_id``, so a resubmitted item draws again) gets a server error instead of an answer;
items whose body is invalid get the error the online route gives (400, 404, ...).

Batch-level faults: ``create_faults`` scripts the first create calls (either API): an HTTP
status answers that status and creates nothing; ``reset`` creates the batch and then resets
the connection (the answer is lost: the client cannot tell whether it got through).
``openai_enqueued_tokens`` is OpenAI's per-model enqueued-token limit: a batch whose input
tokens, with those of the model's batches still queued or running when it validates, pass it
fails as a whole (``token_limit_exceeded``, no line). ``results_origin`` makes Anthropic's
``results_url`` name another origin (a provider behind a gateway); ``transfer_s`` makes file
downloads and results take that long (sent in chunks) and uploads answered that much later
(a slow link). ``results_faults`` scripts the first downloads of results (Anthropic's results,
OpenAI's output and error files; counted apart for each API): ``malformed`` serves the whole
body with its middle line not JSON (a damaged file), ``truncated`` announces the whole body
and sends half of it (a cut transfer). ``output_bytes`` pads every answer's text to that many
bytes: results as long as a reasoning model's, to measure what reading them costs.

The times a batch shows on the wire (``created_at``, ``expires_at``, ...) are of
``ServerConfig.wall_clock`` at its creation, moved on by the server's clock since: a test
injects both to make an account's batches days old.

Batches live in the server's memory only: they survive as long as the server does, and a
restarted server knows none of them (ids carry a per-server token, so an old id is a 404,
never another batch).
"""

from __future__ import annotations

import asyncio
import dataclasses
import random
import secrets
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

import orjson

from cotaudit.constants import (
    ANTHROPIC_BATCH_MAX_BYTES,
    ANTHROPIC_BATCH_MAX_REQUESTS,
    BATCH_COMPLETION_WINDOW_S,
    OPENAI_BATCH_MAX_BYTES,
    OPENAI_BATCH_MAX_REQUESTS,
)
from runner.server.answering import Answer, answer_request
from runner.server.faults import FaultKind
from runner.server.models import Model
from runner.server.protocol import WireProtocol
from runner.server.reasoning.chance import unit

Clock = Callable[[], float]
# Items answered between two yields to the event loop, so a big batch does not stall the
# online routes while it catches up.
_ITEMS_PER_YIELD = 256
# What results_faults can do to a results body (the others are the online routes' faults).
RESULTS_FAULTS = (FaultKind.MALFORMED, FaultKind.TRUNCATED)
_PADDING = b"lorem ipsum dolor sit amet "


@dataclass(frozen=True)
class BatchSpec:
    """How the local server's batch APIs behave (``ServerConfig.batches``); seconds."""

    validating_s: float = 0.5
    processing_s: float = 2.0
    item_s: float = 0.0
    finalizing_s: float = 0.5
    cancelling_s: float = 0.5
    expire_s: float = BATCH_COMPLETION_WINDOW_S
    error_rate: float = 0.0  # share of items answered with a server error
    seed: int = 0
    openai_max_requests: int = OPENAI_BATCH_MAX_REQUESTS
    openai_max_bytes: int = OPENAI_BATCH_MAX_BYTES
    anthropic_max_requests: int = ANTHROPIC_BATCH_MAX_REQUESTS
    anthropic_max_bytes: int = ANTHROPIC_BATCH_MAX_BYTES
    # The faults of the first create calls, in order (None: created as usual).
    create_faults: tuple[FaultKind | None, ...] = ()
    openai_enqueued_tokens: int | None = None  # tokens per model; None: no limit
    results_origin: str | None = None  # e.g. "https://api.anthropic.com"; None: the server's
    transfer_s: float = 0.0  # seconds a file download takes, and an upload's answer waits
    # The faults of the first results downloads of each API, in order (None: served whole).
    results_faults: tuple[FaultKind | None, ...] = ()
    output_bytes: int = 0  # bytes every answer's text is padded to; 0: as the model wrote it

    def __post_init__(self) -> None:
        for name in (
            "validating_s",
            "processing_s",
            "item_s",
            "finalizing_s",
            "cancelling_s",
            "expire_s",
            "transfer_s",
        ):
            if not getattr(self, name) >= 0:  # nan too
                raise ValueError(f"BatchSpec.{name} must be >= 0, got {getattr(self, name)!r}")
        if not 0.0 <= self.error_rate <= 1.0:
            raise ValueError(f"BatchSpec.error_rate must be in [0, 1], got {self.error_rate!r}")
        for fault in self.create_faults:
            if fault is not None and fault is not FaultKind.RESET and fault.status is None:
                raise ValueError(
                    f"BatchSpec.create_faults takes HTTP statuses and 'reset', not {fault.value!r}"
                )
        for fault in self.results_faults:
            if fault is not None and fault not in RESULTS_FAULTS:
                raise ValueError(
                    "BatchSpec.results_faults takes 'malformed' and 'truncated', not "
                    f"{fault.value!r}"
                )
        if self.output_bytes < 0:
            raise ValueError(f"BatchSpec.output_bytes must be >= 0, got {self.output_bytes!r}")
        if self.openai_enqueued_tokens is not None and self.openai_enqueued_tokens < 1:
            raise ValueError(
                "BatchSpec.openai_enqueued_tokens must be >= 1 (or None for no limit), got "
                f"{self.openai_enqueued_tokens!r}"
            )


class Phase(Enum):
    """Where a batch is on its timeline (each API names these its own way)."""

    VALIDATING = "validating"
    FAILED = "failed"  # OpenAI: the input file did not validate
    IN_PROGRESS = "in_progress"
    FINALIZING = "finalizing"
    COMPLETED = "completed"
    EXPIRED = "expired"
    CANCELLING = "cancelling"
    CANCELLED = "cancelled"

    @property
    def ended(self) -> bool:
        return self in (Phase.FAILED, Phase.COMPLETED, Phase.EXPIRED, Phase.CANCELLED)


class Outcome(Enum):
    """What became of an item once its batch ended."""

    ANSWERED = "answered"  # see its Answer: 200 or an error status
    EXPIRED = "expired"
    CANCELLED = "cancelled"


@dataclass
class Item:
    custom_id: str
    body: Any  # the request body (a Messages request's params, a chat completion's body)
    answer: Answer | None = None


class FaultScript:
    """The faults of the first calls of one kind, in order (``BatchSpec.create_faults``,
    ``results_faults``); None once the script is spent."""

    def __init__(self) -> None:
        self._calls = 0

    def next(self, script: tuple[FaultKind | None, ...]) -> FaultKind | None:
        index = self._calls
        self._calls += 1
        return script[index] if index < len(script) else None


def new_token() -> str:
    """A per-server random token for ids, so a restarted server never reuses one."""
    return secrets.token_hex(4)


class BatchContext:
    """What the batches of one server share: the id token, serial numbers and the models
    they resolved (by name, as the online route caches them)."""

    def __init__(self) -> None:
        self.token = new_token()
        self.models: dict[str, Model] = {}
        self._batches = 0
        self._answers = 0
        self._creates = FaultScript()
        # Anthropic's results downloads (OpenAI's files count theirs: runner.server.files).
        self.results = FaultScript()

    def create_fault(self, spec: BatchSpec) -> FaultKind | None:
        """The fault of the next create call (``BatchSpec.create_faults``), None for none."""
        return self._creates.next(spec.create_faults)

    def next_batch(self) -> int:
        self._batches += 1
        return self._batches

    def next_answer(self) -> int:
        self._answers += 1
        return self._answers


@dataclass(frozen=True, slots=True)
class Ending:
    """How a batch ends, as things stand: ``kind`` (COMPLETED, EXPIRED or CANCELLED), when
    answering stops (``stop``) and when the batch has ended (``ended``)."""

    kind: Phase
    stop: float
    ended: float


@dataclass
class BatchJob:
    """One batch of either API: its items, its timeline and what it has answered so far.

    Times are of the server's clock (``ServerConfig.clock``, kept from the batch's creation);
    :meth:`wall` turns one into a Unix time for the wire. ``validating_s`` and
    ``finalizing_s`` are the API's (0 for Anthropic, which has neither phase).
    """

    batch_id: str
    serial: int
    proto: WireProtocol
    spec: BatchSpec
    clock: Clock
    created: float
    created_wall: float
    validating_s: float
    finalizing_s: float
    items: list[Item] = field(default_factory=list)
    order: list[int] = field(default_factory=list)
    answered: int = 0  # items of ``order`` answered so far
    cancel_at: float | None = None
    failed: bool = False  # OpenAI: the input did not validate
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)

    def load(self, items: list[Item]) -> None:
        """Set the items (at creation, or once an OpenAI input file has validated)."""
        self.items = items
        self.order = list(range(len(items)))
        random.Random(f"{self.spec.seed}/{self.serial}").shuffle(self.order)

    # The timeline ------------------------------------------------------------------------

    @property
    def start(self) -> float:
        return self.created + self.validating_s

    @property
    def expires(self) -> float:
        return self.created + self.spec.expire_s

    def due(self, j: int) -> float:
        """When item ``j`` of the processing order is answered."""
        n = len(self.items)
        total = self.spec.processing_s + n * self.spec.item_s
        return self.start + (j + 1) / n * total

    @property
    def last_due(self) -> float:
        return self.due(len(self.items) - 1) if self.items else self.start

    def ending(self) -> Ending:
        if self.cancel_at is not None and self.cancel_at < min(self.last_due, self.expires):
            return Ending(Phase.CANCELLED, self.cancel_at, self.cancel_at + self.spec.cancelling_s)
        if self.last_due <= self.expires:
            return Ending(Phase.COMPLETED, self.last_due, self.last_due + self.finalizing_s)
        return Ending(Phase.EXPIRED, self.expires, self.expires)

    def phase(self, now: float) -> Phase:
        """Where the batch is at ``now``."""
        if self.failed:
            return Phase.VALIDATING if now < self.start else Phase.FAILED
        end = self.ending()
        over = now >= end.ended and not self._behind(end)
        if end.kind is Phase.CANCELLED and now >= end.stop:
            return Phase.CANCELLED if over else Phase.CANCELLING
        if now < self.start:
            return Phase.VALIDATING
        if over:
            return end.kind
        return Phase.FINALIZING if now >= end.stop else Phase.IN_PROGRESS

    def ended_at(self) -> float | None:
        """When the batch ended; None while it has not."""
        if self.failed:
            return self.start if self.clock() >= self.start else None
        end = self.ending()
        return end.ended if self.clock() >= end.ended and not self._behind(end) else None

    def _behind(self, end: Ending) -> bool:
        """Whether items due before answering stops are not answered yet: a catch-up took
        long enough on a real clock for the batch's end to pass meanwhile. Until the next
        one, the batch has not ended (else they would be written as expired)."""
        return self.answered < len(self.order) and self.due(self.answered) <= end.stop

    def wall(self, t: float) -> float:
        """A time of the server's clock as a Unix time."""
        return self.created_wall + (t - self.created)

    def can_cancel(self) -> bool:
        return self.phase(self.clock()) in (Phase.VALIDATING, Phase.IN_PROGRESS)

    def cancel(self) -> None:
        """Stop answering now; the batch ends ``cancelling_s`` later."""
        self.cancel_at = self.clock()

    # Answering ---------------------------------------------------------------------------

    async def catch_up(
        self, models: dict[str, Model], serials: Callable[[], int], *, loaded: str | None
    ) -> list[tuple[str | None, bool]]:
        """Answer the items whose time has come; returns (model, completed) per item
        answered now, for the server's counters. ``loaded``: the model that answers every
        name (``serve --model``), as online."""
        async with self.lock:
            limit = min(self.clock(), self.ending().stop)
            done: list[tuple[str | None, bool]] = []
            while self.answered < len(self.order) and self.due(self.answered) <= limit:
                item = self.items[self.order[self.answered]]
                item.answer = self._answer(item, models, serials(), loaded)
                done.append((item.answer.model, item.answer.ok))
                self.answered += 1
                if len(done) % _ITEMS_PER_YIELD == 0:
                    await asyncio.sleep(0)
            return done

    def _answer(
        self, item: Item, models: dict[str, Model], serial: int, loaded: str | None
    ) -> Answer:
        if unit(self.spec.seed, "batch-error", self.serial, item.custom_id) < self.spec.error_rate:
            message = "The server had an error while processing this request (injected)."
            model = item.body.get("model") if isinstance(item.body, dict) else None
            return Answer(500, self.proto.error_body(500, message), model)
        answer = answer_request(self.proto, item.body, models, serial, loaded=loaded)
        if self.spec.output_bytes and answer.ok:
            return dataclasses.replace(answer, body=padded(answer.body, self.spec.output_bytes))
        return answer

    def outcome(self, item: Item) -> Outcome | None:
        """What became of ``item``: None while it may still be answered."""
        if item.answer is not None:
            return Outcome.ANSWERED
        if self.ended_at() is None:
            return None
        return Outcome.CANCELLED if self.ending().kind is Phase.CANCELLED else Outcome.EXPIRED

    def results(self) -> list[tuple[int, Item, Outcome]]:
        """The items with an outcome and their index in the input, in processing order (so
        not in the input's order)."""
        out = []
        for index in self.order:
            item = self.items[index]
            outcome = self.outcome(item)
            if outcome is not None:
                out.append((index, item, outcome))
        return out

    def counts(self) -> Counts:
        """How many items are where, as things stand."""
        counts = Counts(total=len(self.items))
        for item in self.items:
            outcome = self.outcome(item)
            if outcome is Outcome.ANSWERED:
                assert item.answer is not None
                if item.answer.ok:
                    counts.succeeded += 1
                else:
                    counts.errored += 1
            elif outcome is Outcome.CANCELLED:
                counts.cancelled += 1
            elif outcome is Outcome.EXPIRED:
                counts.expired += 1
        return counts

    def usage(self) -> tuple[int, int, int]:
        """(input, output, reasoning) tokens of the items answered."""
        answers = [item.answer for item in self.items if item.answer is not None and item.answer.ok]
        return (
            sum(a.input_tokens for a in answers),
            sum(a.output_tokens for a in answers),
            sum(a.reasoning_tokens for a in answers),
        )


def padded(body: bytes, size: int) -> bytes:
    """An answer body (either protocol's) with its text padded to ``size`` bytes
    (``BatchSpec.output_bytes``); its token counts are left as the model gave them."""
    data = orjson.loads(body)
    if "choices" in data:  # OpenAI: the message's content
        holder, key = data["choices"][0]["message"], "content"
    else:  # Anthropic: the last text block
        texts = [b for b in data.get("content") or [] if b.get("type") == "text"]
        if not texts:
            return body
        holder, key = texts[-1], "text"
    text = str(holder.get(key) or "").encode()
    missing = size - len(text)
    if missing <= 0:
        return body
    filler = _PADDING * (missing // len(_PADDING) + 1)
    holder[key] = (text + filler[:missing]).decode()
    return orjson.dumps(data)


@dataclass
class Counts:
    total: int
    succeeded: int = 0
    errored: int = 0
    cancelled: int = 0
    expired: int = 0

    @property
    def processing(self) -> int:
        return self.total - self.succeeded - self.errored - self.cancelled - self.expired
