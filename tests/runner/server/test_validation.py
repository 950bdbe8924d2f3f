"""The server refuses what the real APIs refuse, with their statuses and error shapes, over
real loopback HTTP; and a wrong API key is a 401 on every /v1 route."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest

from runner.server.lifecycle import ServerHandle, running_server
from runner.server.settings import ServerConfig
from runner.server.validation import REASONING_EFFORTS
from tests.runner.server.helpers import anthropic_body, openai_body

pytestmark = pytest.mark.asyncio(loop_scope="session")


async def _post(
    client: aiohttp.ClientSession, url: str, body: dict[str, Any]
) -> tuple[int, dict[str, Any]]:
    async with client.post(url, json=body) as resp:
        data: dict[str, Any] = await resp.json()
        return resp.status, data


def _turns(*roles: str) -> list[dict[str, str]]:
    return [{"role": role, "content": f"turn {i}"} for i, role in enumerate(roles)]


# Anthropic roles -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("messages", "fragment"),
    [
        (_turns("assistant", "user"), 'first message must use the "user" role'),
        (_turns("user", "user"), 'found multiple "user" roles in a row'),
        (_turns("user", "assistant", "assistant"), 'found multiple "assistant" roles in a row'),
        (_turns("system", "user"), "accepts a top-level `system` parameter"),
        (_turns("user", "system"), 'Unexpected role "system"'),
        (_turns("user", "tool"), "messages.1.role: Input should be 'user' or 'assistant'"),
        (
            [{"role": "user", "content": ""}],
            "messages.0: all messages must have non-empty content",
        ),
        (
            [{"role": "user", "content": "q"}, {"role": "assistant", "content": "Step 1: "}],
            "final assistant content cannot end with trailing whitespace",
        ),
        ([], "messages: List should have at least 1 item"),
    ],
)
async def test_anthropic_roles_are_validated_as_the_api_does(
    server: ServerHandle, client: aiohttp.ClientSession, messages: list[Any], fragment: str
) -> None:
    body = anthropic_body()
    body["messages"] = messages
    status, data = await _post(client, f"{server.base_url}/messages", body)
    assert status == 400
    assert data["type"] == "error"
    assert data["error"]["type"] == "invalid_request_error"
    assert fragment in data["error"]["message"]
    assert server.stats()["completions_total"] == 0


async def test_anthropic_accepts_alternating_turns_and_a_prefill(
    server: ServerHandle, client: aiohttp.ClientSession
) -> None:
    body = anthropic_body(system="Be terse.")
    body["messages"] = [
        *_turns("user", "assistant", "user"),
        {"role": "assistant", "content": "Step 1:"},  # a prefill, no trailing space
    ]
    status, data = await _post(client, f"{server.base_url}/messages", body)
    assert status == 200, data
    # An earlier answer sent back with its thinking block is accepted (its text is read).
    body["messages"] = [
        {"role": "user", "content": "q"},
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "hmm", "signature": "c2ln"},
                {"type": "text", "text": "an answer"},
            ],
        },
        {"role": "user", "content": "and again"},
    ]
    status, data = await _post(client, f"{server.base_url}/messages", body)
    assert status == 200, data


# Anthropic extended thinking -------------------------------------------------------------


@pytest.mark.parametrize(
    ("extra", "fragment"),
    [
        ({"thinking": {"type": "enabled"}}, "thinking.enabled.budget_tokens: Field required"),
        (
            {"thinking": {"type": "enabled", "budget_tokens": 1023}},
            "budget_tokens: Input should be greater than or equal to 1024",
        ),
        (
            {"thinking": {"type": "enabled", "budget_tokens": 4096}},
            "`max_tokens` must be greater than `thinking.budget_tokens`",
        ),
        (
            {"thinking": {"type": "enabled", "budget_tokens": 1024}, "temperature": 0.0},
            "`temperature` may only be set to 1 when thinking is enabled",
        ),
        (
            {"thinking": {"type": "enabled", "budget_tokens": 1024}, "top_p": 0.5},
            "`top_p` must be unset or between 0.95 and 1",
        ),
        (
            {"thinking": {"type": "enabled", "budget_tokens": 1024}, "top_k": 5},
            "`top_k` must be unset when thinking is enabled",
        ),
        ({"thinking": {"type": "sometimes"}}, "does not match any of the expected tags"),
        ({"thinking": "on"}, "thinking: Input should be a valid dictionary"),
        ({"temperature": 1.5}, "temperature: Input should be less than or equal to 1"),
    ],
)
async def test_anthropic_thinking_is_validated_as_providers_md_says(
    server: ServerHandle, client: aiohttp.ClientSession, extra: dict[str, Any], fragment: str
) -> None:
    body = anthropic_body("thinker", max_tokens=4096, **extra)
    status, data = await _post(client, f"{server.base_url}/messages", body)
    assert status == 400
    assert data["error"]["type"] == "invalid_request_error"
    assert fragment in data["error"]["message"]


async def test_thinking_accepts_temperature_1_top_p_095_and_refuses_a_prefill(
    server: ServerHandle, client: aiohttp.ClientSession
) -> None:
    thinking = {"type": "enabled", "budget_tokens": 1024}
    body = anthropic_body("echo", max_tokens=2048, thinking=thinking, temperature=1, top_p=0.95)
    status, data = await _post(client, f"{server.base_url}/messages", body)
    assert status == 200, data
    body["messages"] = [*_turns("user"), {"role": "assistant", "content": "Step 1:"}]
    status, data = await _post(client, f"{server.base_url}/messages", body)
    assert status == 400
    assert "prefill" in data["error"]["message"]


# OpenAI ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("extra", "param", "code", "fragment"),
    [
        ({"temperature": 2.5}, "temperature", "decimal_above_max_value", "Expected a value <= 2"),
        ({"temperature": -1}, "temperature", "decimal_below_min_value", "Expected a value >= 0"),
        ({"top_p": 1.5}, "top_p", "decimal_above_max_value", "Expected a value <= 1"),
        ({"temperature": "hot"}, "temperature", "invalid_type", "expected a decimal"),
        (
            {"max_completion_tokens": 0},
            "max_completion_tokens",
            "integer_below_min_value",
            "Expected a value >= 1",
        ),
        ({"reasoning_effort": "huge"}, "reasoning_effort", "invalid_value", "'minimal'"),
    ],
)
async def test_openai_parameters_are_validated_with_param_and_code(
    server: ServerHandle,
    client: aiohttp.ClientSession,
    extra: dict[str, Any],
    param: str,
    code: str,
    fragment: str,
) -> None:
    status, data = await _post(client, f"{server.base_url}/chat/completions", openai_body(**extra))
    assert status == 400
    error = data["error"]
    assert (error["type"], error["param"], error["code"]) == ("invalid_request_error", param, code)
    assert fragment in error["message"]


async def test_openai_roles_are_validated(
    server: ServerHandle, client: aiohttp.ClientSession
) -> None:
    body = openai_body()
    body["messages"] = [
        *_turns("developer", "user", "assistant"),
        {"role": "robot", "content": "x"},
    ]
    status, data = await _post(client, f"{server.base_url}/chat/completions", body)
    assert status == 400
    assert data["error"]["param"] == "messages[3].role"
    assert data["error"]["code"] == "invalid_value"
    body["messages"] = [*body["messages"][:3], {"role": "user", "content": "fine"}]
    status, data = await _post(client, f"{server.base_url}/chat/completions", body)
    assert status == 200, data


@pytest.mark.parametrize("effort", REASONING_EFFORTS)
async def test_every_reasoning_effort_the_sdk_names_is_accepted(
    server: ServerHandle, client: aiohttp.ClientSession, effort: str
) -> None:
    body = openai_body("thinker", reasoning_effort=effort, max_completion_tokens=500)
    status, data = await _post(client, f"{server.base_url}/chat/completions", body)
    assert status == 200, data


@pytest.mark.parametrize(
    ("extra", "param", "code", "message"),
    [
        (
            {"max_tokens": 100},
            "max_tokens",
            "unsupported_parameter",
            "Unsupported parameter: 'max_tokens' is not supported with this model. Use "
            "'max_completion_tokens' instead.",
        ),
        (
            {"temperature": 0.7},
            "temperature",
            "unsupported_value",
            "Unsupported value: 'temperature' does not support 0.7 with this model. Only the "
            "default (1) value is supported.",
        ),
        (
            {"top_p": 0.9},
            "top_p",
            "unsupported_value",
            "Unsupported value: 'top_p' does not support 0.9 with this model. Only the default "
            "(1) value is supported.",
        ),
    ],
)
async def test_a_strict_reasoning_model_refuses_what_openai_reasoning_models_refuse(
    server: ServerHandle,
    client: aiohttp.ClientSession,
    extra: dict[str, Any],
    param: str,
    code: str,
    message: str,
) -> None:
    url = f"{server.base_url}/chat/completions"
    status, data = await _post(client, url, openai_body("thinker:strict_params=true", **extra))
    assert status == 400
    assert data == {
        "error": {
            "message": message,
            "type": "invalid_request_error",
            "param": param,
            "code": code,
        }
    }
    # The same request to the same model without the option passes.
    status, _ = await _post(client, url, openai_body("thinker", **extra))
    assert status == 200


async def test_a_strict_reasoning_model_takes_the_defaults_and_max_completion_tokens(
    server: ServerHandle, client: aiohttp.ClientSession
) -> None:
    body = openai_body(
        "thinker:strict_params=true", temperature=1, top_p=1, max_completion_tokens=300
    )
    status, data = await _post(client, f"{server.base_url}/chat/completions", body)
    assert status == 200, data
    counts = server.stats()
    assert counts["by_status"] == {"200": 1}


async def test_refusals_are_counted_once_as_400(
    server: ServerHandle, client: aiohttp.ClientSession
) -> None:
    await _post(client, f"{server.base_url}/chat/completions", openai_body(temperature=9))
    await _post(client, f"{server.base_url}/messages", anthropic_body(temperature=9))
    counts = server.stats()
    assert counts["requests_total"] == 2
    assert counts["by_status"] == {"400": 2}
    assert counts["completions_total"] == 0


# API keys on every route -----------------------------------------------------------------

SECRET = "sk-local-0123456789"
ROUTES: list[tuple[str, str, bool]] = [
    # (method, path under /v1, Anthropic-shaped)
    ("POST", "/chat/completions", False),
    ("POST", "/messages", True),
    ("GET", "/models", False),
    ("GET", "/models/echo", False),
    ("POST", "/messages/count_tokens", True),
    ("POST", "/files", False),
    ("GET", "/files/file-x", False),
    ("GET", "/files/file-x/content", False),
    ("DELETE", "/files/file-x", False),
    ("POST", "/batches", False),
    ("GET", "/batches", False),
    ("GET", "/batches/batch_x", False),
    ("POST", "/batches/batch_x/cancel", False),
    ("POST", "/messages/batches", True),
    ("GET", "/messages/batches", True),
    ("GET", "/messages/batches/msgbatch_x", True),
    ("GET", "/messages/batches/msgbatch_x/results", True),
    ("POST", "/messages/batches/msgbatch_x/cancel", True),
    ("DELETE", "/messages/batches/msgbatch_x", True),
    ("GET", "/no-such-route", False),
]


@pytest.fixture
async def keyed_server() -> AsyncIterator[ServerHandle]:
    async with running_server(ServerConfig(require_api_key=SECRET)) as handle:
        yield handle


@pytest.mark.parametrize(("method", "path", "anthropic"), ROUTES)
@pytest.mark.parametrize("sent", [None, "wrong"])
async def test_a_missing_or_wrong_key_is_401_on_every_route(
    keyed_server: ServerHandle,
    client: aiohttp.ClientSession,
    method: str,
    path: str,
    anthropic: bool,
    sent: str | None,
) -> None:
    headers = {}
    if sent is not None:
        headers = {"x-api-key": sent} if anthropic else {"Authorization": f"Bearer {sent}"}
    async with client.request(
        method, f"{keyed_server.base_url}{path}", json={}, headers=headers
    ) as resp:
        assert resp.status == 401
        data = await resp.json()
    text = repr(data)
    assert SECRET not in text and (sent is None or sent not in text)
    if anthropic:
        assert data["type"] == "error"
        assert data["error"]["type"] == "authentication_error"
    else:
        assert data["error"]["type"] == "invalid_request_error"
        assert data["error"]["code"] == (None if sent is None else "invalid_api_key")
    assert keyed_server.stats()["by_status"] == {"401": 1}


async def test_the_right_key_passes_on_the_new_routes_and_stats_stay_open(
    keyed_server: ServerHandle, client: aiohttp.ClientSession
) -> None:
    base = keyed_server.base_url
    bearer = {"Authorization": f"Bearer {SECRET}"}
    async with client.get(f"{base}/models", headers=bearer) as resp:
        assert resp.status == 200
    anthropic = {"x-api-key": SECRET, "anthropic-version": "2023-06-01"}
    async with client.get(f"{base}/models", headers=anthropic) as resp:
        assert resp.status == 200
        assert "has_more" in await resp.json()
    async with client.post(
        f"{base}/messages/count_tokens",
        json={"model": "echo", "messages": [{"role": "user", "content": "hi"}]},
        headers=anthropic,
    ) as resp:
        assert resp.status == 200
    async with client.get(f"{base}/models", headers={"x-api-key": "nope"}) as resp:
        assert resp.status == 401
        assert (await resp.json())["error"]["type"] == "authentication_error"
    async with client.get(f"{keyed_server.root_url}/stats") as resp:
        assert resp.status == 200


# The model field -------------------------------------------------------------------------

# (sent model, Anthropic's field error, OpenAI's message, OpenAI's code); MISSING: no field.
MISSING = object()
MODEL_FIELD = [
    (MISSING, "model: Field required", "you must provide a model parameter", None),
    # "" is a string: "Input should be a valid string" (what it said) told the client nothing.
    (
        "",
        "model: String should have at least 1 character",
        "you must provide a model parameter",
        None,
    ),
    (
        5,
        "model: Input should be a valid string",
        "expected a string, but got a number",
        "invalid_type",
    ),
]


@pytest.mark.parametrize(("model", "anthropic", "openai", "code"), MODEL_FIELD)
async def test_a_missing_empty_or_mistyped_model_is_refused_in_each_providers_words(
    server: ServerHandle,
    client: aiohttp.ClientSession,
    model: Any,
    anthropic: str,
    openai: str,
    code: str | None,
) -> None:
    for body, route in ((anthropic_body(), "/messages"), (openai_body(), "/chat/completions")):
        if model is MISSING:
            del body["model"]
        else:
            body["model"] = model
        status, data = await _post(client, f"{server.base_url}{route}", body)
        assert status == 400, data
        error = data["error"]
        if route == "/messages":
            assert (data["type"], error["type"]) == ("error", "invalid_request_error")
            assert error["message"] == anthropic
        else:
            assert error["type"] == "invalid_request_error"
            assert openai in error["message"]
            assert (error["param"], error["code"]) == ("model", code)
    # count_tokens takes the Messages body's model and refuses it in the same words
    body = {"messages": [{"role": "user", "content": "x"}]}
    if model is not MISSING:
        body["model"] = model
    status, data = await _post(client, f"{server.base_url}/messages/count_tokens", body)
    assert (status, data["error"]["message"]) == (400, anthropic)


@pytest.mark.parametrize(
    ("max_tokens", "fragment"),
    [
        # JSON true is a Python int: it was answered 200 with "output_tokens": true.
        (True, "max_tokens: Input should be a valid integer"),
        ("10", "max_tokens: Input should be a valid integer"),
        (0, "max_tokens: Input should be greater than or equal to 1"),
    ],
)
async def test_anthropic_refuses_a_max_tokens_that_is_no_positive_integer(
    server: ServerHandle, client: aiohttp.ClientSession, max_tokens: Any, fragment: str
) -> None:
    body = anthropic_body()
    body["max_tokens"] = max_tokens
    status, data = await _post(client, f"{server.base_url}/messages", body)
    assert status == 400, data
    assert data["error"]["message"] == fragment


@pytest.mark.parametrize(
    ("model", "fragment"),
    [
        # A limit that could not be read was ignored: the model answered with no limit.
        ("echo:max_output=4k", "max_output must be a whole number >= 1, got '4k'"),
        ("echo:max_output=0", "max_output must be a whole number >= 1, got '0'"),
        ("echo:reasoning=maybe", "reasoning must be true or false, got 'maybe'"),
        ("echo:max_ouptut=10", "unknown option(s) max_ouptut; echo takes max_output and reasoning"),
    ],
)
async def test_bad_echo_options_are_400_not_ignored(
    server: ServerHandle, client: aiohttp.ClientSession, model: str, fragment: str
) -> None:
    for url, body in (
        (f"{server.base_url}/chat/completions", openai_body(model, max_tokens=64)),
        (f"{server.base_url}/messages", anthropic_body(model)),
    ):
        status, data = await _post(client, url, body)
        assert status == 400, data
        assert f"bad model options in {model!r}" in data["error"]["message"]
        assert fragment in data["error"]["message"]
