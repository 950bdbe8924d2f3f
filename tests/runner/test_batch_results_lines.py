"""Reading a batch's results line by line: :meth:`ApiClient.lines` over loopback HTTP (lines
across chunks, a bounded line length, an error status) and what a line must be to be a
result (``runner.batch.apis._result``)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import orjson
import pytest

from runner.batch import apis
from runner.batch.apis import batch_api
from runner.config import config_from_mapping
from runner.providers import api_client, make_provider
from runner.providers.api_client import ApiClient
from runner.providers.base import MalformedResponse, NotFound
from tests.runner.test_api_client import _provider
from tests.runner.test_transport import RawServer, _answer


def _head(length: int, status: bytes = b"200 OK") -> bytes:
    return b"HTTP/1.1 %s\r\ncontent-type: application/jsonl\r\ncontent-length: %d\r\n\r\n" % (
        status,
        length,
    )


async def _lines(tmp_path: Path, *parts: bytes, status: bytes = b"200 OK") -> list[bytes]:
    server = RawServer(_answer(_head(sum(map(len, parts)), status), *parts))
    async with server.url() as url:
        base = url.removesuffix("/chat/completions")
        async with ApiClient(_provider(tmp_path, base)) as client:
            return [line async for line in client.lines("GET", "/files/f/content")]


async def test_lines_come_whole_whatever_the_chunks(tmp_path: Path) -> None:
    parts = (b'{"a": 1}\r\n{"b"', b": 2}\n", b'\n{"c":', b" 3", b"}")  # the last unended
    assert await _lines(tmp_path, *parts) == [b'{"a": 1}', b'{"b": 2}', b"", b'{"c": 3}']


async def test_a_line_longer_than_the_bound_is_malformed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(api_client, "RESPONSE_BODY_MAX_BYTES", 1000)
    assert await _lines(tmp_path, b"x" * 999 + b"\n", b"y" * 10) == [b"x" * 999, b"y" * 10]
    with pytest.raises(MalformedResponse, match="longer than 1,000 bytes"):
        await _lines(tmp_path, *[b"x" * 600] * 5)


async def test_an_error_status_is_the_error_of_any_call(tmp_path: Path) -> None:
    body = b'{"error": {"message": "No such File object: f"}}'
    with pytest.raises(NotFound, match="No such File"):
        await _lines(tmp_path, body, status=b"404 Not Found")


def _api(tmp_path: Path, provider: str) -> Any:
    config = config_from_mapping(
        {
            "run_dir": "r",
            "task": {"kind": "prompts", "path": "p.jsonl"},
            "endpoints": [
                {
                    "name": "e",
                    "provider": provider,
                    "model": "m",
                    "base_url": "http://127.0.0.1:9/v1",
                }
            ],
        },
        config_dir=tmp_path,
    )
    made = make_provider(config.endpoints[0])
    return batch_api(made, ApiClient(made))


@pytest.mark.parametrize(
    ("raw", "says"),
    [
        (b'{"custom_id": "a", "response": {"status_c', "line 3 of the results is not JSON"),
        (b'["a", "b"]', "not a batch result (a JSON list, not an object)"),
        (b'"a"', "not a batch result (a JSON str, not an object)"),
        (b'{"response": null}', "not a batch result (no custom_id)"),
        (b'{"custom_id": "a", "response": "ok"}', "not a batch result"),
        (b'{"custom_id": "a", "response": null, "error": "gone"}', "not a batch result"),
        (b'{"custom_id": "a", "response": {"status_code": "x"}}', "not a batch result"),
    ],
)
def test_a_line_that_is_not_a_result_is_malformed(tmp_path: Path, raw: bytes, says: str) -> None:
    item = _api(tmp_path, "openai")._item
    with pytest.raises(MalformedResponse, match=f"GET /files/f/content: .*{re.escape(says)}"):
        apis._result(raw, item, "GET /files/f/content", 3)


def test_a_result_line_is_read_with_its_size(tmp_path: Path) -> None:
    line = orjson.dumps(
        {"custom_id": "a", "response": None, "error": {"code": "batch_expired", "message": ""}}
    )
    item = apis._result(line, _api(tmp_path, "openai")._item, "GET /files/f/content", 1)
    assert (item.custom_id, item.unrun, item.size) == ("a", "expired", len(line))
    line = b'{"custom_id": "b", "result": ["errored"]}'
    with pytest.raises(MalformedResponse, match="line 2 of the results is not a batch result"):
        where = "GET /messages/batches/x/results"
        apis._result(line, _api(tmp_path, "anthropic")._item, where, 2)
