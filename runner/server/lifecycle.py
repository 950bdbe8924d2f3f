"""Starting and stopping the local server: in the current event loop, or on a thread of its own.

Entry points: :func:`running_server` (async context manager, for tests in an event loop),
:func:`start_server_thread` (a server on its own thread and loop, for synchronous callers,
subprocess-based tests and benchmarks) and ``cotaudit serve``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from types import TracebackType
from typing import Any

from aiohttp import web

from cotaudit.constants import LOCAL_HOST, SERVER_START_TIMEOUT_S
from cotaudit.errors import UsageError
from runner.server import replay
from runner.server.app import LocalServer
from runner.server.models import load_builtin_models
from runner.server.settings import ServerConfig, check_loopback
from runner.server.stats import StatsSnapshot


class ServerHandle:
    """A running local server: its URL, its counters and its (swappable) config."""

    def __init__(self, server: LocalServer, host: str, port: int) -> None:
        self._server = server
        self.host = host
        self.port = port
        netloc = f"[{host}]" if ":" in host else host
        self.root_url = f"http://{netloc}:{port}"
        self.base_url = f"{self.root_url}/v1"  # what OpenAI/Anthropic clients take

    @property
    def config(self) -> ServerConfig:
        return self._server.config

    def stats(self) -> StatsSnapshot:
        """A snapshot of the counters (same shape as ``GET /stats``)."""
        return self._server.stats.snapshot()

    def reset_stats(self) -> None:
        self._server.stats.reset()

    def configure(self, config: ServerConfig | None = None, **changes: Any) -> ServerConfig:
        """Swap the config (whole, or fields of the current one); returns the new config.

        Fault RNG, rate-limit buckets and the model cache start afresh; stats are kept.
        The host and port of a running server cannot change.
        """
        new = dataclasses.replace(config or self.config, **changes)
        if new.host != self.config.host or new.port not in (self.config.port, self.port):
            raise UsageError(
                "host and port of a running server cannot change",
                where="ServerHandle.configure",
                fix="start another server instead",
            )
        self._server.configure(new)
        return new


@asynccontextmanager
async def running_server(config: ServerConfig | None = None) -> AsyncIterator[ServerHandle]:
    """Run the local server in the current event loop for the duration of the block.

    Binds ``config.host`` (127.0.0.1) on ``config.port`` (0 = a free port) and yields a
    :class:`ServerHandle`; the server stops (in-flight handlers cancelled after
    ``shutdown_timeout_s``) when the block exits.
    """
    config = config or ServerConfig()
    check_loopback(config.host)
    load_builtin_models()
    if config.replay:
        replay.configure(config.replay)
    server = LocalServer(config)
    runner = web.AppRunner(
        server.build_app(),
        access_log=None,  # the hot path: no per-request logging
        handler_cancellation=True,  # a client that disconnects cancels its (hung) handler
        shutdown_timeout=config.shutdown_timeout_s,
    )
    await runner.setup()
    # "localhost" may resolve to both 127.0.0.1 and ::1, and port 0 would then give each its
    # own port; bind one address so that base_url names the port that listens.
    host = LOCAL_HOST if config.host == "localhost" else config.host
    try:
        site = web.TCPSite(runner, host, config.port)
        try:
            await site.start()
        except OSError as exc:
            raise UsageError(
                f"cannot listen on {config.host}:{config.port}: {exc.strerror}",
                where="--port",
                fix="choose another port (0 picks a free one)",
            ) from exc
        port = int(runner.addresses[0][1])
        yield ServerHandle(server, host, port)
    finally:
        await runner.cleanup()


class ServerThread(ServerHandle):
    """A local server on its own thread and event loop; :meth:`stop` ends it.

    Usable as a context manager. Handy for synchronous code and for tests that run the
    engine in a subprocess against it.
    """

    def __init__(self, config: ServerConfig | None, timeout_s: float) -> None:
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop_event: asyncio.Event | None = None
        self._handle: ServerHandle | None = None
        self._thread = threading.Thread(
            target=asyncio.run, args=(self._main(config),), name="cotaudit-server", daemon=True
        )
        self._thread.start()
        if not self._ready.wait(timeout_s):
            raise RuntimeError(f"the local server did not start within {timeout_s} s")
        if self._error is not None:
            self._thread.join()
            raise self._error
        assert self._handle is not None
        super().__init__(self._handle._server, self._handle.host, self._handle.port)

    async def _main(self, config: ServerConfig | None) -> None:
        try:
            async with running_server(config) as handle:
                self._loop = asyncio.get_running_loop()
                self._stop_event = asyncio.Event()
                self._handle = handle
                self._ready.set()
                await self._stop_event.wait()
        except BaseException as exc:  # surfaced in the starting thread
            if not self._ready.is_set():
                self._error = exc
                self._ready.set()
            else:
                raise

    def stop(self) -> None:
        """Stop the server and wait for its thread to end (idempotent)."""
        loop, event = self._loop, self._stop_event
        if loop is not None and event is not None and self._thread.is_alive():
            loop.call_soon_threadsafe(event.set)
        self._thread.join()

    def __enter__(self) -> ServerThread:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


def start_server_thread(
    config: ServerConfig | None = None, *, timeout_s: float = SERVER_START_TIMEOUT_S
) -> ServerThread:
    """Start the local server on a background thread; returns once it is listening."""
    return ServerThread(config, timeout_s)
