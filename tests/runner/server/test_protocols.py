"""Both wire protocols answer with well-formed bodies; errors are protocol-shaped."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import aiohttp
import pytest

from runner.server import models
from runner.server.lifecycle import ServerHandle, running_server
from runner.server.models import Completion, UnknownPrompt
from runner.server.settings import ServerConfig
from tests.runner.server.helpers import anthropic_body, openai_body

# Async fixtures live on the session loop (pyproject); run the tests on it too.
pytestmark = pytest.mark.asyncio(loop_scope="session")


class CaptureModel:
    """Answers with a fixed text and remembers what it was asked."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.calls: list[tuple[list[dict[str, str]], dict[str, Any]]] = []

    def complete(
        self, messages: Sequence[Mapping[str, str]], params: Mapping[str, Any]
    ) -> Completion:
        self.calls.append(([dict(m) for m in messages], dict(params)))
        if "unknown" in messages[-1]["content"]:
            raise UnknownPrompt("no recording for this prompt")
        if "crash" in messages[-1]["content"]:
            raise ZeroDivisionError("simulated model bug")
        return Completion(text=self.text, input_tokens=11, output_tokens=len(self.text) // 4)


@pytest.fixture
def capture(monkeypatch: pytest.MonkeyPatch) -> CaptureModel:
    model = CaptureModel("Step 1: Alex is a bempus. STOP Answer: True")
    monkeypatch.setitem(models._FACTORIES, "test-capture", lambda name, options: model)
    return model


async def test_openai_chat_completion_is_well_formed(
    server: ServerHandle, client: aiohttp.ClientSession, capture: CaptureModel
) -> None:
    body = openai_body("test-capture", temperature=0.7, top_p=0.9, seed=3, max_tokens=100)
    async with client.post(f"{server.base_url}/chat/completions", json=body) as resp:
        assert resp.status == 200
        assert resp.content_type == "application/json"
        data = await resp.json()
    assert set(data) == {
        "id",
        "object",
        "created",
        "model",
        "system_fingerprint",
        "choices",
        "usage",
    }
    assert data["system_fingerprint"].startswith("fp_")
    assert data["object"] == "chat.completion"
    assert data["model"] == "test-capture"
    assert isinstance(data["created"], int)
    assert data["choices"] == [
        {
            "index": 0,
            "message": {"role": "assistant", "content": capture.text},
            "finish_reason": "stop",
        }
    ]
    usage = data["usage"]
    assert usage["prompt_tokens"] == 11
    assert usage["completion_tokens"] == len(capture.text) // 4
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]
    messages, params = capture.calls[-1]
    assert messages == [{"role": "user", "content": "hello there"}]
    assert params == {"temperature": 0.7, "top_p": 0.9, "max_tokens": 100, "seed": 3, "stop": None}


async def test_anthropic_message_is_well_formed_and_system_reaches_the_model(
    server: ServerHandle, client: aiohttp.ClientSession, capture: CaptureModel
) -> None:
    body = anthropic_body("test-capture", system="Be terse.", temperature=0.0)
    body["messages"][0]["content"] = [
        {"type": "text", "text": "part one, "},
        {"type": "text", "text": "part two"},
    ]
    async with client.post(f"{server.base_url}/messages", json=body) as resp:
        assert resp.status == 200
        data = await resp.json()
    assert data["type"] == "message"
    assert data["role"] == "assistant"
    assert data["model"] == "test-capture"
    assert data["content"] == [{"type": "text", "text": capture.text}]
    assert data["stop_reason"] == "end_turn"
    assert data["stop_sequence"] is None
    assert data["usage"] == {"input_tokens": 11, "output_tokens": len(capture.text) // 4}
    messages, params = capture.calls[-1]
    assert messages == [
        {"role": "system", "content": "Be terse."},
        {"role": "user", "content": "part one, part two"},
    ]
    assert params["max_tokens"] == 64
    assert params["temperature"] == 0.0


async def test_stop_sequences_cut_the_text_on_both_protocols(
    server: ServerHandle, client: aiohttp.ClientSession, capture: CaptureModel
) -> None:
    body = openai_body("test-capture", stop=["STOP", "never"])
    async with client.post(f"{server.base_url}/chat/completions", json=body) as resp:
        data = await resp.json()
    assert data["choices"][0]["message"]["content"] == "Step 1: Alex is a bempus. "
    assert data["choices"][0]["finish_reason"] == "stop"
    assert capture.calls[-1][1]["stop"] == ["STOP", "never"]

    body = anthropic_body("test-capture", stop_sequences=["bempus"])
    async with client.post(f"{server.base_url}/messages", json=body) as resp:
        data = await resp.json()
    assert data["content"][0]["text"] == "Step 1: Alex is a "
    assert data["stop_reason"] == "stop_sequence"
    assert data["stop_sequence"] == "bempus"


async def test_max_tokens_truncates_with_length_and_max_tokens_reasons(
    server: ServerHandle, client: aiohttp.ClientSession, capture: CaptureModel
) -> None:
    async with client.post(
        f"{server.base_url}/chat/completions", json=openai_body("test-capture", max_tokens=2)
    ) as resp:
        data = await resp.json()
    assert data["choices"][0]["message"]["content"] == capture.text[:8]
    assert data["choices"][0]["finish_reason"] == "length"
    assert data["usage"]["completion_tokens"] == 2

    body = openai_body("test-capture", max_completion_tokens=1, max_tokens=50)
    async with client.post(f"{server.base_url}/chat/completions", json=body) as resp:
        data = await resp.json()
    assert data["choices"][0]["message"]["content"] == capture.text[:4]
    assert capture.calls[-1][1]["max_tokens"] == 1

    async with client.post(
        f"{server.base_url}/messages", json=anthropic_body("test-capture", max_tokens=3)
    ) as resp:
        data = await resp.json()
    assert data["content"][0]["text"] == capture.text[:12]
    assert data["stop_reason"] == "max_tokens"
    assert data["usage"]["output_tokens"] == 3


async def test_models_route_lists_registered_models(
    server: ServerHandle, client: aiohttp.ClientSession, capture: CaptureModel
) -> None:
    async with client.get(f"{server.base_url}/models") as resp:
        assert resp.status == 200
        data = await resp.json()
    assert data["object"] == "list"
    ids = [m["id"] for m in data["data"]]
    assert ids == models.known_models()
    assert "echo" in ids and "test-capture" in ids


async def test_unknown_model_is_404_naming_it_and_listing_known_models(
    server: ServerHandle, client: aiohttp.ClientSession
) -> None:
    async with client.post(
        f"{server.base_url}/chat/completions", json=openai_body("no-such-model")
    ) as resp:
        assert resp.status == 404
        data = await resp.json()
    message = data["error"]["message"]
    assert "'no-such-model'" in message and "echo" in message
    assert data["error"]["code"] == "model_not_found"

    async with client.post(f"{server.base_url}/messages", json=anthropic_body("nope")) as resp:
        assert resp.status == 404
        data = await resp.json()
    assert data["type"] == "error"
    assert data["error"]["type"] == "not_found_error"
    assert "'nope'" in data["error"]["message"] and "echo" in data["error"]["message"]


async def test_unknown_prompt_in_replay_is_404_with_a_clear_message(
    server: ServerHandle, client: aiohttp.ClientSession, capture: CaptureModel
) -> None:
    body = openai_body("test-capture", text="an unknown prompt")
    async with client.post(f"{server.base_url}/chat/completions", json=body) as resp:
        assert resp.status == 404
        data = await resp.json()
    assert "no recorded answer" in data["error"]["message"]


@pytest.mark.parametrize(
    ("route", "payload", "fragment"),
    [
        ("/chat/completions", b"{not json", "not valid JSON"),
        ("/chat/completions", b"[1, 2]", "JSON object"),
        ("/chat/completions", b'{"model": "echo"}', "'messages'"),
        (
            "/chat/completions",
            b'{"messages": [{"role": "user", "content": "x"}]}',
            "you must provide a model parameter",
        ),
        ("/chat/completions", b'{"model": "echo", "messages": [{"content": "x"}]}', "messages[0]"),
        ("/chat/completions", b'{"model": "echo", "max_tokens": 0, "messages": []}', "messages"),
        (
            "/chat/completions",
            b'{"model": "echo", "n": 2, "messages": [{"role": "user", "content": "x"}]}',
            "'n'",
        ),
        (
            "/chat/completions",
            b'{"model": "echo", "max_tokens": 0, "messages": [{"role": "user", "content": "x"}]}',
            "max_tokens",
        ),
        (
            "/messages",
            b'{"model": "echo", "messages": [{"role": "user", "content": "x"}]}',
            "max_tokens",
        ),
    ],
)
async def test_invalid_requests_are_400_saying_what_is_wrong(
    server: ServerHandle, client: aiohttp.ClientSession, route: str, payload: bytes, fragment: str
) -> None:
    headers = {"Content-Type": "application/json"}
    async with client.post(f"{server.base_url}{route}", data=payload, headers=headers) as resp:
        assert resp.status == 400
        data = await resp.json()
    message = data["error"]["message"]
    assert fragment in message


async def test_api_key_is_required_when_configured(client: aiohttp.ClientSession) -> None:
    secret = "sk-test-0123456789"
    async with running_server(ServerConfig(require_api_key=secret)) as server:
        url = f"{server.base_url}/chat/completions"
        async with client.post(url, json=openai_body()) as resp:
            assert resp.status == 401
        async with client.post(
            url, json=openai_body(), headers={"Authorization": "Bearer wrong"}
        ) as resp:
            assert resp.status == 401
            text = await resp.text()
        assert "wrong" not in text and secret not in text
        async with client.post(
            url, json=openai_body(), headers={"Authorization": f"Bearer {secret}"}
        ) as resp:
            assert resp.status == 200
        async with client.post(
            f"{server.base_url}/messages", json=anthropic_body(), headers={"x-api-key": secret}
        ) as resp:
            assert resp.status == 200
        async with client.post(f"{server.base_url}/messages", json=anthropic_body()) as resp:
            assert resp.status == 401
            data = await resp.json()
        assert data["error"]["type"] == "authentication_error"
        assert secret not in repr(server.config)


async def test_extra_fields_and_metadata_reach_the_model_as_hints(
    server: ServerHandle, client: aiohttp.ClientSession, capture: CaptureModel
) -> None:
    body = openai_body("test-capture", replicate=3, metadata={"condition": "local", "replicate": 9})
    async with client.post(f"{server.base_url}/chat/completions", json=body) as resp:
        assert resp.status == 200
    params = capture.calls[-1][1]
    assert params["replicate"] == 3  # a top-level field wins over metadata
    assert params["condition"] == "local"
    assert "metadata" not in params

    body = anthropic_body("test-capture", metadata={"sample_index": 2, "nested": {"x": 1}})
    async with client.post(f"{server.base_url}/messages", json=body) as resp:
        assert resp.status == 200
    params = capture.calls[-1][1]
    assert params["sample_index"] == 2
    assert "nested" not in params


async def test_streaming_requests_are_refused_clearly(
    server: ServerHandle, client: aiohttp.ClientSession
) -> None:
    body = openai_body(stream=True)
    async with client.post(f"{server.base_url}/chat/completions", json=body) as resp:
        assert resp.status == 400
        data = await resp.json()
    assert "stream" in data["error"]["message"]


async def test_a_failing_model_is_a_counted_500_naming_the_error(
    server: ServerHandle,
    client: aiohttp.ClientSession,
    capture: CaptureModel,
    caplog: pytest.LogCaptureFixture,
) -> None:
    body = anthropic_body("test-capture", text="please crash")
    async with client.post(f"{server.base_url}/messages", json=body) as resp:
        assert resp.status == 500
        data = await resp.json()
    assert data["error"]["type"] == "api_error"
    assert "ZeroDivisionError: simulated model bug" in data["error"]["message"]
    assert server.stats()["by_status"]["500"] == 1
    assert any("test-capture" in r.getMessage() for r in caplog.records)
