"""Each batch's state, in ``RUN/batches/<local_id>.json``, written before the batch is sent.

Its planned requests go to ``RUN/batches/<local_id>.requests.jsonl`` first (the records of
its results are built from them). A batch is written in state ``prepared`` (its items:
custom id -> request id, and when they were queued) before its create call, ``submitting``
just before that call, ``submitted`` with the provider's id as soon as the call returns,
``ended`` with the provider's final status, and ``done`` once every result is in the stream.
Every write is atomic (a temporary file, fsync, rename), so a crash or Ctrl-C leaves each
file either before or after a step. A resumed run reads them all first: a ``submitted`` or
``ended`` batch is polled and downloaded, never sent again; its request ids are kept out of
new batches. The one step that cannot be made atomic is the create call itself: a batch found
in ``submitting`` may or may not exist at the provider, and is looked for there before
anything is sent again (:meth:`runner.batch.apis.BatchApi.find_submitted`). That search must
never take another run's batch for this one (local ids repeat across run directories: every
run's first batch is ``<endpoint>-00001``), so each batch has a random ``nonce``, written in
its ``prepared`` state before anything is sent, and carried by the create call (OpenAI's
metadata; Anthropic's custom ids, :mod:`runner.batch.custom_ids`). State files written before
nonces (no ``nonce``, ``rejected`` or ``unverified`` key) are read as they are.
"""

from __future__ import annotations

import os
import secrets
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from cotaudit.errors import UsageError
from cotaudit.output_file import replacing
from runner.request_spec import RequestSpec

BATCHES_DIR = "batches"
STATES = ("prepared", "submitting", "submitted", "ended", "done")
NONCE_BYTES = 8  # 64 random bits per batch, as 16 hex digits


def new_nonce() -> str:
    """A batch's identity across run directories (from the OS's random source: a seeded
    ``random.Random`` would give two runs of one seed the same nonces)."""
    return secrets.token_hex(NONCE_BYTES)


@dataclass(slots=True)
class BatchState:
    """One batch as the run directory knows it."""

    local_id: str  # "<endpoint>-<n>": unique within the run directory
    endpoint: str
    api: str  # "openai" | "anthropic"
    items: list[tuple[str, str]]  # (custom_id, request_id), in the order sent
    queued_at: float  # wall clock: the batch was built
    state: str = "prepared"
    round: int = 1  # 1 for a first submission; 2, 3 for resubmitted items
    remote_id: str | None = None
    input_file_id: str | None = None  # OpenAI: the uploaded input file
    submitting_at: float | None = None
    submitted_at: float | None = None
    status: str | None = None  # the provider's last status
    ended_at: float | None = None
    notes: list[str] = field(default_factory=list)
    nonce: str | None = None  # None: written by a version before nonces
    # Provider ids this batch is not (or no longer): another run's batch taken for it after
    # a failed create call, an earlier submission of it that failed as a whole.
    rejected: list[str] = field(default_factory=list)
    # remote_id was found by size and time only (Anthropic): checked against the results'
    # custom ids before any of them is written.
    unverified: bool = False

    @property
    def open(self) -> bool:
        """Not yet fully written to the stream."""
        return self.state != "done"

    def request_ids(self) -> list[str]:
        return [request_id for _, request_id in self.items]

    def to_json(self) -> dict[str, Any]:
        return {
            "local_id": self.local_id,
            "endpoint": self.endpoint,
            "api": self.api,
            "state": self.state,
            "round": self.round,
            "remote_id": self.remote_id,
            "input_file_id": self.input_file_id,
            "queued_at": self.queued_at,
            "submitting_at": self.submitting_at,
            "submitted_at": self.submitted_at,
            "status": self.status,
            "ended_at": self.ended_at,
            "notes": self.notes,
            "nonce": self.nonce,
            "rejected": self.rejected,
            "unverified": self.unverified,
            "items": [list(item) for item in self.items],
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> BatchState:
        return cls(
            local_id=str(data["local_id"]),
            endpoint=str(data["endpoint"]),
            api=str(data["api"]),
            items=[(str(c), str(r)) for c, r in data["items"]],
            queued_at=float(data["queued_at"]),
            state=str(data["state"]),
            round=int(data.get("round", 1)),
            remote_id=data.get("remote_id"),
            input_file_id=data.get("input_file_id"),
            submitting_at=data.get("submitting_at"),
            submitted_at=data.get("submitted_at"),
            status=data.get("status"),
            ended_at=data.get("ended_at"),
            notes=list(data.get("notes") or []),
            nonce=data.get("nonce"),
            rejected=[str(r) for r in data.get("rejected") or []],
            unverified=bool(data.get("unverified", False)),
        )


class BatchStore:
    """The ``batches/`` directory of a run."""

    def __init__(self, run_dir: Path, *, wall_clock: Any = time.time) -> None:
        self.directory = run_dir / BATCHES_DIR
        self.wall_clock = wall_clock

    def load(self) -> list[BatchState]:
        """Every batch of the run directory, oldest first (``UsageError`` for a bad file)."""
        if not self.directory.is_dir():
            return []
        out = []
        for path in sorted(self.directory.glob("*.json")):
            try:
                out.append(BatchState.from_json(orjson.loads(path.read_bytes())))
            except (OSError, orjson.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
                raise UsageError(
                    f"unreadable batch state ({exc})",
                    where=str(path),
                    fix="Restore the file: it names a batch the provider may be running, "
                    "whose results this run directory still needs.",
                ) from exc
        return sorted(out, key=lambda b: (b.queued_at, b.local_id))

    def requests_path(self, local_id: str) -> Path:
        return self.directory / f"{local_id}.requests.jsonl"

    def save_requests(self, local_id: str, specs: list[RequestSpec]) -> None:
        """The batch's planned requests, written (durably) before its state file: a result
        is written from them, so a run holds in memory only the batch it builds or reads."""
        self.directory.mkdir(parents=True, exist_ok=True)
        path = self.requests_path(local_id)
        tmp = path.with_suffix(".jsonl.tmp")
        with tmp.open("wb") as f:
            for spec in specs:
                f.write(orjson.dumps(spec._asdict()) + b"\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)

    def load_requests(self, local_id: str) -> dict[str, RequestSpec]:
        """The requests of a batch by request id (``UsageError`` when the file is gone)."""
        path = self.requests_path(local_id)
        try:
            raw = path.read_bytes()
        except OSError as exc:
            raise UsageError(
                f"the requests of batch {local_id} cannot be read ({exc.strerror})",
                where=str(path),
                fix="Restore the file from a backup of the run directory: the batch's results "
                "are written from it.",
            ) from exc
        out = {}
        for line in raw.splitlines():
            data = orjson.loads(line)
            data["messages"] = tuple(data["messages"])
            spec = RequestSpec(**data)
            out[spec.request_id] = spec
        return out

    def save(self, batch: BatchState) -> None:
        """Write ``batch`` atomically (and durably) before anything depends on it."""
        self.directory.mkdir(parents=True, exist_ok=True)
        with replacing(self.directory / f"{batch.local_id}.json") as out:
            out.write(orjson.dumps(batch.to_json(), option=orjson.OPT_INDENT_2))
