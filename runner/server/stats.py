"""What the local server has served: counters read by tests, benchmarks and ``GET /stats``."""

from __future__ import annotations

import threading
from typing import TypedDict


class StatsSnapshot(TypedDict):
    """What ``GET /stats`` and :meth:`ServerHandle.stats` return (see :class:`ServerStats`)."""

    requests_total: int
    completions_total: int
    by_route: dict[str, int]
    by_model: dict[str, int]
    by_status: dict[str, int]
    faults: dict[str, int]


class ServerStats:
    """Counters of what the server answered; thread-safe (read from other threads).

    ``requests_total`` counts every request on the ``/v1`` routes; ``completions_total`` the
    ones answered with a model completion (200, including malformed/truncated faults);
    ``by_status`` keys are the status codes sent, ``"none"`` for resets and hangs.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._zero()

    def _zero(self) -> None:
        self.requests_total = 0
        self.completions_total = 0
        self.by_route: dict[str, int] = {}
        self.by_model: dict[str, int] = {}
        self.by_status: dict[str, int] = {}
        self.faults: dict[str, int] = {}

    def record(
        self,
        route: str,
        model: str | None,
        status: str,
        fault: str | None,
        *,
        completed: bool = False,
    ) -> None:
        """Count one request; ``completed`` when a model produced its answer."""
        with self._lock:
            self.requests_total += 1
            if completed:
                self.completions_total += 1
            self.by_route[route] = self.by_route.get(route, 0) + 1
            if model is not None:
                self.by_model[model] = self.by_model.get(model, 0) + 1
            self.by_status[status] = self.by_status.get(status, 0) + 1
            if fault is not None:
                self.faults[fault] = self.faults.get(fault, 0) + 1

    def record_batch_item(self, model: str | None, *, completed: bool) -> None:
        """Count one batch item a model was asked (no HTTP request of its own):
        ``completions_total`` and ``by_model`` count it, ``requests_total`` does not."""
        with self._lock:
            if completed:
                self.completions_total += 1
            if model is not None:
                self.by_model[model] = self.by_model.get(model, 0) + 1

    def snapshot(self) -> StatsSnapshot:
        """A consistent copy of every counter."""
        with self._lock:
            return {
                "requests_total": self.requests_total,
                "completions_total": self.completions_total,
                "by_route": dict(self.by_route),
                "by_model": dict(self.by_model),
                "by_status": dict(self.by_status),
                "faults": dict(self.faults),
            }

    def reset(self) -> None:
        with self._lock:
            self._zero()
