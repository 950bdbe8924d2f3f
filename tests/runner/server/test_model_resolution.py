"""``model_for_request``: the one resolution of a request's ``model`` name that the online
routes and the batch items share (the loaded model, the cache by the name resolved, the 404
and 400 the routes answer); and the two answer a bad name with the same error."""

from __future__ import annotations

import aiohttp
import orjson
import pytest

from runner.server.answering import answer_request
from runner.server.lifecycle import running_server
from runner.server.models import (
    Model,
    ModelRefused,
    known_models,
    load_builtin_models,
    model_for_request,
)
from runner.server.openai_codec import OpenAICodec
from runner.server.settings import ServerConfig
from tests.runner.server.helpers import openai_body


def test_a_name_resolves_once_and_is_cached() -> None:
    load_builtin_models()
    cache: dict[str, Model] = {}
    model = model_for_request("echo", cache)
    assert cache == {"echo": model}
    assert model_for_request("echo", cache) is model


def test_the_loaded_model_answers_any_name_and_is_cached_by_its_own() -> None:
    load_builtin_models()
    cache: dict[str, Model] = {}
    model = model_for_request("gpt-4o", cache, loaded="echo")
    assert list(cache) == ["echo"] and model_for_request("echo", cache) is model


@pytest.mark.parametrize(
    ("name", "status", "message"),
    [
        ("no-such-model", 404, "model 'no-such-model' not found; known models: "),
        ("rule_mix:p=0.3", 400, "bad model options in 'rule_mix:p=0.3': "),
    ],
)
def test_refusals_name_the_model_as_asked(name: str, status: int, message: str) -> None:
    load_builtin_models()
    cache: dict[str, Model] = {}
    with pytest.raises(ModelRefused) as info:
        model_for_request(name, cache)
    assert info.value.status == status and info.value.message.startswith(message)
    assert cache == {}
    if status == 404:
        assert info.value.message.endswith(", ".join(known_models()))


@pytest.mark.parametrize(("name", "status"), [("no-such-model", 404), ("rule_mix:p=0.3", 400)])
async def test_online_and_batch_answer_a_bad_name_alike(name: str, status: int) -> None:
    body = openai_body(name)
    async with (
        running_server(ServerConfig()) as server,
        aiohttp.ClientSession() as client,
        client.post(server.base_url + "/chat/completions", json=body) as resp,
    ):
        online = (resp.status, await resp.read())
    batch = answer_request(OpenAICodec(), body, {}, 1)
    assert online == (batch.status, batch.body) and batch.status == status
    assert name in orjson.loads(batch.body)["error"]["message"]
