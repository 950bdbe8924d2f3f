"""The API client (model listings, batch files and batches) over real loopback HTTP."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from runner.config import config_from_mapping
from runner.providers.api_client import ApiClient
from runner.providers.openai import OpenAIProvider
from tests.runner.test_transport import RawServer, _answer, _ok

LISTING = orjson.dumps({"object": "list", "data": [{"id": "m", "object": "model"}]})


def _provider(tmp_path: Path, base_url: str) -> OpenAIProvider:
    table = {"name": "e", "provider": "openai", "model": "m", "base_url": base_url}
    config = config_from_mapping(
        {"run_dir": "r", "task": {"kind": "prompts", "path": "p.jsonl"}, "endpoints": [table]},
        config_dir=tmp_path,
    )
    return OpenAIProvider(config.endpoints[0])


async def test_a_proxy_named_in_the_environment_carries_the_api_calls_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A batch sweep behind a proxy uploads, polls and downloads through it, as completions do
    # (the transport's test), and NO_PROXY sends a local server's calls straight to it.
    proxy, direct = RawServer(_answer(_ok(LISTING))), RawServer(_answer(_ok(LISTING)))
    async with proxy.url() as proxy_url, direct.url() as direct_url:
        for name in ("NO_PROXY", "no_proxy", "http_proxy", "ALL_PROXY", "all_proxy"):
            monkeypatch.delenv(name, raising=False)
        monkeypatch.setenv("HTTP_PROXY", proxy_url.rsplit("/v1", 1)[0])
        monkeypatch.setenv("NO_PROXY", "localhost")
        async with ApiClient(_provider(tmp_path, "http://api.invalid/v1")) as client:
            listed = await client.json("GET", "/models")
        local = direct_url.rsplit("/v1", 1)[0].replace("127.0.0.1", "localhost") + "/v1"
        async with ApiClient(_provider(tmp_path, local)) as client:
            await client.json("GET", "/models")
    assert listed["data"][0]["id"] == "m"
    assert proxy.requests[0].startswith(b"GET http://api.invalid/v1/models HTTP/1.1")
    assert len(proxy.requests) == 1 and len(direct.requests) == 1
