"""``--quiet`` with the preflight on does not count the plan before the sweep: the preflight
needs only which endpoints have a request left, and each endpoint's walk stops at its first
one. A huge plan starts at once (pinged, then answered) instead of being counted first, with
nothing on screen."""

from __future__ import annotations

import asyncio
from pathlib import Path

import orjson

from runner.config import SweepConfig, config_from_mapping
from runner.engine import RunSummary, run_sweep
from runner.server.lifecycle import ServerThread

HUGE = 10**8  # problems: far more than a test could count (the generator is lazy)


def _config(tmp_path: Path, base_url: str, n: int) -> SweepConfig:
    endpoint = {
        "name": "a",
        "provider": "local",
        "model": "faithful",
        "base_url": base_url,
        "requests_per_minute": 1e7,
        "tokens_per_minute": 1e10,
        "max_concurrency": 8,
    }
    return config_from_mapping(
        {
            "run_dir": "run",
            "cache_dir": "cache",
            "task": {"kind": "prontoqa", "source": "generate", "n": n, "seed": 0},
            "endpoints": [endpoint],
        },
        config_dir=tmp_path,
    )


async def _run_until_answered(config: SweepConfig, responses: int) -> RunSummary:
    """Run ``config`` until its stream holds ``responses`` more responses, then stop it."""
    results = config.run_dir / "results.jsonl"
    if results.exists():
        responses += results.read_bytes().count(b'"response"')
    stop = asyncio.Event()

    async def stop_after_some_responses() -> None:
        while not (results.exists() and results.read_bytes().count(b'"response"') >= responses):
            await asyncio.sleep(0.01)
        stop.set()

    watcher = asyncio.create_task(stop_after_some_responses())
    # Bounded only so that a run that counts the whole plan first fails instead of hanging.
    summary = await asyncio.wait_for(
        run_sweep(config, progress=False, preflight=True, stop_event=stop), timeout=60
    )
    await watcher
    return summary


async def test_a_quiet_run_with_preflight_starts_a_huge_plan_without_counting_it(
    tmp_path: Path, local_server: ServerThread
) -> None:
    config = _config(tmp_path, local_server.base_url, HUGE)
    before = local_server.stats()["by_route"]
    summary = await _run_until_answered(config, 20)
    assert summary.interrupted and not summary.counted
    manifest = orjson.loads((config.run_dir / "manifest.json").read_bytes())
    assert "a" in manifest["served"]  # the preflight pinged the endpoint and recorded it
    assert "planned_requests" not in manifest  # not counted, so not claimed
    assert local_server.stats()["by_route"] != before

    # Resumed: the stream holds answers; the walk stops at the first request left to send.
    again = await _run_until_answered(config, 20)
    assert again.interrupted and again.started and again.skipped > 0
