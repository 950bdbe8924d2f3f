"""A long-context prompt: the completion routes take requests up to the providers' own limit
(Anthropic's 32 MB), not aiohttp's default 1 MiB, and answer a larger one with the
protocol's JSON 413. Sent by the run's own transport, which streams a body over 1 MiB."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson
import pytest

from runner.server.lifecycle import running_server
from runner.server.route_support import COMPLETION_MAX_BYTES
from runner.transport import AiohttpTransport, Route
from runner.transport.aiohttp_transport import LARGE_BODY_BYTES
from tests.runner.server.helpers import anthropic_body, openai_body

ROUTES = [("/chat/completions", openai_body), ("/messages", anthropic_body)]


async def _post(path: str, body: bytes) -> tuple[int, Any]:
    transport = AiohttpTransport(pool_size=1)
    try:
        async with running_server() as server:
            route = Route(
                server.base_url + path,
                {"content-type": "application/json", "anthropic-version": "2023-06-01"},
                timeout_s=60,
                connect_timeout_s=5,
            )
            answer = await transport.post(route, body)
    finally:
        await transport.close()
    return answer.status, orjson.loads(answer.body)


@pytest.mark.parametrize(("path", "make"), ROUTES)
async def test_a_prompt_over_one_mebibyte_is_answered(
    path: str, make: Callable[..., dict[str, Any]]
) -> None:
    body = orjson.dumps(make(text="y " * 800_000))
    assert len(body) > LARGE_BODY_BYTES  # the transport streams it
    status, data = await _post(path, body)
    assert status == 200, data


@pytest.mark.parametrize(("path", "make"), ROUTES)
async def test_a_request_over_the_limit_is_a_json_413(
    path: str, make: Callable[..., dict[str, Any]]
) -> None:
    status, data = await _post(path, orjson.dumps(make(text="y" * COMPLETION_MAX_BYTES)))
    assert status == 413
    assert "exceeds the maximum allowed number of bytes" in data["error"]["message"]
