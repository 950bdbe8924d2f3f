"""Both batch APIs over loopback HTTP, on a fake clock (no test sleeps): the timeline, the
providers' limits and custom_id rules, per-item errors, expiry, cancellation, results in any
order, and results equal to the online answers."""

from __future__ import annotations

import io
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import aiohttp
import orjson
import pytest

from runner.server.batch_jobs import BatchSpec
from runner.server.faults import FaultKind
from runner.server.lifecycle import ServerHandle, running_server
from runner.server.settings import ServerConfig
from runner.tasks.prompts import render_prompt
from tests.runner.server.helpers import FakeClock

pytestmark = pytest.mark.asyncio(loop_scope="session")

SPEC = BatchSpec(validating_s=1.0, processing_s=10.0, finalizing_s=1.0, cancelling_s=1.0)


def _prompt(i: int) -> str:
    kind = ["bempus", "bimpus", "bompus", "bumpus"][i % 4]
    return render_prompt(
        [f"Alex is a {kind}", f"{kind.capitalize()}es are belpuses", "Wumpuses are not belpuses"],
        "Is Alex a belpus?" if i % 2 else "Is Alex a wumpus?",
    )


@dataclass
class Env:
    server: ServerHandle
    client: aiohttp.ClientSession
    clock: FakeClock

    @property
    def base(self) -> str:
        return self.server.base_url

    async def call(self, method: str, path: str, **kwargs: Any) -> tuple[int, Any]:
        async with self.client.request(method, f"{self.base}{path}", **kwargs) as resp:
            raw = await resp.read()
            if resp.content_type == "application/json":
                return resp.status, orjson.loads(raw)
            return resp.status, raw


async def _env(spec: BatchSpec = SPEC, **config: Any) -> AsyncIterator[Env]:
    clock = FakeClock()
    async with (
        running_server(ServerConfig(clock=clock, batches=spec, **config)) as server,
        aiohttp.ClientSession() as client,
    ):
        yield Env(server, client, clock)


@pytest.fixture
async def env() -> AsyncIterator[Env]:
    async for e in _env():
        yield e


def _strip(answer: dict[str, Any]) -> dict[str, Any]:
    """An answer without what differs between any two answers: its id and time."""
    return {k: v for k, v in answer.items() if k not in ("id", "created")}


# OpenAI Batch ----------------------------------------------------------------------------


def _chat_line(custom_id: str, body: dict[str, Any], url: str = "/v1/chat/completions") -> bytes:
    return orjson.dumps({"custom_id": custom_id, "method": "POST", "url": url, "body": body})


def _chat_body(
    i: int, model: str = "thinker:answer=shortcut,p=0.5", **extra: Any
) -> dict[str, Any]:
    return {"model": model, "messages": [{"role": "user", "content": _prompt(i)}], **extra}


async def _upload(env: Env, data: bytes, purpose: str = "batch") -> tuple[int, Any]:
    form = aiohttp.FormData()
    form.add_field("purpose", purpose)
    form.add_field(
        "file", io.BytesIO(data), filename="requests.jsonl", content_type="application/jsonl"
    )
    return await env.call("POST", "/files", data=form)


async def _openai_batch(env: Env, lines: list[bytes]) -> dict[str, Any]:
    status, uploaded = await _upload(env, b"\n".join(lines) + b"\n")
    assert status == 200, uploaded
    body = {
        "input_file_id": uploaded["id"],
        "endpoint": "/v1/chat/completions",
        "completion_window": "24h",
        "metadata": {"run": "test"},
    }
    status, batch = await env.call("POST", "/batches", json=body)
    assert status == 200, batch
    return dict(batch)


async def _jsonl(env: Env, file_id: str | None) -> list[dict[str, Any]]:
    if file_id is None:
        return []
    status, raw = await env.call("GET", f"/files/{file_id}/content")
    assert status == 200
    return [orjson.loads(line) for line in raw.splitlines()]


async def test_an_openai_batch_runs_end_to_end_on_the_clock(env: Env) -> None:
    lines = [_chat_line(f"req-{i}", _chat_body(i)) for i in range(20)]
    batch = await _openai_batch(env, lines)
    assert batch["status"] == "validating"
    assert batch["request_counts"] == {"total": 0, "completed": 0, "failed": 0}
    assert batch["metadata"] == {"run": "test"}
    assert batch["expires_at"] - batch["created_at"] == 86_400
    path = f"/batches/{batch['id']}"

    env.clock.advance(0.5)
    assert (await env.call("GET", path))[1]["status"] == "validating"
    env.clock.advance(0.6)  # validated; processing runs 10 s for the 20 items
    status, batch = await env.call("GET", path)
    assert batch["status"] == "in_progress"
    assert batch["in_progress_at"] is not None
    assert batch["model"] == "thinker:answer=shortcut,p=0.5"
    env.clock.advance(5.0)
    status, batch = await env.call("GET", path)
    assert batch["status"] == "in_progress"
    assert batch["request_counts"] == {"total": 20, "completed": 10, "failed": 0}
    assert batch["output_file_id"] is None
    env.clock.advance(5.0)
    status, batch = await env.call("GET", path)
    assert batch["status"] == "finalizing"
    env.clock.advance(1.0)
    status, batch = await env.call("GET", path)
    assert batch["status"] == "completed"
    assert batch["request_counts"] == {"total": 20, "completed": 20, "failed": 0}
    assert batch["completed_at"] >= batch["finalizing_at"] >= batch["in_progress_at"]
    assert batch["error_file_id"] is None
    usage = batch["usage"]
    assert usage["total_tokens"] == usage["input_tokens"] + usage["output_tokens"]
    assert usage["output_tokens_details"]["reasoning_tokens"] > 0

    status, meta = await env.call("GET", f"/files/{batch['output_file_id']}")
    assert (meta["purpose"], meta["object"]) == ("batch_output", "file")
    results = await _jsonl(env, batch["output_file_id"])
    ids = [r["custom_id"] for r in results]
    assert sorted(ids) == sorted(f"req-{i}" for i in range(20))
    assert ids != [f"req-{i}" for i in range(20)]  # in processing order, not the input's
    for result in results:
        assert result["error"] is None
        assert result["response"]["status_code"] == 200
        assert result["id"].startswith("batch_req_")
        assert result["response"]["request_id"].startswith("req_")
    # Each batch answer is the online answer to the same body.
    for result in results[:5]:
        i = int(result["custom_id"].split("-")[1])
        status, online = await env.call("POST", "/chat/completions", json=_chat_body(i))
        assert status == 200
        assert _strip(result["response"]["body"]) == _strip(online)

    counts = env.server.stats()
    assert counts["completions_total"] == 20 + 5  # batch items count as completions
    assert counts["by_route"]["/v1/batches/{batch_id}"] == 5


async def test_a_server_loaded_with_a_model_answers_batch_items_with_it_as_online() -> None:
    # serve --model NAME answers whatever name a request gives (llama.cpp's server does);
    # a batch item naming another model got a 404 where the online route answered.
    async for env in _env(loaded_model="faithful"):
        body = _chat_body(1, model="gpt-4o-2024-08-06")
        batch = await _openai_batch(env, [_chat_line("only", body)])
        env.clock.advance(13.0)
        _status, batch = await env.call("GET", f"/batches/{batch['id']}")
        assert batch["status"] == "completed" and batch["error_file_id"] is None, batch
        (result,) = await _jsonl(env, batch["output_file_id"])
        assert result["response"]["status_code"] == 200, result
        status, online = await env.call("POST", "/chat/completions", json=body)
        assert status == 200
        assert _strip(result["response"]["body"]) == _strip(online)


async def test_per_item_errors_go_to_the_error_file(env: Env) -> None:
    model = "faithful"
    lines = [
        _chat_line("ok-1", _chat_body(1, model)),
        _chat_line("hot", _chat_body(2, model, temperature=5)),
        _chat_line("bad-role", {"model": model, "messages": [{"role": "robot", "content": "x"}]}),
        _chat_line("ok-2", _chat_body(3, model)),
    ]
    batch = await _openai_batch(env, lines)
    env.clock.advance(13.0)
    _status, batch = await env.call("GET", f"/batches/{batch['id']}")
    assert batch["status"] == "completed"
    assert batch["request_counts"] == {"total": 4, "completed": 2, "failed": 2}
    output = await _jsonl(env, batch["output_file_id"])
    assert sorted(r["custom_id"] for r in output) == ["ok-1", "ok-2"]
    errors = {r["custom_id"]: r for r in await _jsonl(env, batch["error_file_id"])}
    assert set(errors) == {"hot", "bad-role"}
    hot = errors["hot"]["response"]
    assert hot["status_code"] == 400
    assert hot["body"]["error"]["param"] == "temperature"
    assert hot["body"]["error"]["code"] == "decimal_above_max_value"
    assert errors["bad-role"]["response"]["body"]["error"]["param"] == "messages[0].role"


async def test_an_unknown_model_fails_every_item_with_404(env: Env) -> None:
    batch = await _openai_batch(
        env, [_chat_line(f"r{i}", _chat_body(i, "gpt-x")) for i in range(3)]
    )
    env.clock.advance(13.0)
    _status, batch = await env.call("GET", f"/batches/{batch['id']}")
    assert batch["request_counts"] == {"total": 3, "completed": 0, "failed": 3}
    assert batch["output_file_id"] is None
    for line in await _jsonl(env, batch["error_file_id"]):
        assert line["response"]["status_code"] == 404
        assert line["response"]["body"]["error"]["code"] == "model_not_found"


async def test_a_share_of_items_gets_injected_server_errors() -> None:
    async for env in _env(BatchSpec(validating_s=0, processing_s=1, error_rate=0.3, seed=7)):
        batch = await _openai_batch(env, [_chat_line(f"r{i}", _chat_body(i)) for i in range(200)])
        env.clock.advance(5.0)
        _, batch = await env.call("GET", f"/batches/{batch['id']}")
        counts = batch["request_counts"]
        assert counts["completed"] + counts["failed"] == 200
        assert 40 <= counts["failed"] <= 80  # 30 % of 200, give or take
        errors = await _jsonl(env, batch["error_file_id"])
        assert {e["response"]["status_code"] for e in errors} == {500}
        assert {e["response"]["body"]["error"]["type"] for e in errors} == {"server_error"}
        # A resubmission (a new batch) draws anew: not the same items fail again.
        first = {e["custom_id"] for e in errors}
        again = await _openai_batch(env, [_chat_line(f"r{i}", _chat_body(i)) for i in range(200)])
        env.clock.advance(5.0)
        _status, again = await env.call("GET", f"/batches/{again['id']}")
        second = {e["custom_id"] for e in await _jsonl(env, again["error_file_id"])}
        assert first != second


@pytest.mark.parametrize(
    ("lines", "code", "line"),
    [
        (
            [_chat_line("a", _chat_body(1)), _chat_line("a", _chat_body(2))],
            "duplicate_custom_id",
            2,
        ),
        ([_chat_line("a", _chat_body(1), url="/v1/embeddings")], "mismatched_url", 1),
        (
            [_chat_line("a", _chat_body(1, "faithful")), _chat_line("b", _chat_body(2, "echo"))],
            "mismatched_model",
            2,
        ),
        ([b"{not json"], "invalid_json_line", 1),
        (
            [orjson.dumps({"method": "POST", "url": "/v1/chat/completions", "body": {}})],
            "missing_required_parameter",
            1,
        ),
        (
            [
                orjson.dumps(
                    {"custom_id": "a", "method": "GET", "url": "/v1/chat/completions", "body": {}}
                )
            ],
            "invalid_method",
            1,
        ),
        ([b""], "empty_file", None),
    ],
)
async def test_an_input_file_that_does_not_validate_fails_the_batch(
    env: Env, lines: list[bytes], code: str, line: int | None
) -> None:
    batch = await _openai_batch(env, lines)
    env.clock.advance(1.0)
    _status, batch = await env.call("GET", f"/batches/{batch['id']}")
    assert batch["status"] == "failed"
    assert batch["failed_at"] is not None
    assert batch["errors"]["object"] == "list"
    (error,) = batch["errors"]["data"]
    assert (error["code"], error["line"]) == (code, line)
    assert batch["output_file_id"] is None and batch["error_file_id"] is None


async def test_the_request_and_byte_limits_of_a_batch_file() -> None:
    async for env in _env(BatchSpec(openai_max_requests=2, openai_max_bytes=600)):
        lines = [_chat_line(f"r{i}", {"model": "echo", "messages": []}) for i in range(3)]
        batch = await _openai_batch(env, lines)
        env.clock.advance(1.0)
        status, batch = await env.call("GET", f"/batches/{batch['id']}")
        assert batch["status"] == "failed"
        assert batch["errors"]["data"][0]["code"] == "too_many_requests"
        status, error = await _upload(env, b"x" * 601)
        assert status == 413
        assert error["error"]["code"] == "request_too_large"


async def test_create_refuses_unknown_files_endpoints_and_windows(env: Env) -> None:
    status, uploaded = await _upload(env, _chat_line("a", _chat_body(1)))
    good = {
        "input_file_id": uploaded["id"],
        "endpoint": "/v1/chat/completions",
        "completion_window": "24h",
    }
    for change, status_code, param in [
        ({"input_file_id": "file-nope"}, 404, "id"),
        ({"endpoint": "/v1/images"}, 400, "endpoint"),
        ({"endpoint": "/v1/embeddings"}, 400, "endpoint"),  # real, but not batched here
        ({"completion_window": "1h"}, 400, "completion_window"),
    ]:
        status, error = await env.call("POST", "/batches", json={**good, **change})
        assert status == status_code, error
        assert error["error"]["param"] == param
    status, error = await _upload(env, b"{}", purpose="fine-tune")
    assert status == 400 and error["error"]["param"] == "purpose"
    status, error = await env.call("GET", "/batches/batch_nope")
    assert status == 404
    assert error["error"]["code"] is None  # an unknown batch is not an unknown model


async def test_an_expired_openai_batch_returns_what_it_finished() -> None:
    async for env in _env(BatchSpec(validating_s=0, processing_s=100, expire_s=50)):
        batch = await _openai_batch(env, [_chat_line(f"r{i}", _chat_body(i)) for i in range(10)])
        env.clock.advance(49.0)
        _, batch = await env.call("GET", f"/batches/{batch['id']}")
        assert batch["status"] == "in_progress"
        env.clock.advance(10.0)
        _status, batch = await env.call("GET", f"/batches/{batch['id']}")
        assert batch["status"] == "expired"
        assert batch["expired_at"] == batch["expires_at"]
        # Items due at 10, 20, ... 100 s: five were answered by the expiry at 50 s.
        assert batch["request_counts"] == {"total": 10, "completed": 5, "failed": 5}
        assert len(await _jsonl(env, batch["output_file_id"])) == 5
        expired = await _jsonl(env, batch["error_file_id"])
        assert len(expired) == 5
        assert {(e["response"], e["error"]["code"]) for e in expired} == {(None, "batch_expired")}


async def test_a_cancelled_openai_batch(env: Env) -> None:
    batch = await _openai_batch(env, [_chat_line(f"r{i}", _chat_body(i)) for i in range(10)])
    path = f"/batches/{batch['id']}"
    env.clock.advance(1.0 + 3.5)  # 3 of the 10 items answered
    status, batch = await env.call("POST", f"{path}/cancel")
    assert status == 200
    assert batch["status"] == "cancelling"
    assert batch["cancelling_at"] is not None
    env.clock.advance(0.5)
    assert (await env.call("GET", path))[1]["status"] == "cancelling"
    env.clock.advance(0.5)
    status, batch = await env.call("GET", path)
    assert batch["status"] == "cancelled"
    assert batch["request_counts"] == {"total": 10, "completed": 3, "failed": 7}
    cancelled = await _jsonl(env, batch["error_file_id"])
    assert {e["error"]["code"] for e in cancelled} == {"batch_cancelled"}
    status, error = await env.call("POST", f"{path}/cancel")
    assert status == 400
    assert "Cannot cancel a batch with status 'cancelled'" in error["error"]["message"]


async def test_batches_are_listed_newest_first(env: Env) -> None:
    made = [(await _openai_batch(env, [_chat_line("a", _chat_body(i))]))["id"] for i in range(3)]
    _, listing = await env.call("GET", "/batches?limit=2")
    assert [b["id"] for b in listing["data"]] == made[::-1][:2]
    assert listing["has_more"] is True
    _status, rest = await env.call("GET", f"/batches?limit=2&after={listing['last_id']}")
    assert [b["id"] for b in rest["data"]] == [made[0]]
    assert rest["has_more"] is False


async def test_files_can_be_read_and_deleted(env: Env) -> None:
    status, uploaded = await _upload(env, b'{"a": 1}\n')
    assert uploaded["bytes"] == 9 and uploaded["purpose"] == "batch"
    assert (await env.call("GET", f"/files/{uploaded['id']}/content"))[1] == b'{"a": 1}\n'
    status, gone = await env.call("DELETE", f"/files/{uploaded['id']}")
    assert gone == {"id": uploaded["id"], "object": "file", "deleted": True}
    status, error = await env.call("GET", f"/files/{uploaded['id']}")
    assert status == 404
    assert error["error"]["message"] == f"No such File object: {uploaded['id']}"


async def test_batch_state_lives_as_long_as_the_server() -> None:
    async for env in _env():
        batch = await _openai_batch(env, [_chat_line("a", _chat_body(1))])
        first_id = batch["id"]
    async for env in _env():
        status, _error = await env.call("GET", f"/batches/{first_id}")
        assert status == 404  # a restarted server knows no batch, and never reuses an id
        again = await _openai_batch(env, [_chat_line("a", _chat_body(1))])
        assert again["id"] != first_id


# Anthropic Message Batches ---------------------------------------------------------------

THINKING = {"type": "enabled", "budget_tokens": 1024}


def _params(i: int, model: str = "thinker:trace=shortcut,p=1", **extra: Any) -> dict[str, Any]:
    return {
        "model": model,
        "max_tokens": 2048,
        "messages": [{"role": "user", "content": _prompt(i)}],
        **extra,
    }


async def _message_batch(env: Env, requests: list[dict[str, Any]]) -> dict[str, Any]:
    status, batch = await env.call("POST", "/messages/batches", json={"requests": requests})
    assert status == 200, batch
    return dict(batch)


def _json_stream(requests: list[dict[str, Any]]) -> dict[str, Any]:
    """A big create body as a stream (aiohttp warns about sending megabytes of raw bytes)."""
    body = io.BytesIO(orjson.dumps({"requests": requests}))
    return {"data": body, "headers": {"Content-Type": "application/json"}}


async def _results(env: Env, batch_id: str) -> list[dict[str, Any]]:
    status, raw = await env.call("GET", f"/messages/batches/{batch_id}/results")
    assert status == 200, raw
    return [orjson.loads(line) for line in raw.splitlines()]


async def test_an_anthropic_batch_runs_end_to_end_on_the_clock(env: Env) -> None:
    requests = [
        {"custom_id": f"req_{i}", "params": _params(i, thinking=THINKING)} for i in range(8)
    ]
    batch = await _message_batch(env, requests)
    assert batch["type"] == "message_batch"
    assert batch["processing_status"] == "in_progress"
    assert batch["request_counts"] == {
        "processing": 8,
        "succeeded": 0,
        "errored": 0,
        "canceled": 0,
        "expired": 0,
    }
    assert batch["results_url"] is None and batch["ended_at"] is None
    assert batch["created_at"].endswith("Z") and batch["expires_at"] > batch["created_at"]
    path = f"/messages/batches/{batch['id']}"
    status, error = await env.call("GET", f"{path}/results")
    assert status == 400 and error["error"]["type"] == "invalid_request_error"

    env.clock.advance(5.0)
    status, batch = await env.call("GET", path)
    assert batch["processing_status"] == "in_progress"
    # Half are answered, but every request counts as processing until the batch has ended.
    assert batch["request_counts"]["processing"] == 8
    assert batch["request_counts"]["succeeded"] == 0
    env.clock.advance(5.0)
    status, batch = await env.call("GET", path)
    assert batch["processing_status"] == "ended"
    assert batch["request_counts"]["succeeded"] == 8
    assert batch["results_url"] == f"{env.server.root_url}/v1{path}/results"

    results = await _results(env, batch["id"])
    ids = [r["custom_id"] for r in results]
    assert sorted(ids) == sorted(r["custom_id"] for r in requests) and ids != sorted(ids)
    for result in results:
        assert result["result"]["type"] == "succeeded"
        message = result["result"]["message"]
        assert [b["type"] for b in message["content"]] == ["thinking", "text"]
    for result in results[:3]:
        i = int(result["custom_id"].split("_")[1])
        status, online = await env.call("POST", "/messages", json=_params(i, thinking=THINKING))
        assert _strip(result["result"]["message"]) == _strip(online)


async def test_anthropic_items_error_as_the_online_route_does(env: Env) -> None:
    requests = [
        {"custom_id": "ok", "params": _params(1, "faithful")},
        {
            "custom_id": "system-role",
            "params": {**_params(2, "faithful"), "messages": [{"role": "system", "content": "x"}]},
        },
        {"custom_id": "no-model", "params": _params(3, "claude-nope")},
        {"custom_id": "cold", "params": _params(4, "faithful", thinking=THINKING, temperature=0)},
    ]
    batch = await _message_batch(env, requests)
    env.clock.advance(11.0)
    results = {r["custom_id"]: r["result"] for r in await _results(env, batch["id"])}
    assert results["ok"]["type"] == "succeeded"
    for custom_id, error_type in [
        ("system-role", "invalid_request_error"),
        ("no-model", "not_found_error"),
        ("cold", "invalid_request_error"),
    ]:
        assert results[custom_id]["type"] == "errored"
        error = results[custom_id]["error"]
        assert error["type"] == "error" and error["error"]["type"] == error_type
    _status, batch = await env.call("GET", f"/messages/batches/{batch['id']}")
    assert batch["request_counts"]["errored"] == 3


@pytest.mark.parametrize(
    ("requests", "fragment"),
    [
        ([], "at least 1 item"),
        ([{"custom_id": "has space", "params": {}}], "String should match pattern"),
        ([{"custom_id": "x" * 65, "params": {}}], "String should match pattern"),
        (
            [{"custom_id": "a", "params": {}}, {"custom_id": "a", "params": {}}],
            "duplicate custom_id",
        ),
        ([{"custom_id": "a"}], "requests.0.params"),
        ([{"params": {}}], "requests.0.custom_id: Field required"),
        ([{"custom_id": f"r{i}", "params": {}} for i in range(4)], "at most 3 items"),
    ],
)
async def test_anthropic_create_checks_custom_ids_and_limits(
    requests: list[dict[str, Any]], fragment: str
) -> None:
    async for env in _env(BatchSpec(anthropic_max_requests=3)):
        status, error = await env.call("POST", "/messages/batches", json={"requests": requests})
        assert status == 400
        assert error["type"] == "error" and error["error"]["type"] == "invalid_request_error"
        assert fragment in error["error"]["message"]


async def test_an_anthropic_batch_over_the_byte_limit_is_413() -> None:
    async for env in _env(BatchSpec(anthropic_max_bytes=2_000_000)):
        big = [{"custom_id": f"r{i}", "params": _params(i)} for i in range(6000)]
        status, error = await env.call("POST", "/messages/batches", **_json_stream(big))
        assert status == 413
        assert error["error"]["type"] == "request_too_large"
        ok = [{"custom_id": f"r{i}", "params": _params(i)} for i in range(3000)]
        status, _ = await env.call("POST", "/messages/batches", **_json_stream(ok))
        assert status == 200  # above aiohttp's 1 MiB default, within the batch limit


async def test_an_expired_and_a_cancelled_anthropic_batch() -> None:
    async for env in _env(BatchSpec(processing_s=100, expire_s=50, cancelling_s=2)):
        requests = [{"custom_id": f"r{i}", "params": _params(i)} for i in range(10)]
        expiring = await _message_batch(env, requests)
        cancelled = await _message_batch(env, requests)
        env.clock.advance(25.0)
        status, batch = await env.call("POST", f"/messages/batches/{cancelled['id']}/cancel")
        assert batch["processing_status"] == "canceling"
        assert batch["cancel_initiated_at"] is not None
        env.clock.advance(2.0)
        status, batch = await env.call("GET", f"/messages/batches/{cancelled['id']}")
        assert batch["processing_status"] == "ended"
        assert batch["request_counts"] == {
            "processing": 0,
            "succeeded": 2,
            "errored": 0,
            "canceled": 8,
            "expired": 0,
        }
        kinds = sorted(r["result"]["type"] for r in await _results(env, cancelled["id"]))
        assert kinds == ["canceled"] * 8 + ["succeeded"] * 2
        env.clock.advance(30.0)
        status, batch = await env.call("GET", f"/messages/batches/{expiring['id']}")
        assert batch["processing_status"] == "ended"
        assert batch["ended_at"] == batch["expires_at"]
        assert (batch["request_counts"]["succeeded"], batch["request_counts"]["expired"]) == (5, 5)
        status, _error = await env.call("POST", f"/messages/batches/{expiring['id']}/cancel")
        assert status == 400


async def test_anthropic_batches_list_and_delete(env: Env) -> None:
    made = [
        (await _message_batch(env, [{"custom_id": "a", "params": _params(i)}]))["id"]
        for i in range(3)
    ]
    status, listing = await env.call("GET", "/messages/batches?limit=2")
    assert [b["id"] for b in listing["data"]] == made[::-1][:2]
    assert listing["has_more"] is True and listing["last_id"] == made[1]
    status, error = await env.call("DELETE", f"/messages/batches/{made[0]}")
    assert status == 400  # still processing
    env.clock.advance(11.0)
    status, gone = await env.call("DELETE", f"/messages/batches/{made[0]}")
    assert gone == {"id": made[0], "type": "message_batch_deleted"}
    status, error = await env.call("GET", f"/messages/batches/{made[0]}")
    assert status == 404 and error["error"]["type"] == "not_found_error"


# Batch-level faults ---------------------------------------------------------------------


def _sized_line(custom_id: str, model: str = "echo") -> bytes:
    # 40 characters: 10 tokens as the simulated models count them.
    return _chat_line(
        custom_id, {"model": model, "messages": [{"role": "user", "content": "x" * 40}]}
    )


async def test_the_enqueued_token_limit_fails_a_batch_as_a_whole_until_room_is_made() -> None:
    spec = BatchSpec(
        validating_s=1.0, processing_s=10.0, finalizing_s=1.0, openai_enqueued_tokens=50
    )
    async for env in _env(spec):
        first = await _openai_batch(env, [_sized_line(f"a{i}") for i in range(3)])  # 30
        second = await _openai_batch(env, [_sized_line(f"b{i}") for i in range(3)])  # 30
        other_model = await _openai_batch(env, [_sized_line("c", "faithful")])
        env.clock.advance(1.0)
        _, second = await env.call("GET", f"/batches/{second['id']}")
        assert second["status"] == "failed" and second["failed_at"] is not None
        (error,) = second["errors"]["data"]
        assert error["code"] == "token_limit_exceeded"
        assert error["line"] is None and error["param"] is None
        assert "Limit: 50 enqueued tokens" in error["message"]
        _, first = await env.call("GET", f"/batches/{first['id']}")
        _, other_model = await env.call("GET", f"/batches/{other_model['id']}")
        assert first["status"] == other_model["status"] == "in_progress"  # per model
        env.clock.advance(11.0)  # the first batch has completed: its tokens are free
        _, first = await env.call("GET", f"/batches/{first['id']}")
        assert first["status"] == "completed"
        body = {
            "input_file_id": second["input_file_id"],
            "endpoint": "/v1/chat/completions",
            "completion_window": "24h",
        }
        status, again = await env.call("POST", "/batches", json=body)
        assert status == 200
        env.clock.advance(1.0)
        _, again = await env.call("GET", f"/batches/{again['id']}")
        assert again["status"] == "in_progress" and again["errors"] is None


@pytest.mark.parametrize("api", ["openai", "anthropic"])
async def test_create_faults_refuse_or_lose_the_answer(api: str) -> None:
    spec = BatchSpec(create_faults=(FaultKind.UNAVAILABLE, FaultKind.RESET, None))
    async for env in _env(spec):
        if api == "openai":
            status, uploaded = await _upload(env, _chat_line("a", _chat_body(1)) + b"\n")
            path = "/batches"
            body: dict[str, Any] = {
                "input_file_id": uploaded["id"],
                "endpoint": "/v1/chat/completions",
                "completion_window": "24h",
            }
        else:
            path = "/messages/batches"
            body = {"requests": [{"custom_id": "a", "params": _params(1)}]}
        status, error = await env.call("POST", path, json=body)
        assert status == 503 and "injected fault: 503" in str(error)
        assert (await env.call("GET", path))[1]["data"] == []  # nothing created
        with pytest.raises(aiohttp.ClientError):
            await env.call("POST", path, json=body)  # created, then the connection reset
        assert len((await env.call("GET", path))[1]["data"]) == 1
        status, _ = await env.call("POST", path, json=body)
        assert status == 200
        assert len((await env.call("GET", path))[1]["data"]) == 2


async def test_create_faults_take_statuses_and_reset_only() -> None:
    with pytest.raises(ValueError, match="create_faults"):
        BatchSpec(create_faults=(FaultKind.HANG,))
    with pytest.raises(ValueError, match="openai_enqueued_tokens"):
        BatchSpec(openai_enqueued_tokens=0)


async def test_results_url_can_name_another_origin() -> None:
    spec = BatchSpec(processing_s=1.0, results_origin="https://api.anthropic.com")
    async for env in _env(spec):
        batch = await _message_batch(env, [{"custom_id": "a", "params": _params(1)}])
        env.clock.advance(2.0)
        _, batch = await env.call("GET", f"/messages/batches/{batch['id']}")
        assert batch["results_url"] == (
            f"https://api.anthropic.com/v1/messages/batches/{batch['id']}/results"
        )
        assert len(await _results(env, batch["id"])) == 1  # the route itself is unchanged


# No time to take ---------------------------------------------------------------------------


async def test_a_batch_with_no_time_to_take_is_answered_by_its_create_call() -> None:
    # --batch-processing 0: every item is due at creation. The create answer said "ended"
    # with every request "expired" (Anthropic), or "completed" with no output file (OpenAI
    # without validating time), though the next look showed them answered.
    spec = BatchSpec(validating_s=0.0, processing_s=0.0, finalizing_s=0.0)
    async for env in _env(spec):
        messages = [{"role": "user", "content": "hi"}]
        requests = [
            {
                "custom_id": f"r{i}",
                "params": {"model": "echo", "max_tokens": 8, "messages": messages},
            }
            for i in range(3)
        ]
        created = await _message_batch(env, requests)
        assert created["processing_status"] == "ended"
        assert created["request_counts"] == {
            "processing": 0, "succeeded": 3, "errored": 0, "canceled": 0, "expired": 0,
        }  # fmt: skip
        batch = await _openai_batch(env, [_chat_line("a", _chat_body(0, model="echo"))])
        assert batch["status"] == "completed"
        assert batch["request_counts"] == {"total": 1, "completed": 1, "failed": 0}
        assert [line["custom_id"] for line in await _jsonl(env, batch["output_file_id"])] == ["a"]
