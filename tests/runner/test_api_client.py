"""The API client (model listings, batch files and batches) over real loopback HTTP."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from cotaudit.constants import BATCH_TRANSFER_STALL_S, BATCH_UPLOAD_MIN_BYTES_PER_S
from runner.config import config_from_mapping
from runner.providers.api_client import ApiClient, transfer_timeout
from runner.providers.base import PermanentError
from runner.providers.openai import OpenAIProvider
from tests.runner.test_transport import RawServer, _answer, _ok

LISTING = orjson.dumps({"object": "list", "data": [{"id": "m", "object": "model"}]})


def _provider(tmp_path: Path, base_url: str, **extra: str) -> OpenAIProvider:
    table = {"name": "e", "provider": "openai", "model": "m", "base_url": base_url, **extra}
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


@pytest.mark.parametrize(
    ("base_url", "url", "same"),
    [
        ("https://api.anthropic.com:443/v1", "https://api.anthropic.com/v1/x", True),
        ("https://api.anthropic.com/v1", "https://API.Anthropic.com:443/v1/x", True),
        ("http://127.0.0.1:80/v1", "http://127.0.0.1/v1/x", True),
        ("https://api.anthropic.com/v1", "http://api.anthropic.com/v1/x", False),
        ("https://api.anthropic.com/v1", "https://api.anthropic.com:8443/v1/x", False),
        ("https://gateway.example/v1/acct/anthropic", "https://api.anthropic.com/v1/x", False),
        ("https://api.anthropic.com/v1", "https://api.anthropic.com:port/v1/x", False),
    ],
)
def test_an_absolute_url_is_on_the_api_root_when_its_origin_is(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, base_url: str, url: str, same: bool
) -> None:
    monkeypatch.setenv("COTAUDIT_TEST_KEY", "sk-test")
    client = ApiClient(_provider(tmp_path, base_url, api_key_env="COTAUDIT_TEST_KEY"))
    assert client.same_origin(url) is same
    if same:
        assert client.url(url) == url  # a default port written out is the same host
    else:
        with pytest.raises(PermanentError, match="another host"):
            client.url(url)  # the key is never sent there


def test_a_file_transfer_has_no_total_timeout_only_a_stall_allowance() -> None:
    download = transfer_timeout(120.0)
    assert download.total is None and download.sock_read == BATCH_TRANSFER_STALL_S
    assert transfer_timeout(900.0).sock_read == 900.0  # a longer timeout_s is kept
    upload = transfer_timeout(120.0, upload_bytes=200_000_000)
    assert upload.sock_read == BATCH_TRANSFER_STALL_S
    # As long as the slowest upload allowed takes, on top of the stall allowance.
    assert upload.total == BATCH_TRANSFER_STALL_S + 200_000_000 / BATCH_UPLOAD_MIN_BYTES_PER_S
