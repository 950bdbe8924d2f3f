"""How the local model server is configured: one immutable object, swapped whole."""

from __future__ import annotations

import asyncio
import ipaddress
import math
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

from cotaudit.constants import LOCAL_HOST, SERVER_SHUTDOWN_TIMEOUT_S
from cotaudit.errors import UsageError
from runner.server.batch_jobs import BatchSpec
from runner.server.faults import FaultSpec
from runner.server.latency import LatencySpec
from runner.server.server_limits import Clock, RateLimitSpec

Sleep = Callable[[float], Awaitable[None]]


@dataclass(frozen=True)
class ServerConfig:
    """Everything that shapes the server's behaviour; immutable, swap it with ``configure``.

    ``replay`` paths are handed to :func:`runner.server.replay.configure` when the server
    starts (the seam through which replay models learn their recorded outputs). ``clock``
    drives the rate limiter and ``sleep`` the latency, so tests can inject both; ``wall_clock``
    dates the Anthropic reset headers and the times of batches and files. ``loaded_model``
    makes the server answer any model name with that one model, as llama.cpp's server does.
    ``per_output_token_s`` adds that many seconds per output token to each answer's latency,
    after the model has produced it (a hosted model's generation time; with ``latency``
    lognormal, its time to the first token).
    """

    host: str = LOCAL_HOST
    port: int = 0  # 0 = any free port
    latency: LatencySpec = field(default_factory=LatencySpec)
    latency_seed: int = 0
    per_output_token_s: float = 0.0
    faults: FaultSpec = field(default_factory=FaultSpec)
    rate_limit: RateLimitSpec = field(default_factory=RateLimitSpec)
    require_api_key: str | None = field(default=None, repr=False)  # never printed
    replay: tuple[Path, ...] = ()
    batches: BatchSpec = field(default_factory=BatchSpec)  # the batch APIs' timing and errors
    shutdown_timeout_s: float = SERVER_SHUTDOWN_TIMEOUT_S
    # llama.cpp-like: one model is loaded and answers every requested name (the answer's
    # ``model`` echoes the name asked for); ``/v1/models`` lists only this one.
    loaded_model: str | None = None
    clock: Clock = field(default=time.monotonic, compare=False, repr=False)
    sleep: Sleep = field(default=asyncio.sleep, compare=False, repr=False)
    wall_clock: Clock = field(default=time.time, compare=False, repr=False)

    def __post_init__(self) -> None:
        if not (self.per_output_token_s >= 0 and math.isfinite(self.per_output_token_s)):
            raise UsageError(
                f"seconds per output token must be finite and >= 0, got {self.per_output_token_s}",
                where="--per-token",
                fix="give e.g. 0.01 (100 tokens per second), or 0 for none",
            )


def check_loopback(host: str) -> None:
    """Refuse any host that is not a loopback address (the server has no authentication)."""
    if host == "localhost":
        return
    try:
        loopback = ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = False
    if not loopback:
        raise UsageError(
            f"refusing to bind {host!r}: the local model server listens on loopback only",
            where="--host",
            fix=f"Use {LOCAL_HOST} (or ::1 / localhost).",
        )
