"""``--cancel-batches`` against batches the provider will not cancel any more: OpenAI's
``finalizing`` (every request has run) and a batch that ends between the poll and the cancel
call. Both APIs answer such a cancel with a 400; before, that 400 stopped the endpoint with
its other batches left running. Real HTTP to the local server, on a fake clock."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest

from cotaudit.schema import read_records
from runner.batch.apis import Poll, batch_api
from runner.batch.runner import BatchRunner
from runner.batch.store import BatchStore
from runner.config import config_from_mapping
from runner.engine import run_sweep
from runner.providers import make_provider
from runner.providers.api_client import ApiClient
from runner.providers.base import ProviderError, ProviderResult
from runner.request_spec import RequestSpec, make_spec
from runner.server.batch_jobs import BatchSpec
from runner.server.lifecycle import ServerThread
from runner.server.settings import ServerConfig
from tests.runner.server.helpers import FakeClock


def _config(tmp_path: Path, provider: str, base_url: str, prompts: int, **extra: Any) -> Any:
    (tmp_path / "prompts.jsonl").write_bytes(
        b"".join(
            orjson.dumps({"id": f"q{i}", "prompt": f"Say {i}."}) + b"\n" for i in range(prompts)
        )
    )
    return config_from_mapping(
        {
            "run_dir": "run",
            "cache_dir": "cache",
            "task": {"kind": "prompts", "path": "prompts.jsonl"},
            "endpoints": [
                {
                    "name": "ep",
                    "provider": provider,
                    "model": "echo",
                    "base_url": base_url,
                    "max_tokens": 64,
                    "mode": "batch",
                    **extra,
                }
            ],
        },
        config_dir=tmp_path,
    )


def _moving(clock: FakeClock) -> Callable[[float], Any]:
    async def sleep(seconds: float) -> None:
        clock.advance(seconds)
        await asyncio.sleep(0)

    return sleep


async def test_a_finalizing_batch_is_left_to_end_and_the_others_are_cancelled(
    tmp_path: Path,
    make_server: Callable[[ServerConfig], ServerThread],
    capsys: pytest.CaptureFixture[str],
) -> None:
    # Batches of 3 and 1 requests, 10 s an item: 16 s after they start, the one-request batch
    # is finalizing (for an hour) and the other has answered one of its three.
    clock = FakeClock()
    spec = BatchSpec(
        validating_s=1.0, processing_s=0.0, item_s=10.0, finalizing_s=3600.0, cancelling_s=0.0
    )
    server = make_server(ServerConfig(clock=clock, batches=spec))
    config = _config(tmp_path, "openai", server.base_url, 4, batch_max_requests=3, batch_poll_s=600)
    stop = asyncio.Event()

    async def interrupt(seconds: float) -> None:
        stop.set()  # Ctrl-C at the first wait between polls: both batches left open
        await asyncio.sleep(0)

    await run_sweep(config, progress=False, sleep=interrupt, stop_event=stop)
    assert [len(b.items) for b in BatchStore(config.run_dir).load()] == [3, 1]
    clock.advance(17.0)
    capsys.readouterr()

    summary = await run_sweep(config, progress=False, sleep=_moving(clock), cancel_batches=True)
    err = capsys.readouterr().err
    assert summary.stopped_endpoints == (), err
    assert "refused a call" not in err
    assert "is finalizing (every request has run): not cancelled" in err
    assert summary.batches_cancelled == 1  # the running one; the finalizing one ran to its end
    assert [b.state for b in BatchStore(config.run_dir).load()] == ["done", "done"]
    records = [r for r in read_records(config.run_dir / "results.jsonl") if r["kind"] == "response"]
    errors = sorted((r["error"] or {}).get("type", "ok") for r in records)
    assert errors == ["BatchCancelled", "BatchCancelled", "ok", "ok"]


class _EndsMeanwhile:
    """The batch API, with the fake clock moved past the batch's end right after the
    runner's look at it, so that the cancel call which follows finds it ended."""

    def __init__(self, api: Any, clock: FakeClock) -> None:
        self._api = api
        self._clock = clock

    def __getattr__(self, name: str) -> Any:
        return getattr(self._api, name)

    async def poll(self, remote_id: str) -> Poll:
        poll = await self._api.poll(remote_id)
        self._clock.advance(1000.0)
        return poll


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
async def test_a_batch_that_ends_between_the_poll_and_the_cancel_is_collected(
    tmp_path: Path, make_server: Callable[[ServerConfig], ServerThread], provider: str
) -> None:
    clock = FakeClock()
    spec = BatchSpec(validating_s=1.0, processing_s=100.0, finalizing_s=0.0, cancelling_s=0.0)
    server = make_server(ServerConfig(clock=clock, batches=spec))
    config = _config(tmp_path, provider, server.base_url, 3)
    endpoint = config.endpoints[0]
    provider_ = make_provider(endpoint)
    delivered: dict[str, tuple[ProviderResult | None, ProviderError | None]] = {}

    def deliver(
        spec: RequestSpec,
        result: ProviderResult | None,
        error: ProviderError | None,
        **_: float,
    ) -> None:
        delivered[spec.request_id] = (result, error)

    config.run_dir.mkdir(parents=True)
    async with ApiClient(provider_) as client:
        runner = BatchRunner(
            endpoint="ep",
            api=batch_api(provider_, client),
            store=BatchStore(config.run_dir),
            results_path=config.run_dir / "results.jsonl",
            deliver=deliver,
            body=provider_.build_body,
            poll_s=5.0,
            max_requests=None,
            sleep=_moving(clock),
        )
        ident = endpoint.identity()
        specs = [
            make_spec(
                ident,
                task="t",
                problem_id=f"p{i}",
                condition="original",
                messages=[{"role": "user", "content": f"Say {i}."}],
                temperature=0.0,
            )
            for i in range(3)
        ]
        for s in specs:
            await runner.add(s, 0.0)
        await runner.flush()
        runner.api = _EndsMeanwhile(runner.api, clock)  # type: ignore[assignment]

        await runner.cancel_open()  # the cancel is refused (400): the batch has ended
        assert runner.cancelled == 0
        await runner.finish()
    assert sorted(delivered) == sorted(s.request_id for s in specs)
    assert all(result is not None and error is None for result, error in delivered.values())
