"""A batch's results are read as a stream: each result is written as its line arrives, so a
download holds a line, not the body (a batch of reasoning traces is gigabytes). A results
line that is not a result (a damaged or cut download) is downloaded again; one that stays so
stops the endpoint with the batch kept for a rerun, which writes the rest once."""

from __future__ import annotations

import asyncio
import dataclasses
import subprocess
import sys
import tracemalloc
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from runner.batch.store import BatchStore
from runner.engine import run_sweep
from runner.server.faults import FaultKind
from runner.server.lifecycle import ServerThread
from runner.server.settings import ServerConfig
from tests.integration.test_batch_mode import (
    PROMPTS,
    PROVIDERS,
    SPEC,
    config_for,
    fake_sleep,
    responses,
)
from tests.runner.server.helpers import FakeClock

REPO = Path(__file__).resolve().parents[2]
RESULTS_ROUTES = {
    "openai": "/v1/files/{file_id}/content",
    "anthropic": "/v1/messages/batches/{batch_id}/results",
}
LONG_ITEMS = 400
LONG_BYTES = 100_000  # each answer's text: 40 MB of results in all
# The server in a process of its own, so that tracemalloc counts the runner's memory only.
# Its batches end as they are created (no processing time), on its real clock.
SERVE = f"""
import sys
from runner.server.batch_jobs import BatchSpec
from runner.server.lifecycle import start_server_thread
from runner.server.settings import ServerConfig
spec = BatchSpec(validating_s=0, processing_s=0, finalizing_s=0, output_bytes={LONG_BYTES})
with start_server_thread(ServerConfig(batches=spec)) as server:
    print(server.base_url, flush=True)
    sys.stdin.read()
"""


@pytest.fixture(scope="module")
def long_answers() -> Iterator[str]:
    """The base URL of a server whose every answer is ``LONG_BYTES`` long."""
    server = subprocess.Popen(
        [sys.executable, "-c", SERVE],
        cwd=REPO,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert server.stdin is not None and server.stdout is not None and server.stderr is not None
    try:
        url = server.stdout.readline().strip()
        assert url, server.stderr.read()
        yield url
    finally:
        server.stdin.close()  # it stops at the end of its stdin
        server.wait(timeout=30)
        server.stdout.close()
        server.stderr.close()


async def no_wait(seconds: float) -> None:
    await asyncio.sleep(0)


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a_results_download_holds_a_line_not_the_body(
    tmp_path: Path, long_answers: str, provider: str
) -> None:
    config = config_for(
        tmp_path, "run", provider, long_answers, max_tokens=64, batch_max_requests=LONG_ITEMS
    )
    (tmp_path / "prompts.jsonl").write_bytes(
        b"".join(b'{"id": "q%03d", "prompt": "Say %d."}\n' % (i, i) for i in range(LONG_ITEMS))
    )
    # Without the response cache: its stores are buffered, and committed by a thread of its
    # own, which is the cache's memory, not the download's.
    tracemalloc.start()
    try:
        summary = await run_sweep(config, progress=False, sleep=no_wait, use_cache=False)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert summary.errors == 0 and summary.written == LONG_ITEMS and summary.batches == 1
    texts = [r["text"] for r in responses(config)]
    assert len(texts) == LONG_ITEMS and all(len(t) >= LONG_BYTES for t in texts)
    # Read whole, split and parsed, the body was held three times over (120 MB); read as
    # a stream, a megabyte of results at a time waits for the writer (about 4 MB in all).
    assert peak < LONG_ITEMS * LONG_BYTES / 4


def with_attempts(config: Any, attempts: int) -> Any:
    return dataclasses.replace(
        config, retry=dataclasses.replace(config.retry, max_attempts=attempts)
    )


@pytest.mark.parametrize("fault", [FaultKind.MALFORMED, FaultKind.TRUNCATED])
@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a_damaged_or_cut_results_download_is_downloaded_again(
    tmp_path: Path,
    make_server: Callable[[ServerConfig], ServerThread],
    provider: str,
    fault: FaultKind,
) -> None:
    clock = FakeClock()
    spec = dataclasses.replace(SPEC, results_faults=(fault,))
    server = make_server(ServerConfig(clock=clock, batches=spec))
    config = config_for(tmp_path, "run", provider, server.base_url, batch_max_requests=100)
    summary = await run_sweep(config, progress=False, sleep=fake_sleep(clock))
    assert summary.stopped_endpoints == () and summary.errors == 0
    assert summary.written == PROMPTS and summary.batches == 1
    # The download tried again is a retry of the run's, as a resent request is: it said
    # "0 retries" however long the damaged downloads were retried.
    assert summary.retries == 1
    # What the first download delivered before its damage is not written again.
    assert Counter(r["request_id"] for r in responses(config)) == Counter(
        f"ep/q{i:03d}/prompt/-/0" for i in range(PROMPTS)
    )
    stats = server.stats()
    assert stats["by_route"][RESULTS_ROUTES[provider]] == 2
    assert stats["faults"] == {fault.value: 1}
    [batch] = BatchStore(config.run_dir).load()
    assert batch.state == "done"


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_results_that_stay_malformed_stop_the_endpoint_and_a_rerun_writes_the_rest(
    tmp_path: Path,
    make_server: Callable[[ServerConfig], ServerThread],
    provider: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    clock = FakeClock()
    # Two batches of 15; the first one's results are damaged in both of its downloads.
    spec = dataclasses.replace(SPEC, results_faults=(FaultKind.MALFORMED, FaultKind.MALFORMED))
    server = make_server(ServerConfig(clock=clock, batches=spec))
    config = with_attempts(
        config_for(tmp_path, "run", provider, server.base_url, batch_max_requests=15), 2
    )
    summary = await run_sweep(config, progress=False, sleep=fake_sleep(clock))
    assert summary.stopped_endpoints == ("ep",) and summary.errors == 0
    assert summary.retries == 1  # two attempts (max_attempts = 2), the second a retry
    err = capsys.readouterr().err
    first, second = BatchStore(config.run_dir).load()
    assert f"the results of batch {first.remote_id} (ep-00001) could not be read" in err
    assert "line 8 of the results is not JSON" in err and "rerun to resume" in err
    assert "refused" not in err  # the provider refused nothing: its file could not be read
    # The other batch is collected; the damaged one stays "ended", with what its downloads
    # read before the damage written once (the lines before the damaged one).
    assert (first.state, second.state) == ("ended", "done")
    ids = Counter(r["request_id"] for r in responses(config))
    assert set(ids.values()) == {1} and len(ids) == 15 + 7

    summary = await run_sweep(config, progress=False, sleep=fake_sleep(clock))
    assert summary.stopped_endpoints == () and summary.errors == 0
    assert summary.batches == 0 and summary.written == 15 - 7  # nothing sent again
    ids = Counter(r["request_id"] for r in responses(config))
    assert len(ids) == PROMPTS and set(ids.values()) == {1}
    assert [b.state for b in BatchStore(config.run_dir).load()] == ["done", "done"]
