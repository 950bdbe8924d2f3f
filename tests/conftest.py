"""Shared fixtures: the local model server.

- ``local_server`` (session): one server with the default config on a background thread,
  shared by every test. Read ``local_server.base_url`` (``http://127.0.0.1:PORT/v1``) and
  ``local_server.stats()``; since other tests use it too, compare stats before/after or call
  ``local_server.reset_stats()`` first - and never ``configure`` it.
- ``make_server`` (per test): ``make_server(ServerConfig(...))`` starts a fresh server with
  that config on a background thread, stopped when the test ends. Use it for faults, rate
  limits, latency or API keys.

Async tests may also use ``async with running_server(config) as server:`` directly.

And the real data beside the repository (``../shared/data``), each a skip with its reason
where it is absent: ``pack_dir`` (the GPT-4o evidence pack), ``dev_json`` (Logic-LM's
ProntoQA dev set), ``native_dir`` (ProntoQA's native files).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from runner.server.lifecycle import ServerThread, start_server_thread
from runner.server.settings import ServerConfig


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


DATA = Path(__file__).resolve().parents[1] / ".." / "shared" / "data"


@pytest.fixture(scope="session")
def pack_dir() -> Path:
    """The GPT-4o evidence pack of seed 002, or a skip when it is absent."""
    path = DATA / "grounding-audit-gpt4o"
    if not path.is_dir():
        pytest.skip(f"evidence pack not found at {path} (../shared/data beside the repo)")
    return path


@pytest.fixture(scope="session")
def dev_json() -> Path:
    path = DATA / "prontoqa-500" / "dev.json"
    if not path.is_file():
        pytest.skip(f"Logic-LM ProntoQA dev set not found at {path}")
    return path


@pytest.fixture(scope="session")
def native_dir() -> Path:
    path = DATA / "prontoqa-native"
    if not path.is_dir():
        pytest.skip(f"ProntoQA native files not found at {path}")
    return path
