"""The engine against the real local server (in this event loop): ordering, resume, cache,
sharding, auth stop, graceful stop, dry run, plan and preflight."""

from __future__ import annotations

import asyncio
import itertools
import shutil
from collections import Counter
from pathlib import Path
from typing import Any

import orjson
import pytest

import runner.engine as engine_module
from cotaudit.errors import UsageError
from cotaudit.schema import read_records
from runner.commands.plan import write_plan
from runner.commands.run import estimate
from runner.config import SweepConfig, config_from_mapping
from runner.engine import iter_plan, run_sweep
from runner.manifest import Shard
from runner.retry import RetryPolicy
from runner.server.faults import FaultKind, FaultSpec
from runner.server.lifecycle import running_server
from runner.server.server_limits import RateLimitSpec
from runner.server.settings import ServerConfig

FAST_RETRY = RetryPolicy(max_attempts=4, base_delay_s=0.0, max_delay_s=0.0, time_budget_s=30.0)


def make_config(
    tmp_path: Path,
    base_url: str | None,
    *,
    prompts: int = 20,
    samples: int = 2,
    endpoints: list[dict[str, Any]] | None = None,
) -> SweepConfig:
    with (tmp_path / "prompts.jsonl").open("w") as f:
        for i in range(prompts):
            f.write(orjson.dumps({"id": f"q{i:03d}", "prompt": f"What is {i} + {i}?"}).decode())
            f.write("\n")
    eps = endpoints or [{"name": "echo", "provider": "local", "model": "echo"}]
    for ep in eps:
        ep.setdefault("requests_per_minute", 1e7)
        ep.setdefault("tokens_per_minute", 1e9)
        ep.setdefault("max_concurrency", 8)
        ep.setdefault("timeout_s", 5)
        if base_url is not None:
            ep.setdefault("base_url", base_url)
    return config_from_mapping(
        {
            "run_dir": "run",
            "cache_dir": "cache",
            "task": {"kind": "prompts", "path": "prompts.jsonl", "samples": samples},
            "endpoints": eps,
        },
        config_dir=tmp_path,
    )


def records(config: SweepConfig) -> list[dict[str, Any]]:
    return list(read_records(config.run_dir / "results.jsonl"))


def responses(config: SweepConfig) -> list[dict[str, Any]]:
    return [r for r in records(config) if r["kind"] == "response"]


def planned_ids(config: SweepConfig, shard: Shard | None = None) -> set[str]:
    task = config.build_task()
    return {
        spec.request_id
        for ep in config.endpoints
        for _, spec in iter_plan(task, ep.identity(), shard)
    }


async def test_run_writes_problems_first_then_one_response_each(tmp_path: Path) -> None:
    async with running_server() as server:
        config = make_config(tmp_path, server.base_url)
        summary = await run_sweep(config, progress=False, retry_policy=FAST_RETRY)
        served = server.stats()["completions_total"]
    recs = records(config)
    seen_problems: set[str] = set()
    for rec in recs:
        if rec["kind"] == "problem":
            seen_problems.add(rec["problem_id"])
        else:
            assert rec["problem_id"] in seen_problems, "response before its problem"
    assert Counter(r["kind"] for r in recs) == {"problem": 20, "response": 40}
    ids = [r["request_id"] for r in recs if r["kind"] == "response"]
    assert sorted(ids) == sorted(planned_ids(config))
    assert (summary.planned, summary.written, summary.skipped) == (40, 40, 0)
    assert summary.http_requests == served == 40
    for rec in recs[1:]:  # each answer is to its own request's prompt
        if rec["kind"] == "response":
            assert rec["text"] == "echo: " + rec["messages"][-1]["content"], rec["request_id"]
    first = next(r for r in recs if r["kind"] == "response")
    assert first["text"].startswith("echo: What is")
    assert first["attempts"] == 1 and first["attempt_outcomes"] == ["ok"]
    assert first["cached"] is False and first["error"] is None
    host = f"127.0.0.1:{server.port}"
    assert first["model"] == {"provider": "local", "model": "echo", "host": host}


async def test_rerun_skips_everything_and_a_fresh_run_dir_uses_the_cache(tmp_path: Path) -> None:
    async with running_server() as server:
        config = make_config(tmp_path, server.base_url)
        await run_sweep(config, progress=False)
        again = await run_sweep(config, progress=False)
        assert (again.skipped, again.written, again.http_requests) == (40, 0, 0)
        moved = config_from_mapping(
            {
                "run_dir": "run2",
                "cache_dir": "cache",
                "task": dict(config.task),
                "endpoints": [ep.to_mapping() for ep in config.endpoints],
            },
            config_dir=tmp_path,
        )
        before = server.stats()["requests_total"]
        warm = await run_sweep(moved, progress=False)
        assert server.stats()["requests_total"] == before
    assert (warm.written, warm.cache_hits, warm.http_requests) == (40, 40, 0)
    cached = responses(moved)
    assert all(r["cached"] for r in cached) and len(cached) == 40
    original = {r["request_id"]: r["text"] for r in responses(config)}
    assert {r["request_id"]: r["text"] for r in cached} == original


async def test_errors_are_recorded_skipped_on_resume_and_retried_when_asked(
    tmp_path: Path,
) -> None:
    eps = [{"name": "bad", "provider": "local", "model": "fail-404", "max_concurrency": 2}]
    async with running_server() as server:
        config = make_config(tmp_path, server.base_url, prompts=3, samples=1, endpoints=eps)
        first = await run_sweep(config, progress=False, retry_policy=FAST_RETRY)
        assert (first.written, first.errors) == (3, 3)
        rec = responses(config)[0]
        assert rec["error"]["type"] == "NotFound" and rec["error"]["status"] == 404
        assert rec["text"] is None and rec["attempt_outcomes"] == ["404"]
        again = await run_sweep(config, progress=False, retry_policy=FAST_RETRY)
        assert (again.skipped, again.written) == (3, 0)
        retried = await run_sweep(
            config, progress=False, retry_policy=FAST_RETRY, retry_errors=True
        )
        assert (retried.skipped, retried.written) == (0, 3)
    # The newer record supersedes: the last one per request id is what counts.
    assert len(responses(config)) == 6


async def test_a_spent_quota_is_recorded_at_once_not_retried(tmp_path: Path) -> None:
    eps = [{"name": "broke", "provider": "local", "model": "fail-quota", "max_concurrency": 1}]
    async with running_server() as server:
        config = make_config(tmp_path, server.base_url, prompts=2, samples=1, endpoints=eps)
        summary = await run_sweep(config, progress=False, retry_policy=FAST_RETRY)
    records = responses(config)
    assert {r["error"]["type"] for r in records} == {"QuotaExhausted"}
    assert all(r["attempt_outcomes"] == ["429"] for r in records)
    assert summary.retries == 0 and summary.http_requests == 2


async def test_a_request_above_the_whole_token_budget_is_recorded_at_once_not_retried(
    tmp_path: Path,
) -> None:
    """OpenAI's 429 "Request too large" (prompt + max_tokens above the whole per-minute token
    budget), from the local server in provider mode: no wait makes it fit, so the client
    records it as a bad request after one attempt, and the smaller requests still pass."""
    eps = [{"name": "small", "provider": "local", "model": "echo", "max_tokens": 900}]
    eps[0]["max_concurrency"] = 1  # the second request is paced by what the first learned
    eps[0]["tokens_per_minute"] = 1e9  # the client is not told the server's budget
    spec = RateLimitSpec(tokens_per_minute=600)
    async with running_server(ServerConfig(rate_limit=spec)) as server:
        config = make_config(tmp_path, server.base_url, prompts=2, samples=1, endpoints=eps)
        summary = await run_sweep(config, progress=False, retry_policy=FAST_RETRY)
    records = responses(config)
    assert {r["error"]["type"] for r in records} == {"BadRequest"}
    assert {r["error"]["status"] for r in records} == {429}
    assert all("Request too large" in r["error"]["message"] for r in records)
    assert all(r["attempt_outcomes"] == ["429"] for r in records)
    assert summary.retries == 0 and summary.http_requests == 2


async def test_retryable_failure_exhausts_attempts_into_an_error_record(tmp_path: Path) -> None:
    eps = [{"name": "down", "provider": "local", "model": "fail-503", "max_concurrency": 1}]
    async with running_server() as server:
        config = make_config(tmp_path, server.base_url, prompts=1, samples=1, endpoints=eps)
        summary = await run_sweep(config, progress=False, retry_policy=FAST_RETRY)
    rec = responses(config)[0]
    assert rec["attempt_outcomes"] == ["503"] * FAST_RETRY.max_attempts
    assert rec["error"]["type"] == "ServerError" and rec["error"]["attempts"] == 4
    assert summary.retries == 3 and summary.http_requests == 4


def locked() -> list[dict[str, Any]]:
    """An endpoint whose key the server refuses (it requires "right-key"); a fresh list each
    time, since make_config fills in the endpoints it is given."""
    return [
        {
            "name": "locked",
            "provider": "local",
            "model": "echo",
            "api_key_env": "COTAUDIT_TEST_KEY",
            "max_concurrency": 1,
        }
    ]


async def test_repeated_auth_failures_stop_the_endpoint_and_leave_work_pending(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("COTAUDIT_TEST_KEY", "wrong-key")
    async with running_server(ServerConfig(require_api_key="right-key")) as server:
        config = make_config(tmp_path, server.base_url, prompts=10, samples=1, endpoints=locked())
        summary = await run_sweep(config, progress=False, retry_policy=FAST_RETRY)
        assert summary.stopped_endpoints == ("locked",)
        assert summary.written == 0 and summary.http_requests == 3
        err = capsys.readouterr().err
        assert "COTAUDIT_TEST_KEY" in err and "locked" in err
        monkeypatch.setenv("COTAUDIT_TEST_KEY", "right-key")
        fixed = await run_sweep(config, progress=False, retry_policy=FAST_RETRY)
    assert fixed.written == 10 and not fixed.stopped_endpoints
    assert len(responses(config)) == 10


async def test_a_stopped_endpoints_auth_failures_are_pending_not_errors(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A wrong key stops the endpoint after 3 failures whose records are not written: they
    # are pending, so the summary must not count them as errors ("8 errors" beside a
    # stream holding 5 error records and "5 requests failed for good" below it).
    monkeypatch.setenv("COTAUDIT_TEST_KEY", "wrong-key")
    async with running_server(ServerConfig(require_api_key="right-key")) as server:
        config = make_config(tmp_path, server.base_url, prompts=10, samples=1, endpoints=locked())
        summary = await run_sweep(config, progress=False, retry_policy=FAST_RETRY)
    assert summary.stopped_endpoints == ("locked",) and summary.pending == 10
    assert summary.errors == 0 and summary.failed == 0
    assert ", 0 errors" in summary.lines()[0]


async def test_auth_failures_below_the_stop_are_errors_once_written(tmp_path: Path) -> None:
    script = (FaultKind.UNAUTHORIZED, FaultKind.UNAUTHORIZED)
    eps = [{"name": "flaky", "provider": "local", "model": "echo", "max_concurrency": 1}]
    async with running_server(ServerConfig(faults=FaultSpec(script=script))) as server:
        config = make_config(tmp_path, server.base_url, prompts=5, samples=1, endpoints=eps)
        summary = await run_sweep(config, progress=False, retry_policy=FAST_RETRY)
    written = [r["error"]["type"] for r in responses(config) if r["error"] is not None]
    assert written == ["AuthError", "AuthError"]
    assert summary.errors == 2 and dict(summary.error_types) == {"AuthError": 2}


async def test_shards_partition_the_plan(tmp_path: Path) -> None:
    async with running_server() as server:
        written: list[str] = []
        for i in range(3):
            sub = tmp_path / f"s{i}"
            sub.mkdir()
            config = make_config(sub, server.base_url)
            await run_sweep(config, progress=False, shard=Shard(i, 3))
            written += [r["request_id"] for r in responses(config)]
    everything = planned_ids(make_config(tmp_path, None))
    assert len(written) == len(set(written)) == len(everything)
    assert set(written) == everything


async def test_stop_event_interrupts_and_a_resume_completes_exactly_once(tmp_path: Path) -> None:
    latency = ServerConfig().latency.__class__(kind="fixed", a=0.02)
    async with running_server(ServerConfig(latency=latency)) as server:
        config = make_config(tmp_path, server.base_url, prompts=100, samples=1)
        stop = asyncio.Event()
        results = config.run_dir / "results.jsonl"

        async def stop_after_some_responses() -> None:
            while not (results.exists() and results.read_bytes().count(b'"response"') >= 10):
                await asyncio.sleep(0.005)
            stop.set()

        watcher = asyncio.create_task(stop_after_some_responses())
        first = await run_sweep(config, progress=False, stop_event=stop)
        await watcher
        assert first.interrupted
        assert 0 < first.written < 100
        second = await run_sweep(config, progress=False)
    assert second.skipped == first.written
    ids = [r["request_id"] for r in responses(config)]
    assert len(ids) == len(set(ids)) == 100


async def test_a_stop_while_the_plan_is_counted_ends_the_run_before_it_writes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Counting gives the loop a turn after every chunk, so a Ctrl-C (the stop event, set by a
    # loop signal handler) is seen while a large plan is counted, not once it is done.
    async with running_server(ServerConfig()) as server:
        config = make_config(tmp_path, server.base_url, prompts=3000, samples=1)
        stop = asyncio.Event()
        chunks_counted = 0
        real_chunks = engine_module._plan_chunks

        def counting(*args: Any) -> Any:
            nonlocal chunks_counted
            for part in real_chunks(*args):
                chunks_counted += 1
                if chunks_counted == 2:
                    asyncio.get_running_loop().call_soon(stop.set)  # as a signal handler does
                yield part

        monkeypatch.setattr(engine_module, "_plan_chunks", counting)
        summary = await run_sweep(config, progress=True, stop_event=stop)
        sent = server.stats()["requests_total"]
    assert summary.interrupted and not summary.started
    assert chunks_counted == 2  # stopped at the next chunk, not at the end of the plan
    assert sent == 0 and not config.run_dir.exists()  # nothing sent, nothing written
    assert "before anything was sent or written" in summary.interrupted_line()


async def test_a_cancelled_sweep_leaves_no_task_behind_and_resumes_exactly_once(
    tmp_path: Path,
) -> None:
    # A caller that cancels run_sweep itself (not its stop event) must not leave the sweep's
    # workers sending and writing in the loop after the call has returned.
    latency = ServerConfig().latency.__class__(kind="fixed", a=0.02)
    async with running_server(ServerConfig(latency=latency)) as server:
        config = make_config(tmp_path, server.base_url, prompts=100, samples=1)
        results = config.run_dir / "results.jsonl"
        sweep = asyncio.create_task(run_sweep(config, progress=False))
        while not (results.exists() and results.read_bytes().count(b'"response"') >= 10):
            await asyncio.sleep(0.005)
        sweep.cancel()
        with pytest.raises(asyncio.CancelledError):
            await sweep
        left = [t.get_name() for t in asyncio.all_tasks() if t.get_name().startswith("cotaudit")]
        assert left == []
        size = results.stat().st_size
        await asyncio.sleep(0.1)  # several of the server's answers' worth of time
        assert results.stat().st_size == size  # nothing writes after the call returned
        second = await run_sweep(config, progress=False)
    assert second.skipped + second.written == 100
    ids = [r["request_id"] for r in responses(config)]
    assert len(ids) == len(set(ids)) == 100


async def test_two_endpoints_share_problem_records(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    eps = [
        {"name": "a", "provider": "local", "model": "echo"},
        {"name": "b", "provider": "openai", "model": "echo", "api_key_env": "COTAUDIT_B_KEY"},
    ]
    monkeypatch.setenv("COTAUDIT_B_KEY", "unused")
    async with running_server() as server:
        config = make_config(tmp_path, server.base_url, prompts=5, samples=1, endpoints=eps)
        await run_sweep(config, progress=False)
    recs = records(config)
    assert Counter(r["kind"] for r in recs) == {"problem": 5, "response": 10}
    assert {r["endpoint"] for r in recs if r["kind"] == "response"} == {"a", "b"}


def test_dry_run_estimate_counts_tokens_time_and_cost(tmp_path: Path) -> None:
    eps = [
        {
            "name": "priced",
            "provider": "local",
            "model": "echo",
            "requests_per_minute": 10,
            "tokens_per_minute": 1e9,
            "max_tokens": 100,
            "price_input_per_mtok": 1.0,
            "price_output_per_mtok": 2.0,
        }
    ]
    config = make_config(tmp_path, None, prompts=20, samples=3, endpoints=eps)
    (est,) = estimate(config, None)
    task = config.build_task()
    specs = [s for _, s in iter_plan(task, config.endpoints[0].identity())]
    tin = sum(s.estimated_input_tokens() for s in specs)
    assert (est.requests, est.input_tokens, est.output_tokens) == (60, tin, 6000)
    assert est.min_seconds == pytest.approx(60 / 10 * 60)
    assert est.cost == pytest.approx((tin * 1.0 + 6000 * 2.0) / 1e6)
    assert not config.run_dir.exists()


def test_plan_writes_problem_records_before_requests(tmp_path: Path) -> None:
    config = make_config(tmp_path, None, prompts=4, samples=2)
    out = tmp_path / "plan.jsonl"
    assert write_plan(config, out) == 8
    recs = list(read_records(out))
    kinds = [r["kind"] for r in recs]
    assert kinds.count("problem") == 4 and kinds.count("request") == 8
    assert kinds.index("request") > kinds.index("problem")
    assert {r["request_id"] for r in recs if r["kind"] == "request"} == planned_ids(config)
    assert not config.run_dir.exists()


async def test_preflight_names_the_unknown_model_and_writes_nothing(tmp_path: Path) -> None:
    eps = [{"name": "typo", "provider": "local", "model": "no-such-model"}]
    async with running_server() as server:
        config = make_config(tmp_path, server.base_url, prompts=2, endpoints=eps)
        with pytest.raises(UsageError, match="no-such-model"):
            await run_sweep(config, progress=False, preflight=True)
    assert not (config.run_dir / "results.jsonl").exists()


async def test_preflight_reports_an_unreachable_endpoint(tmp_path: Path) -> None:
    import socket

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    config = make_config(tmp_path, f"http://127.0.0.1:{port}/v1", prompts=2)
    with pytest.raises(UsageError, match="cannot reach"):
        await run_sweep(config, progress=False, preflight=True)


async def test_a_stop_during_the_preflight_ends_the_run_at_once(tmp_path: Path) -> None:
    # The preflight's ping hangs (a server that accepts and never answers); Ctrl-C must stop
    # the run then, not once the endpoint's timeout_s (10 minutes by default) has passed.
    faults = FaultSpec(script=(FaultKind.HANG,), hang_s=60.0)
    async with running_server(ServerConfig(faults=faults)) as server:
        eps = [{"name": "slow", "provider": "local", "model": "echo", "timeout_s": 60}]
        config = make_config(tmp_path, server.base_url, prompts=2, endpoints=eps)
        stop = asyncio.Event()

        async def stop_once_the_ping_hangs() -> None:
            while not server.stats()["faults"].get("hang"):
                await asyncio.sleep(0.01)
            stop.set()

        watcher = asyncio.create_task(stop_once_the_ping_hangs())
        summary = await asyncio.wait_for(
            run_sweep(config, progress=False, preflight=True, stop_event=stop), timeout=20
        )
        await watcher
    assert summary.interrupted and not summary.started and summary.written == 0
    assert summary.interrupted_line().startswith("interrupted during the preflight")
    assert not config.run_dir.exists()


async def test_embedded_server_is_started_when_no_base_url(tmp_path: Path) -> None:
    config = make_config(tmp_path, None, prompts=3, samples=1)
    summary = await run_sweep(config, progress=False, preflight=True)
    assert summary.written == 3 and summary.http_requests == 3


def test_plain_progress_lines_report_counts_rate_and_total() -> None:
    import io

    from runner.progress import Counts, Progress

    now = [100.0]
    out = io.StringIO()
    counts = Counts(written=20, retries=3, errors=1, cache_hits=5)
    progress = Progress(
        enabled=True, counts=counts, total=50, stream=out, clock=lambda: now[0], tty=False
    )
    now[0] = 110.0
    progress.refresh()
    line = out.getvalue().strip()
    # The count, the total, the share, the rate and the time left (30 more at 2.0/s).
    assert line.startswith("cotaudit: 20/50 records (40%), 2.0/s, 15 s left")
    assert line.endswith("10 s elapsed")
    assert "retries 3" in line and "errors 1" in line and "cache hits 5" in line
    silent = Progress(enabled=False, stream=out, tty=False)
    silent.refresh()
    assert out.getvalue().count("\n") == 1


def test_rate_limit_buckets_hold_a_fifth_of_a_second_and_at_least_one_unit() -> None:
    from runner.pacing import Pacing

    pacing = Pacing(requests_per_minute=600, tokens_per_minute=6000)
    # Buckets hold 0.2 s of allowance: 2 requests, 20 tokens.
    assert pacing.requests.limiter.max_rate == 2.0 and pacing.tokens.capacity == 20.0
    assert pacing.requests.limiter.time_period == pytest.approx(0.2)
    tiny = Pacing(requests_per_minute=6, tokens_per_minute=60)  # below one per bucket
    assert tiny.requests.limiter.max_rate == 1.0
    assert tiny.requests.limiter.time_period == pytest.approx(10.0)
    assert tiny.tokens.capacity == 1.0


async def test_in_flight_requests_past_the_grace_period_are_cancelled_and_stay_pending(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import time

    import runner.engine

    monkeypatch.setattr(runner.engine, "SHUTDOWN_GRACE_S", 0.2)
    slow = ServerConfig().latency.__class__(kind="fixed", a=30.0)
    async with running_server(ServerConfig(latency=slow, shutdown_timeout_s=0.1)) as server:
        config = make_config(tmp_path, server.base_url, prompts=50, samples=1)
        stop = asyncio.Event()
        # The server counts a request only once it answers (here: never), so stop on time.
        asyncio.get_running_loop().call_later(0.5, stop.set)
        started = time.monotonic()
        summary = await run_sweep(config, progress=False, stop_event=stop)
        elapsed = time.monotonic() - started
    assert summary.interrupted and summary.written == 0
    assert elapsed < 10.0  # not the 30 s the server would take
    assert responses(config) == []


async def test_response_records_start_with_the_request_fields(tmp_path: Path) -> None:
    async with running_server() as server:
        config = make_config(tmp_path, server.base_url, prompts=3, samples=1)
        await run_sweep(config, progress=False, retry_policy=FAST_RETRY)
    task = config.build_task()
    specs = {spec.request_id: spec for _, spec in iter_plan(task, config.endpoints[0].identity())}
    for rec in responses(config):
        request = specs[rec["request_id"]].to_record()
        request["kind"] = "response"
        assert list(rec)[: len(request)] == list(request)
        assert {k: rec[k] for k in request} == orjson.loads(orjson.dumps(request))


async def test_the_plan_is_looked_up_a_chunk_at_a_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # One hop to the cache thread per chunk of 512 planned requests, not one per request.
    from runner.cache import ResponseCache
    from runner.engine import CACHE_LOOKUP_CHUNK

    sizes: list[int] = []
    real_get_many = ResponseCache.get_many

    async def recording_get_many(self: ResponseCache, keys: list[str]) -> Any:
        sizes.append(len(keys))
        return await real_get_many(self, keys)

    monkeypatch.setattr(ResponseCache, "get_many", recording_get_many)
    async with running_server() as server:
        config = make_config(tmp_path, server.base_url, prompts=1200, samples=1)
        summary = await run_sweep(config, progress=False)
    assert summary.written == 1200
    assert sizes == [CACHE_LOOKUP_CHUNK, CACHE_LOOKUP_CHUNK, 1200 - 2 * CACHE_LOOKUP_CHUNK]


async def test_planning_lets_the_event_loop_run_every_chunk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A plan of cache hits never holds the event loop for more than one chunk of planning
    # (Ctrl-C and the progress line get their turn). A ticker task counts the loop turns it
    # gets; the plan records the count at each planned request.
    from runner.engine import CACHE_LOOKUP_CHUNK

    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await asyncio.sleep(0)

    seen: list[int] = []
    real_build = SweepConfig.build_task

    class RecordingTask:
        def __init__(self, task: Any) -> None:
            self.task, self.name = task, task.name

        def problems(self) -> Any:
            return self.task.problems()

        def requests(self, problem: Any, endpoint: Any) -> Any:
            for spec in self.task.requests(problem, endpoint):
                seen.append(ticks)
                yield spec

        def endpoint_records(self, problem: Any, endpoint: Any) -> Any:
            return self.task.endpoint_records(problem, endpoint)

    def build_recording_task(self: SweepConfig) -> Any:
        return RecordingTask(real_build(self))

    async with running_server() as server:
        config = make_config(tmp_path, server.base_url, prompts=1500, samples=1)
        await run_sweep(config, progress=False)  # fills the cache
        shutil.rmtree(config.run_dir)
        monkeypatch.setattr(SweepConfig, "build_task", build_recording_task)
        tick_task = asyncio.create_task(ticker())
        try:
            warm = await run_sweep(config, progress=False)
        finally:
            tick_task.cancel()
    assert warm.cache_hits == 1500 and len(seen) == 1500
    longest_stall = max(len(list(group)) for _, group in itertools.groupby(seen))
    assert longest_stall <= CACHE_LOOKUP_CHUNK, longest_stall  # the whole plan: 1500


async def test_response_records_reach_the_stream_while_the_run_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Records are built in a batch per event-loop turn (not at the end of the run): with one
    # worker, when request i leaves, the records of requests up to i - 2 are in the file (the
    # last one is built in the turn after its worker has moved on).
    from runner.providers.base import Provider

    seen: list[int] = []
    real_complete = Provider.complete

    async def observing_complete(self: Provider, spec: Any, session: Any, **kw: Any) -> Any:
        text = (config.run_dir / "results.jsonl").read_bytes()
        seen.append(text.count(b'"kind":"response"'))
        return await real_complete(self, spec, session, **kw)

    monkeypatch.setattr(Provider, "complete", observing_complete)
    async with running_server() as server:
        config = make_config(
            tmp_path,
            server.base_url,
            prompts=12,
            samples=1,
            endpoints=[
                {"name": "echo", "provider": "local", "model": "echo", "max_concurrency": 1}
            ],
        )
        summary = await run_sweep(config, progress=False)
    assert summary.written == 12 and len(responses(config)) == 12
    assert all(count >= i - 1 for i, count in enumerate(seen)), seen


async def test_a_write_error_stops_the_run_and_a_resume_completes_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A full disk while the run goes on: the run stops sending and raises the error; the
    # lines written before it stay whole, and a resume (space freed) writes the rest once.
    import errno

    from runner.writer import RecordWriter

    real_write = RecordWriter._write_buffered
    responses_written = 0

    def write_until_full(self: RecordWriter) -> None:
        nonlocal responses_written
        if responses_written >= 30:
            raise OSError(errno.ENOSPC, "No space left on device")
        responses_written += sum(r["kind"] == "response" for r in self._buffer)
        real_write(self)

    monkeypatch.setattr(RecordWriter, "_write_buffered", write_until_full)
    unhandled: list[dict[str, Any]] = []  # errors the event loop could only log
    loop = asyncio.get_running_loop()
    loop.set_exception_handler(lambda _loop, ctx: unhandled.append(ctx))
    async with running_server() as server:
        config = make_config(tmp_path, server.base_url, prompts=400, samples=1)
        try:
            with pytest.raises(OSError, match="No space left"):
                await run_sweep(config, progress=False)
        finally:
            loop.set_exception_handler(None)
        assert unhandled == []
        sent = server.stats()["completions_total"]
        assert sent < 200, sent  # stopped, not the whole plan
        lines = (config.run_dir / "results.jsonl").read_bytes().splitlines()
        assert lines and all(orjson.loads(line) for line in lines)  # whole lines only
        monkeypatch.setattr(RecordWriter, "_write_buffered", real_write)
        summary = await run_sweep(config, progress=False)
    assert summary.skipped > 0 and summary.pending == 0
    ids = Counter(r["request_id"] for r in responses(config))
    assert set(ids) == planned_ids(config) and max(ids.values()) == 1


async def test_a_failing_cache_store_is_reported_once_and_the_run_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # The cache is an optimisation: a store that fails (a locked database, a full disk) costs
    # cache entries, never records. One warning, the count in the summary, no lost error.
    import gc
    import sqlite3

    from runner.cache import ResponseCache

    def failing_store(self: ResponseCache, batch: Any) -> None:
        raise sqlite3.OperationalError("database or disk is full")

    monkeypatch.setattr(ResponseCache, "_put_many_sync", failing_store)
    unhandled: list[dict[str, Any]] = []
    loop = asyncio.get_running_loop()
    loop.set_exception_handler(lambda _loop, ctx: unhandled.append(ctx))
    try:
        async with running_server() as server:
            config = make_config(tmp_path, server.base_url, prompts=1500, samples=1)
            summary = await run_sweep(config, progress=False)
        gc.collect()  # an unretrieved future exception would be reported here
    finally:
        loop.set_exception_handler(None)
    assert unhandled == []
    assert summary.written == 1500 and summary.errors == 0 and summary.uncached == 1500
    assert "1,500 not cached" in summary.line()
    assert len(responses(config)) == 1500
    err = capsys.readouterr().err
    assert err.count("could not store responses in the cache") == 1, err
    assert "database or disk is full" in err


async def test_records_say_when_a_request_was_queued_admitted_and_sent(tmp_path: Path) -> None:
    # At 6,000 requests/min (100/s, a bucket of 20) the first 200 ms can send at most ~40
    # requests: started_at is the send, after the pacing's wait, while queued_at is earlier.
    from datetime import datetime

    eps = [{"name": "echo", "provider": "local", "model": "echo", "requests_per_minute": 6000}]
    async with running_server() as server:
        config = make_config(tmp_path, server.base_url, prompts=60, samples=1, endpoints=eps)
        await run_sweep(config, progress=False)
    recs = responses(config)

    def at(rec: dict[str, Any], name: str) -> float:
        return datetime.fromisoformat(rec[name]).timestamp()

    for rec in recs:
        assert at(rec, "queued_at") <= at(rec, "admitted_at") <= at(rec, "started_at")
        assert at(rec, "started_at") <= at(rec, "finished_at")
    first = min(at(r, "started_at") for r in recs)
    early = sum(at(r, "started_at") < first + 0.2 for r in recs)
    assert early <= 20 + 20 + 3, early  # the bucket, plus 0.2 s at 100/s (ms rounding)
    last = max(at(r, "started_at") for r in recs)
    assert last - first >= (60 - 20) / 100 - 0.02  # the wire rate is the limit


async def test_a_server_whose_budget_runs_low_is_paced_to_its_refill(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Every answer says: 5 of 100 requests left, full again in 0.5 s, i.e. 190 back per
    # second, and so low that the engine slows to a quarter of that: 47.5 requests/s.
    from datetime import datetime

    from aiohttp import web

    answer = orjson.dumps(
        {"choices": [{"message": {"content": "ok"}, "finish_reason": "stop"}], "usage": {}}
    )
    low = {
        "x-ratelimit-limit-requests": "100",
        "x-ratelimit-remaining-requests": "5",
        "x-ratelimit-reset-requests": "500ms",
    }

    async def handle(request: web.Request) -> web.Response:
        return web.Response(body=answer, content_type="application/json", headers=low)

    app = web.Application()
    app.router.add_post("/v1/chat/completions", handle)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    base_url = f"http://127.0.0.1:{runner.addresses[0][1]}/v1"
    eps = [{"name": "low", "provider": "openai", "model": "m", "api_key_env": "COTAUDIT_LOW"}]
    monkeypatch.setenv("COTAUDIT_LOW", "k")
    try:
        config = make_config(tmp_path, base_url, prompts=40, samples=1, endpoints=eps)
        await run_sweep(config, progress=False)
    finally:
        await runner.cleanup()
    starts = sorted(datetime.fromisoformat(r["started_at"]).timestamp() for r in responses(config))
    assert len(starts) == 40
    # After the first answers, 30 requests at 47.5/s (a bucket of 9.5) take >= 0.43 s; with
    # no pace they would all leave within a few milliseconds.
    assert starts[-1] - starts[10] >= (30 - 10) / 47.5 - 0.02


def test_the_progress_line_shows_each_endpoints_adaptive_state() -> None:
    import io

    from runner.progress import Progress

    out = io.StringIO()
    progress = Progress(enabled=True, total=10, stream=out, clock=lambda: 1.0, tty=False)
    progress.details = lambda: "gpt: concurrency 37 (auto), requests paced to 3000/min"
    progress.refresh()
    assert (
        out.getvalue().strip().endswith("; gpt: concurrency 37 (auto), requests paced to 3000/min")
    )
