"""Whether cached answers were served by the model that serves the endpoint now.

Self-hosted servers (llama.cpp, Ollama, vLLM) may answer any model name with whatever they
have loaded, so a cache keyed by URL and name cannot tell two loaded models apart. Each cached
answer keeps what its server said it served (``served_model``, ``system_fingerprint``); the
endpoint's present server says the same at preflight and in every answer of the run. When the
two differ, a warning (once per endpoint) says that cached answers may be another model's and
that ``revision`` keeps them apart. A field either side does not know is not compared.
"""

from __future__ import annotations

import sys
from typing import Any, NamedTuple


class Served(NamedTuple):
    """What a server said answered: the model and the fingerprint, either may be unknown."""

    model: str | None
    fingerprint: str | None

    def differs(self, other: Served) -> bool:
        return any(
            a is not None and b is not None and a != b
            for a, b in ((self.model, other.model), (self.fingerprint, other.fingerprint))
        )

    def describe(self) -> str:
        parts = [repr(self.model) if self.model else "an unnamed model"]
        if self.fingerprint:
            parts.append(f"system_fingerprint {self.fingerprint}")
        return ", ".join(parts)


class ServedWatch:
    """One endpoint's check; ``now`` is the preflight's finding (None without preflight)."""

    def __init__(self, endpoint: str, now: Served | None, *, stream: Any = None) -> None:
        self.endpoint = endpoint
        self.now = now
        self.cached: Served | None = None  # the first cached identity seen this run
        self.warned = False
        self._stream = stream

    def cache_hit(self, served: Served) -> None:
        if self.cached is None and (served.model or served.fingerprint):
            self.cached = served
        if self.now is not None and served.differs(self.now):
            self._warn(served, self.now)

    def answered(self, served: Served) -> None:
        if self.now is None and (served.model or served.fingerprint):
            self.now = served
        if self.cached is not None and self.cached.differs(served):
            self._warn(self.cached, served)

    def _warn(self, cached: Served, now: Served) -> None:
        if self.warned:
            return
        self.warned = True
        print(
            f"cotaudit: warning: endpoint {self.endpoint!r}: the cache holds answers served by "
            f"{cached.describe()}, but the server now serves {now.describe()}: cached answers "
            "may be another model's. Set revision on the endpoint (it enters the cache key) "
            "to keep the two apart.",
            file=self._stream or sys.stderr,
            flush=True,
        )
