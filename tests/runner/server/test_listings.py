"""GET /v1/models and /v1/models/{id} in each protocol's shape, chosen by the client's
headers; POST /v1/messages/count_tokens counts what /v1/messages reports as input."""

from __future__ import annotations

from typing import Any

import aiohttp
import pytest

from runner.server.lifecycle import ServerHandle
from runner.server.listings import MODELS_CREATED
from runner.server.models import known_models
from runner.tasks.prompts import render_prompt
from tests.runner.server.helpers import anthropic_body

pytestmark = pytest.mark.asyncio(loop_scope="session")

ANTHROPIC_HEADERS = {"anthropic-version": "2023-06-01", "x-api-key": "unused"}


async def _get(
    client: aiohttp.ClientSession, url: str, headers: dict[str, str] | None = None
) -> tuple[int, Any]:
    async with client.get(url, headers=headers or {}) as resp:
        return resp.status, await resp.json()


async def test_openai_clients_get_the_openai_list(
    server: ServerHandle, client: aiohttp.ClientSession
) -> None:
    for headers in (
        {},
        {"Authorization": "Bearer sk-x"},
        {"Authorization": "Bearer a", "x-api-key": "b"},
    ):
        status, data = await _get(client, f"{server.base_url}/models", headers)
        assert status == 200
        assert set(data) == {"object", "data"}
        assert data["object"] == "list"
        assert [m["id"] for m in data["data"]] == known_models()
        assert "thinker" in known_models()
        for entry in data["data"]:
            assert entry == {
                "id": entry["id"],
                "object": "model",
                "created": MODELS_CREATED,
                "owned_by": "cotaudit",
            }


@pytest.mark.parametrize(
    "headers", [ANTHROPIC_HEADERS, {"anthropic-version": "2023-06-01"}, {"x-api-key": "k"}]
)
async def test_anthropic_clients_get_the_anthropic_list(
    server: ServerHandle, client: aiohttp.ClientSession, headers: dict[str, str]
) -> None:
    status, data = await _get(client, f"{server.base_url}/models", headers)
    assert status == 200
    assert set(data) == {"data", "has_more", "first_id", "last_id"}
    ids = [m["id"] for m in data["data"]]
    assert ids == known_models()
    assert data["has_more"] is False
    assert (data["first_id"], data["last_id"]) == (ids[0], ids[-1])
    assert data["data"][0] == {
        "type": "model",
        "id": ids[0],
        "display_name": f"{ids[0]} (cotaudit local server)",
        "created_at": "2026-01-01T00:00:00Z",
        "lifecycle": "active",
    }


async def test_anthropic_listing_pages_with_limit_after_id_and_before_id(
    server: ServerHandle, client: aiohttp.ClientSession
) -> None:
    names = known_models()
    url = f"{server.base_url}/models"
    status, first = await _get(client, f"{url}?limit=3", ANTHROPIC_HEADERS)
    assert [m["id"] for m in first["data"]] == names[:3]
    assert first["has_more"] is True
    seen = [m["id"] for m in first["data"]]
    after = first["last_id"]
    while True:
        status, page = await _get(client, f"{url}?limit=3&after_id={after}", ANTHROPIC_HEADERS)
        assert status == 200
        seen += [m["id"] for m in page["data"]]
        if not page["has_more"]:
            break
        after = page["last_id"]
    assert seen == names
    status, back = await _get(client, f"{url}?limit=2&before_id={names[3]}", ANTHROPIC_HEADERS)
    assert [m["id"] for m in back["data"]] == names[1:3]
    assert back["has_more"] is True
    status, error = await _get(client, f"{url}?limit=0", ANTHROPIC_HEADERS)
    assert status == 400
    assert error["error"]["type"] == "invalid_request_error"


async def test_one_model_in_each_shape_options_included(
    server: ServerHandle, client: aiohttp.ClientSession
) -> None:
    url = f"{server.base_url}/models/shortcut:p=0.3"
    status, data = await _get(client, url)
    assert status == 200
    assert data == {
        "id": "shortcut:p=0.3",
        "object": "model",
        "created": MODELS_CREATED,
        "owned_by": "cotaudit",
    }
    status, data = await _get(client, url, ANTHROPIC_HEADERS)
    assert status == 200
    assert (data["type"], data["id"]) == ("model", "shortcut:p=0.3")


async def test_an_unknown_model_is_404_and_bad_options_400_in_each_shape(
    server: ServerHandle, client: aiohttp.ClientSession
) -> None:
    status, data = await _get(client, f"{server.base_url}/models/gpt-nope")
    assert status == 404
    assert data["error"]["code"] == "model_not_found"
    assert "gpt-nope" in data["error"]["message"]
    status, data = await _get(client, f"{server.base_url}/models/gpt-nope", ANTHROPIC_HEADERS)
    assert status == 404
    assert data == {
        "type": "error",
        "error": {"type": "not_found_error", "message": "model: gpt-nope"},
    }
    status, data = await _get(client, f"{server.base_url}/models/shortcut:p=7")
    assert status == 400
    assert "not a probability" in data["error"]["message"]


async def test_count_tokens_equals_the_input_tokens_messages_reports(
    server: ServerHandle, client: aiohttp.ClientSession
) -> None:
    prompt = render_prompt(["Bempuses are bimpuses", "Alex is a bempus"], "Is Alex a bimpus?")
    for model in ("echo", "faithful", "thinker"):
        body = anthropic_body(model, text=prompt, system="Answer in steps.")
        async with client.post(f"{server.base_url}/messages", json=body) as resp:
            assert resp.status == 200
            used = (await resp.json())["usage"]["input_tokens"]
        del body["max_tokens"]
        async with client.post(f"{server.base_url}/messages/count_tokens", json=body) as resp:
            assert resp.status == 200
            counted = await resp.json()
        assert counted == {"input_tokens": used}
        assert used > 20


async def test_count_tokens_validates_as_messages_does(
    server: ServerHandle, client: aiohttp.ClientSession
) -> None:
    url = f"{server.base_url}/messages/count_tokens"
    bad = {"model": "echo", "messages": [{"role": "assistant", "content": "x"}]}
    async with client.post(url, json=bad) as resp:
        assert resp.status == 400
        assert "first message" in (await resp.json())["error"]["message"]
    async with client.post(
        url, json={"model": "nope", "messages": [{"role": "user", "content": "x"}]}
    ) as resp:
        assert resp.status == 404
        assert (await resp.json())["error"]["type"] == "not_found_error"
    async with client.post(
        url, data=b"{oops", headers={"Content-Type": "application/json"}
    ) as resp:
        assert resp.status == 400
    counts = server.stats()
    assert counts["by_route"] == {"/v1/messages/count_tokens": 3}
    assert counts["by_status"] == {"400": 2, "404": 1}
