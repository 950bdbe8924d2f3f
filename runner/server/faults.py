"""Fault injection for the local server: which request fails, and how it looks on the wire.

A :class:`FaultSpec` says which faults to inject:

- ``script``: the first ``len(script)`` requests get these faults in order (``None`` = answer
  normally) - the deterministic mode tests use ("the first 2 requests get 503").
- ``rates``: after the script, each request independently gets fault ``k`` with probability
  ``rates[k]`` (one seeded draw per request; rates must sum to <= 1).

Independently of the spec, a request for a model named ``fail-<kind>`` (``fail-401``,
``fail-reset``, ...) always gets that fault: the way to provoke a permanent error on demand.

``echo_credentials`` makes every injected HTTP-status fault (401, 403, 429, 5xx, ...) echo the
request's credential headers (``Authorization``, ``x-api-key``, ``api-key``) into its error
body, as a careless proxy does: the way to test that the runner redacts keys it is sent back.

Transport-level faults are produced here (:func:`reset_connection`, :func:`send_truncated`,
:func:`malformed_body`, and for a batch's results :func:`malformed_jsonl`); HTTP-status faults
get a protocol-shaped error body from the app.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import math
import random
import socket
import struct
from collections.abc import Mapping
from dataclasses import dataclass, field

from aiohttp import web

from cotaudit.constants import SERVER_FAULT_RETRY_AFTER_S, SERVER_HANG_LIMIT_S
from cotaudit.errors import UsageError

MAGIC_MODEL_PREFIX = "fail-"


class FaultKind(enum.StrEnum):
    """Every fault the server can inject; the value is its name on the CLI and in /stats."""

    RATE_LIMIT = "429"  # 429 with retry-after (and retry-after-ms on the OpenAI route)
    SERVER_ERROR = "500"
    BAD_GATEWAY = "502"
    UNAVAILABLE = "503"
    OVERLOADED = "529"  # Anthropic's "overloaded_error"
    QUOTA = "quota"  # 429 whose body says the quota is spent (OpenAI's insufficient_quota)
    RESET = "reset"  # the TCP connection is reset before any response byte
    HANG = "hang"  # no answer until the client gives up (bounded by FaultSpec.hang_s)
    MALFORMED = "malformed"  # 200 with a body that is not valid JSON
    TRUNCATED = "truncated"  # 200 whose Content-Length exceeds the bytes sent, then close
    BAD_REQUEST = "400"
    UNAUTHORIZED = "401"
    FORBIDDEN = "403"
    NOT_FOUND = "404"

    @property
    def status(self) -> int | None:
        """The HTTP status this fault answers with, None for transport-level faults."""
        if self is FaultKind.QUOTA:
            return 429
        return int(self.value) if self.value.isdigit() else None


def parse_fault_kind(text: str, *, where: str = "fault") -> FaultKind:
    """A FaultKind from its name (``"503"``, ``"reset"``), with a helpful error."""
    try:
        return FaultKind(text.strip().lower())
    except ValueError:
        names = ", ".join(k.value for k in FaultKind)
        raise UsageError(
            f"unknown fault {text!r}", where=where, fix=f"use one of: {names}"
        ) from None


@dataclass(frozen=True)
class FaultSpec:
    """Which faults the server injects (see the module docstring); empty = none."""

    rates: Mapping[FaultKind, float] = field(default_factory=dict)
    script: tuple[FaultKind | None, ...] = ()
    seed: int = 0
    retry_after_s: float = SERVER_FAULT_RETRY_AFTER_S  # advertised by injected 429s
    hang_s: float = SERVER_HANG_LIMIT_S  # a hung request is then reset: no leak
    echo_credentials: bool = False  # injected error bodies repeat the credential headers

    def __post_init__(self) -> None:
        for kind, rate in self.rates.items():
            if not 0.0 <= rate <= 1.0:
                raise UsageError(
                    f"fault rate for {kind.value} must be in [0, 1], got {rate}",
                    where="fault spec",
                    fix="give a probability per request",
                )
        total = sum(self.rates.values())
        if total > 1.0 + 1e-9:
            raise UsageError(
                f"fault rates sum to {total:.3f} > 1",
                where="fault spec",
                fix="lower the rates so that at most every request fails",
            )
        if not (0 <= self.retry_after_s < math.inf):
            raise UsageError(
                f"retry_after_s must be finite seconds >= 0, got {self.retry_after_s}",
                where="fault spec",
                fix="give non-negative seconds",
            )
        # A hang held 0 s is a reset at once: FaultKind.RESET is that fault.
        if not (0 < self.hang_s < math.inf):
            raise UsageError(
                f"hang_s must be finite seconds > 0, got {self.hang_s}",
                where="fault spec",
                fix="give e.g. 30; for a connection reset at once use the reset fault",
            )

    @property
    def active(self) -> bool:
        return bool(self.script) or any(r > 0 for r in self.rates.values())


class FaultInjector:
    """Decides, request by request, which fault (if any) to inject. Not thread-safe."""

    def __init__(self, spec: FaultSpec) -> None:
        self.spec = spec
        self._rng = random.Random(spec.seed)
        self._seen = 0
        # Cumulative thresholds so one uniform draw picks at most one fault.
        self._thresholds: list[tuple[float, FaultKind]] = []
        acc = 0.0
        for kind, rate in spec.rates.items():
            if rate > 0:
                acc += rate
                self._thresholds.append((acc, kind))

    def draw(self) -> FaultKind | None:
        """The fault for the next request, or None to answer it normally."""
        index = self._seen
        self._seen += 1
        if index < len(self.spec.script):
            return self.spec.script[index]
        if not self._thresholds:
            return None
        u = self._rng.random()
        for threshold, kind in self._thresholds:
            if u < threshold:
                return kind
        return None


def fault_for_model(model: str) -> FaultKind | None:
    """The fault a magic model name asks for (``fail-401`` -> 401), else None."""
    if not model.startswith(MAGIC_MODEL_PREFIX):
        return None
    try:
        return FaultKind(model[len(MAGIC_MODEL_PREFIX) :])
    except ValueError:
        return None


def reset_connection(request: web.BaseRequest) -> None:
    """Reset the request's TCP connection (RST, not FIN): the client sees a reset error."""
    transport = request.transport
    if transport is None:
        return
    sock = transport.get_extra_info("socket")
    if sock is not None:
        # SO_LINGER with a zero timeout makes close() send RST and drop unsent data.
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    transport.abort()


async def hang(request: web.BaseRequest, limit_s: float) -> None:
    """Never answer: wait (at most ``limit_s``) then reset the connection.

    The server runs with handler cancellation, so a client that gives up first cancels
    this wait; the bound keeps a forgotten connection from holding the server forever.
    """
    await asyncio.sleep(limit_s)
    reset_connection(request)


def malformed_body(valid_body: bytes) -> bytes:
    """A body that starts like the real one but is not valid JSON."""
    return valid_body[: max(1, len(valid_body) // 2)] + b'\x00"}'


def malformed_jsonl(valid_body: bytes) -> bytes:
    """A JSONL body whose middle line is cut short (not JSON), the others as they were: a
    results file damaged on its way, which a client only finds out about halfway through."""
    lines = valid_body.split(b"\n")
    middle = (len(lines) - 1) // 2 if lines[-1] == b"" else len(lines) // 2
    lines[middle] = lines[middle][: max(1, len(lines[middle]) // 2)]
    return b"\n".join(lines)


def send_truncated(request: web.BaseRequest, valid_body: bytes, content_type: str) -> None:
    """Announce the full Content-Length, send half the body, then close the connection."""
    transport = request.transport
    if transport is None:
        return
    head = (
        "HTTP/1.1 200 OK\r\n"
        f"Content-Type: {content_type}\r\n"
        f"Content-Length: {len(valid_body)}\r\n"
        "Connection: close\r\n\r\n"
    ).encode("ascii")
    transport.write(head + valid_body[: len(valid_body) // 2])
    transport.close()  # FIN after the partial body: the client sees an incomplete payload


CREDENTIAL_HEADERS = ("authorization", "x-api-key", "api-key")


def echoed_credentials(request: web.BaseRequest) -> str:
    """The request's credential headers as a careless server echoes them ("" when none)."""
    parts = [
        f"{name}: {request.headers[name]}" for name in CREDENTIAL_HEADERS if name in request.headers
    ]
    return f" (request headers: {'; '.join(parts)})" if parts else ""
