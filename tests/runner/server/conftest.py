"""Fixtures of the server tests: a default local server on a free loopback port and a client
session, both closed after each test."""

from __future__ import annotations

from collections.abc import AsyncIterator

import aiohttp
import pytest

from runner.server.lifecycle import ServerHandle, running_server
from runner.server.settings import ServerConfig


@pytest.fixture
async def server() -> AsyncIterator[ServerHandle]:
    async with running_server(ServerConfig()) as handle:
        yield handle


@pytest.fixture
async def client() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as session:
        yield session
