"""A run that does not count its plan before the sweep (``--quiet --no-preflight``): it
records ``planned_requests`` once its dispatchers have walked the plan, or, stopped before,
once it has counted a small plan on its way out; a large one it does not walk to the end
(Ctrl-C exits promptly on a plan of 10^8 problems)."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import io
import signal
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from cotaudit.schema import read_records
from runner.commands.run import report
from runner.config import SweepConfig, config_from_mapping
from runner.engine import EXIT_COUNT_MAX_REQUESTS, RunSummary, iter_plan, run_sweep
from runner.manifest import Shard
from runner.server.lifecycle import ServerThread
from tests.ctrl_c import sigint_as_a_terminal_sends_it

REPO = Path(__file__).resolve().parents[2]
# Plenty to walk: far more than a test could count before it ended. The generator is lazy,
# so only what the run walks is built.
HUGE = 10**8


def _config(tmp_path: Path, base_url: str, *, n: int, names: tuple[str, ...]) -> SweepConfig:
    endpoints = [
        {
            "name": name,
            "provider": "local",
            "model": "faithful",
            "base_url": base_url,
            "requests_per_minute": 1e7,
            "tokens_per_minute": 1e10,
            "max_concurrency": 8,
        }
        for name in names
    ]
    return config_from_mapping(
        {
            "run_dir": "run",
            "cache_dir": "cache",
            "task": {"kind": "prontoqa", "source": "generate", "n": n, "seed": 0},
            "endpoints": endpoints,
        },
        config_dir=tmp_path,
    )


def _manifest(config: SweepConfig) -> dict[str, object]:
    data = orjson.loads((config.run_dir / "manifest.json").read_bytes())
    assert isinstance(data, dict)
    return data


async def test_an_uncounted_run_records_the_plan_its_dispatchers_walked(
    tmp_path: Path, local_server: ServerThread
) -> None:
    counted = _config(tmp_path / "counted", local_server.base_url, n=3, names=("a", "b"))
    await run_sweep(counted, progress=True, progress_stream=io.StringIO())
    expected = _manifest(counted)["planned_requests"]

    quiet = _config(tmp_path / "quiet", local_server.base_url, n=3, names=("a", "b"))
    summary = await run_sweep(quiet, progress=False, preflight=False)
    assert summary.counted and not summary.interrupted
    assert _manifest(quiet)["planned_requests"] == expected
    assert expected == {"a": summary.planned // 2, "b": summary.planned // 2}


async def test_an_uncounted_shard_records_its_own_share(
    tmp_path: Path, local_server: ServerThread
) -> None:
    config = _config(tmp_path, local_server.base_url, n=3, names=("a",))
    summary = await run_sweep(config, progress=False, preflight=False, shard=Shard(1, 3))
    responses = [
        r for r in read_records(config.run_dir / "results.jsonl") if r["kind"] == "response"
    ]
    assert _manifest(config)["planned_requests"] == {"a": len(responses)} == {"a": summary.planned}


async def test_an_uncounted_rerun_leaves_a_manifest_without_the_field_as_it_is(
    tmp_path: Path, local_server: ServerThread
) -> None:
    # A manifest written before planned_requests existed: an evaluation of it recorded it
    # by value, and a rerun that added the field would make that evaluation fail to verify.
    config = _config(tmp_path, local_server.base_url, n=2, names=("a",))
    await run_sweep(config, progress=False, preflight=False)
    path = config.run_dir / "manifest.json"
    old = _manifest(config)
    del old["planned_requests"]
    path.write_bytes(orjson.dumps(old, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS))
    before = path.read_bytes()
    again = await run_sweep(config, progress=False, preflight=False)
    assert again.counted and again.written == 0
    assert path.read_bytes() == before


async def test_a_stop_before_the_plan_is_walked_ends_the_run_without_counting_it(
    tmp_path: Path, local_server: ServerThread
) -> None:
    config = _config(tmp_path, local_server.base_url, n=HUGE, names=("a",))
    results = config.run_dir / "results.jsonl"
    stop = asyncio.Event()

    async def stop_after_some_responses() -> None:
        while not (results.exists() and results.read_bytes().count(b'"response"') >= 20):
            await asyncio.sleep(0.01)
        stop.set()

    watcher = asyncio.create_task(stop_after_some_responses())
    # Bounded only so that a run that walks the whole plan fails instead of hanging.
    summary = await asyncio.wait_for(
        run_sweep(config, progress=False, preflight=False, stop_event=stop), timeout=120
    )
    await watcher
    assert summary.interrupted and not summary.counted
    assert 0 < summary.written <= summary.planned < HUGE
    assert "not counted" in summary.interrupted_line()
    assert f"{summary.planned:,}+ planned" in summary.line()
    assert "planned_requests" not in _manifest(config)  # not known, so not claimed


async def test_a_small_uncounted_plan_stopped_part_way_is_counted_on_the_way_out(
    tmp_path: Path, local_server: ServerThread
) -> None:
    # Small enough to count at once: the pending count is exact, and the manifest records
    # the plan, so that an evaluation of the stream says it is incomplete.
    config = _config(tmp_path, local_server.base_url, n=200, names=("a",))
    assert len(list(iter_plan(config.build_task(), config.endpoints[0].identity()))) < (
        EXIT_COUNT_MAX_REQUESTS
    )
    results = config.run_dir / "results.jsonl"
    stop = asyncio.Event()

    async def stop_after_some_responses() -> None:
        while not (results.exists() and results.read_bytes().count(b'"response"') >= 20):
            await asyncio.sleep(0.01)
        stop.set()

    watcher = asyncio.create_task(stop_after_some_responses())
    summary = await run_sweep(config, progress=False, preflight=False, stop_event=stop)
    await watcher
    planned = sum(1 for _ in iter_plan(config.build_task(), config.endpoints[0].identity()))
    written = [r for r in read_records(results) if r["kind"] == "response"]
    assert summary.interrupted and summary.counted
    assert summary.planned == planned and summary.pending == planned - len(written) > 0
    assert _manifest(config)["planned_requests"] == {"a": planned}


def test_a_stopped_endpoint_of_an_uncounted_run_says_the_rest_is_pending() -> None:
    args = argparse.Namespace(
        config="sweep.toml", model=None, run_dir=None, limit=None, max_concurrency=None,
        shard=None, no_cache=False, no_preflight=True, quiet=True,
    )  # fmt: skip
    summary = RunSummary(
        run_dir=Path("run"), planned=512, written=3, skipped=0, cache_hits=0, http_requests=3,
        retries=0, errors=0, elapsed_s=1.0, stopped_endpoints=("a",), pending=509,
        counted=False,
    )  # fmt: skip
    last = report(summary, args)[-1]
    assert "stopped sending to a; the rest of the plan (not counted" in last
    assert "509" not in last


@pytest.mark.slow
def test_ctrl_c_on_an_uncounted_huge_plan_exits_at_once_and_the_run_resumes(
    tmp_path: Path, local_server: ServerThread
) -> None:
    config = tmp_path / "huge.toml"
    config.write_text(
        f"""run_dir = "run"
cache_dir = "cache"
[task]
kind = "prontoqa"
source = "generate"
n = {HUGE}
seed = 0
[[endpoints]]
name = "a"
provider = "local"
model = "faithful"
base_url = "{local_server.base_url}"
requests_per_minute = 1e7
tokens_per_minute = 1e10
max_concurrency = 8
""",
        encoding="utf-8",
    )
    results = tmp_path / "run" / "results.jsonl"
    command = [sys.executable, "-m", "cotaudit", "run", str(config), "--quiet", "--no-preflight"]

    def interrupted_run() -> str:
        before = results.read_bytes().count(b'"response"') if results.exists() else 0
        child = subprocess.Popen(
            command,
            cwd=REPO,
            stderr=subprocess.PIPE,
            text=True,
            preexec_fn=sigint_as_a_terminal_sends_it,
        )
        try:
            while not (results.exists() and results.read_bytes().count(b'"response"') > before):
                assert child.poll() is None, child.communicate()[1]
                with contextlib.suppress(subprocess.TimeoutExpired):
                    child.wait(timeout=0.05)
            child.send_signal(signal.SIGINT)
            # A run that counted the plan on its way out would take hours here.
            err = child.communicate(timeout=60)[1]
        finally:
            if child.poll() is None:
                child.kill()
                child.communicate()
        assert child.returncode == 130, err
        return err

    first = interrupted_run()
    assert "rest of the plan pending (not counted" in first, first
    second = interrupted_run()
    assert " already done" in second and " 0 already done" not in second, second
    ids = [r["request_id"] for r in read_records(results) if r["kind"] == "response"]
    assert len(ids) == len(set(ids))
