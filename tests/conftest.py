"""Shared fixtures: the local model server.

- ``local_server`` (session): one server with the default config on a background thread,
  shared by every test. Read ``local_server.base_url`` (``http://127.0.0.1:PORT/v1``) and
  ``local_server.stats()``; since other tests use it too, compare stats before/after or call
  ``local_server.reset_stats()`` first - and never ``configure`` it.
- ``make_server`` (per test): ``make_server(ServerConfig(...))`` starts a fresh server with
  that config on a background thread, stopped when the test ends. Use it for faults, rate
  limits, latency or API keys.

Async tests may also use ``async with running_server(config) as server:`` directly.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from runner.server.app import ServerConfig, ServerThread, start_server_thread


@pytest.fixture(scope="session")
def local_server() -> Iterator[ServerThread]:
    """A default local server shared by the whole test session."""
    server = start_server_thread(ServerConfig())
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def make_server() -> Iterator[Callable[[ServerConfig], ServerThread]]:
    """Factory of fresh servers with a given config, all stopped at the end of the test."""
    started: list[ServerThread] = []

    def make(config: ServerConfig | None = None) -> ServerThread:
        server = start_server_thread(config or ServerConfig())
        started.append(server)
        return server

    try:
        yield make
    finally:
        for server in started:
            server.stop()
