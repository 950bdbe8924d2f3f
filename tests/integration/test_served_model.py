"""Issue 15, "wrong today": seeds per replicate, what the server says it served, preflight's
reading of ``/v1/models``. Against the local server over loopback."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest

from cotaudit.errors import UsageError
from cotaudit.schema import read_records
from runner.config import EndpointConfig, config_from_mapping
from runner.engine import run_sweep
from runner.preflight import next_page_after, read_listing, read_pages
from runner.providers import make_provider
from runner.providers.api_client import ApiClient
from runner.server.lifecycle import ServerThread
from runner.server.settings import ServerConfig

TASK = {
    "kind": "prontoqa",
    "source": "generate",
    "n": 2,
    "seed": 11,
    "hops_min": 3,
    "hops_max": 3,
    "samples": 4,
    "sample_temperature": 0.7,
}


def sweep(tmp_path: Path, run: str, endpoint: dict[str, Any], task: Any = None) -> Any:
    return config_from_mapping(
        {
            "run_dir": run,
            "cache_dir": "cache",
            "task": task or TASK,
            "endpoints": [
                {
                    "name": "ep",
                    "max_concurrency": 4,
                    "requests_per_minute": 60000,
                    "tokens_per_minute": 1e9,
                    **endpoint,
                }
            ],
        },
        config_dir=tmp_path,
    )


def responses(config: Any) -> list[dict[str, Any]]:
    return [r for r in read_records(config.run_dir / "results.jsonl") if r["kind"] == "response"]


async def test_samples_with_a_seed_are_distinct_draws(
    tmp_path: Path, make_server: Callable[[ServerConfig], ServerThread]
) -> None:
    # An OpenAI-protocol endpoint gets no replicate hint: only the seed can tell samples
    # apart. With the endpoint's seed on every sample they were one request sent 4 times.
    server = make_server(ServerConfig())
    config = sweep(
        tmp_path,
        "run",
        {"provider": "openai", "model": "noisy:p=0.9", "base_url": server.base_url, "seed": 7},
    )
    summary = await run_sweep(config, progress=False)
    assert summary.errors == 0
    samples: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for record in responses(config):
        if record["condition"] == "sample":
            samples[record["problem_id"]].append(record)
        else:
            assert record["params"]["seed"] == 7  # T = 0 keeps the endpoint's seed
    assert len(samples) == 2
    for problem_id, records in samples.items():
        seeds = sorted(r["params"]["seed"] for r in records)
        assert seeds == [7, 8, 9, 10], problem_id
        assert len({r["text"] for r in records}) >= 2, f"{problem_id}: all samples identical"
        assert len({r["cache_key"] for r in records}) == 4


def echo_task(tmp_path: Path) -> dict[str, Any]:
    (tmp_path / "prompts.jsonl").write_bytes(
        b"".join(orjson.dumps({"id": f"p{i}", "prompt": f"Say {i}."}) + b"\n" for i in range(3))
    )
    return {"kind": "prompts", "path": "prompts.jsonl"}


async def test_records_say_what_the_server_served(
    tmp_path: Path, make_server: Callable[[ServerConfig], ServerThread]
) -> None:
    server = make_server(ServerConfig())
    config = sweep(
        tmp_path,
        "run",
        {"provider": "openai", "model": "echo", "base_url": server.base_url},
        echo_task(tmp_path),
    )
    await run_sweep(config, progress=False, preflight=True)
    records = responses(config)
    assert len(records) == 3
    fingerprints = {r["system_fingerprint"] for r in records}
    assert {r["served_model"] for r in records} == {"echo"}
    assert len(fingerprints) == 1 and next(iter(fingerprints)).startswith("fp_")
    manifest = orjson.loads((config.run_dir / "manifest.json").read_bytes())
    [found] = manifest["served"]["ep"]
    assert found["served_model"] == "echo" and "echo" in found["listed"]
    assert found["system_fingerprint"] in fingerprints and not found["answers_any_name"]
    # A cache hit keeps what served it.
    rerun = sweep(
        tmp_path,
        "run2",
        {"provider": "openai", "model": "echo", "base_url": server.base_url},
        echo_task(tmp_path),
    )
    summary = await run_sweep(rerun, progress=False)
    assert summary.cache_hits == 3
    assert {r["served_model"] for r in responses(rerun)} == {"echo"}


async def test_a_restart_with_another_loaded_model_is_named_and_revision_separates(
    tmp_path: Path,
    make_server: Callable[[ServerConfig], ServerThread],
    capsys: pytest.CaptureFixture[str],
) -> None:
    # llama.cpp-like: any name is answered by the loaded model; the answer echoes the name.
    first = make_server(ServerConfig(loaded_model="faithful"))
    endpoint = {"provider": "openai", "model": "my-model", "base_url": first.base_url}
    config = sweep(tmp_path, "run1", endpoint)
    await run_sweep(config, progress=False, preflight=True)
    err = capsys.readouterr().err
    assert "'faithful' answers requests for 'my-model'" in err
    assert "answers any name with the model it has loaded" in err
    assert {r["served_model"] for r in responses(config)} == {"faithful"}
    first.stop()

    second = make_server(ServerConfig(loaded_model="shortcut:p=1"))
    # One URL for both (a restart keeps the port): the config names the first server's URL,
    # and the second server answers there (base_urls points the run at it).
    same_url = sweep(tmp_path, "run3", endpoint)
    summary = await run_sweep(
        same_url, progress=False, preflight=True, base_urls={"ep": second.base_url}
    )
    err = capsys.readouterr().err
    assert summary.cache_hits == summary.planned > 0
    assert "the cache holds answers served by 'faithful'" in err
    assert "now serves 'shortcut:p=1'" in err and "Set revision" in err

    revised = sweep(tmp_path, "run4", {**endpoint, "revision": "b"})
    summary = await run_sweep(
        revised, progress=False, preflight=True, base_urls={"ep": second.base_url}
    )
    err = capsys.readouterr().err
    assert summary.cache_hits == 0 and summary.errors == 0
    assert "the cache holds" not in err
    assert {r["served_model"] for r in responses(revised)} == {"shortcut:p=1"}


async def test_preflight_names_an_unknown_model_and_what_the_server_lists(
    tmp_path: Path, make_server: Callable[[ServerConfig], ServerThread]
) -> None:
    server = make_server(ServerConfig())
    config = sweep(
        tmp_path,
        "run",
        {"provider": "openai", "model": "no-such-model", "base_url": server.base_url},
    )
    with pytest.raises(UsageError) as info:
        await run_sweep(config, progress=False, preflight=True)
    message = str(info.value)
    assert "model 'no-such-model' is unknown" in message and "'faithful'" in message
    assert not config.run_dir.exists()


async def test_preflight_accepts_a_name_with_options_the_list_lacks(
    tmp_path: Path,
    make_server: Callable[[ServerConfig], ServerThread],
    capsys: pytest.CaptureFixture[str],
) -> None:
    server = make_server(ServerConfig())
    config = sweep(
        tmp_path,
        "run",
        {"provider": "openai", "model": "shortcut:p=0.3", "base_url": server.base_url},
    )
    summary = await run_sweep(config, progress=True, preflight=True)
    err = capsys.readouterr().err
    assert summary.errors == 0
    assert "endpoint 'ep': 'shortcut:p=0.3' answers" in err
    assert "any name" not in err
    # Quiet (--quiet): the expected model answering is no news; the line is left out.
    await run_sweep(config, progress=False, preflight=True)
    assert "preflight" not in capsys.readouterr().err


async def test_preflight_reads_every_page_of_an_anthropic_listing(
    make_server: Callable[[ServerConfig], ServerThread],
) -> None:
    # Anthropic's listing is paged (has_more, last_id); OpenAI's comes whole. Pages of 4
    # make the local server's models three pages: all of them are read, in order.
    server = make_server(ServerConfig())
    whole = make_provider(EndpointConfig("o", "openai", "echo", base_url=server.base_url))
    paged = make_provider(EndpointConfig("a", "anthropic", "echo", base_url=server.base_url))
    async with ApiClient(whole) as client:
        expected = await read_pages(client)
    assert len(expected) > 8  # more than two pages of 4
    async with ApiClient(paged) as client:
        assert await read_pages(client, page_size=4) == expected
        last = expected[-1]  # on the last page: known from the list, not looked up alone
        ids, known, error = await read_listing(client, last, page_size=4)
    assert (ids, known, error) == (expected, True, None)
    assert server.stats()["by_route"]["/v1/models"] == 1 + 3 + 3


def test_a_listing_that_repeats_its_last_id_is_not_followed_again() -> None:
    page = {"data": [{"id": "m"}], "has_more": True, "last_id": "m"}
    assert next_page_after(page, set()) == "m"
    assert next_page_after(page, {"m"}) is None  # the same page again: stop
    assert next_page_after({**page, "has_more": False}, set()) is None
    assert next_page_after({"object": "list", "data": []}, set()) is None  # OpenAI's shape
