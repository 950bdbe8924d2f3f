"""The batch results' faults and sizes on the local server, over loopback HTTP on a fake
clock: ``BatchSpec.results_faults`` (a damaged or cut results download, then whole ones),
``output_bytes`` (answers as long as a reasoning model's), and a batch whose end passes
while its items are still being answered (a real clock and a slow catch-up)."""

from __future__ import annotations

import aiohttp
import orjson
import pytest

from runner.server.anthropic_codec import AnthropicCodec
from runner.server.batch_jobs import BatchJob, BatchSpec, Item, Outcome
from runner.server.faults import FaultKind
from tests.runner.server.helpers import FakeClock
from tests.runner.server.test_batches import (
    SPEC,
    _chat_body,
    _chat_line,
    _env,
    _message_batch,
    _openai_batch,
    _params,
    _upload,
)

pytestmark = pytest.mark.asyncio(loop_scope="session")


async def test_anthropic_results_come_damaged_then_whole() -> None:
    spec = BatchSpec(processing_s=1.0, results_faults=(FaultKind.MALFORMED, None))
    async for env in _env(spec):
        requests = [{"custom_id": f"r{i}", "params": _params(i)} for i in range(5)]
        batch = await _message_batch(env, requests)
        env.clock.advance(2.0)
        path = f"/messages/batches/{batch['id']}/results"
        _, damaged = await env.call("GET", path)
        _, whole = await env.call("GET", path)
        lines = whole.splitlines()
        assert len(lines) == 5 and all(orjson.loads(line) for line in lines)
        cut = damaged.splitlines()
        assert cut[:2] + cut[3:] == lines[:2] + lines[3:]  # the middle line, and it only
        with pytest.raises(orjson.JSONDecodeError):
            orjson.loads(cut[2])
        assert cut[2] == lines[2][: len(lines[2]) // 2]
        assert env.server.stats()["faults"] == {"malformed": 1}


async def test_an_openai_output_file_comes_cut_then_whole() -> None:
    spec = BatchSpec(
        validating_s=1.0, processing_s=10.0, finalizing_s=1.0, results_faults=(FaultKind.TRUNCATED,)
    )
    async for env in _env(spec):
        _, uploaded = await _upload(env, _chat_line("a", _chat_body(1)) + b"\n")
        # An input file is not a batch's results: its download takes no fault.
        status, raw = await env.call("GET", f"/files/{uploaded['id']}/content")
        assert status == 200 and orjson.loads(raw)["custom_id"] == "a"
        batch = await _openai_batch(env, [_chat_line(f"r{i}", _chat_body(i)) for i in range(4)])
        env.clock.advance(20.0)
        _, batch = await env.call("GET", f"/batches/{batch['id']}")
        path = f"/files/{batch['output_file_id']}/content"
        with pytest.raises(aiohttp.ClientPayloadError):
            await env.call("GET", path)
        status, raw = await env.call("GET", path)
        assert status == 200 and len(raw.splitlines()) == 4
        assert env.server.stats()["faults"] == {"truncated": 1}


async def test_results_faults_take_malformed_and_truncated_only() -> None:
    for fault in (FaultKind.RESET, FaultKind.UNAVAILABLE):
        with pytest.raises(ValueError, match="results_faults"):
            BatchSpec(results_faults=(fault,))
    with pytest.raises(ValueError, match="output_bytes"):
        BatchSpec(output_bytes=-1)


async def test_output_bytes_pads_every_answer_of_both_apis() -> None:
    spec = BatchSpec(validating_s=1.0, processing_s=10.0, finalizing_s=1.0, output_bytes=5000)
    async for env in _env(spec):
        echo = {"model": "echo", "max_tokens": 64, "messages": [{"role": "user", "content": "x"}]}
        batch = await _message_batch(env, [{"custom_id": "a", "params": echo}])
        openai = await _openai_batch(env, [_chat_line("a", echo)])
        env.clock.advance(20.0)
        _, raw = await env.call("GET", f"/messages/batches/{batch['id']}/results")
        message = orjson.loads(raw)["result"]["message"]
        [block] = message["content"]
        assert len(block["text"].encode()) == 5000 and block["text"].startswith("echo: x")
        assert message["usage"]["output_tokens"] < 100  # as the model counted it
        _, openai = await env.call("GET", f"/batches/{openai['id']}")
        _, raw = await env.call("GET", f"/files/{openai['output_file_id']}/content")
        content = orjson.loads(raw)["response"]["body"]["choices"][0]["message"]["content"]
        assert len(content.encode()) == 5000 and content.startswith("echo: x")


async def test_a_batch_has_not_ended_while_items_due_before_its_end_are_unanswered() -> None:
    # On a real clock a catch-up of many items takes time, in which the batch's end may pass:
    # the items it had not reached must be answered by the next look, not written as expired.
    clock = FakeClock()
    job = BatchJob(
        batch_id="msgbatch_x",
        serial=1,
        proto=AnthropicCodec(),
        spec=SPEC,
        clock=clock,
        created=clock(),
        created_wall=0.0,
        validating_s=0.0,
        finalizing_s=0.0,
    )
    echo = {"model": "echo", "max_tokens": 8, "messages": [{"role": "user", "content": "x"}]}
    job.load([Item(f"r{i}", echo) for i in range(4)])  # due at 2.5, 5, 7.5 and 10 s
    clock.advance(9.0)
    assert len(await job.catch_up({}, lambda: 1, loaded=None)) == 3
    clock.advance(2.0)  # the end (10 s) passed during that catch-up
    assert job.ended_at() is None and not job.phase(clock()).ended
    assert job.outcome(job.items[job.order[3]]) is None  # not expired: still to answer
    assert len(await job.catch_up({}, lambda: 1, loaded=None)) == 1
    assert job.ended_at() == 1010.0 and job.phase(clock()).ended
    assert {job.outcome(item) for item in job.items} == {Outcome.ANSWERED}
