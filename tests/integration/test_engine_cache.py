"""A warm-cache rerun sends nothing (the server's own counter says so), and an API key
given through its environment variable appears in no byte the run wrote."""

from __future__ import annotations

import secrets
from collections.abc import Callable
from pathlib import Path

import orjson
import pytest

from cotaudit.schema import read_records
from runner.config import SweepConfig, config_from_mapping
from runner.engine import run_sweep
from runner.server.lifecycle import ServerThread
from runner.server.settings import ServerConfig


def make_config(tmp_path: Path, run_dir: str, base_url: str, key_env: str | None) -> SweepConfig:
    prompts = tmp_path / "prompts.jsonl"
    if not prompts.exists():
        with prompts.open("wb") as f:
            for i in range(300):
                f.write(orjson.dumps({"id": f"q{i:03d}", "prompt": f"Say {i}."}) + b"\n")
    endpoint: dict[str, object] = {
        "name": "local",
        "provider": "local",
        "model": "echo",
        "base_url": base_url,
        "requests_per_minute": 1e7,
        "tokens_per_minute": 1e10,
        "max_concurrency": 16,
        "max_tokens": 32,
    }
    if key_env:
        endpoint["api_key_env"] = key_env
    return config_from_mapping(
        {
            "run_dir": run_dir,
            "cache_dir": "cache",
            "task": {"kind": "prompts", "path": "prompts.jsonl", "samples": 2},
            "endpoints": [endpoint, {**endpoint, "name": "missing", "model": "no-such-model"}],
        },
        config_dir=tmp_path,
    )


async def test_warm_cache_rerun_makes_zero_http_requests(
    tmp_path: Path, make_server: Callable[[ServerConfig], ServerThread]
) -> None:
    server = make_server(ServerConfig())
    cold = make_config(tmp_path, "cold", server.base_url, None)
    first = await run_sweep(cold, progress=False)
    assert first.http_requests > 0 and first.cache_hits == 0
    before = server.stats()["requests_total"]
    # A different run directory, same cache: every success comes from the cache.
    warm = make_config(tmp_path, "warm", server.base_url, None)
    second = await run_sweep(warm, progress=False)
    sent_for_errors = second.http_requests  # the 404s were never cached: they are re-sent
    assert second.cache_hits == 600
    assert server.stats()["requests_total"] - before == sent_for_errors == 600
    # Resuming in place: everything is in the stream (errors too), so nothing is sent, not
    # even the preflight's ping (a billed request at a provider) ...
    third = await run_sweep(warm, progress=False, preflight=True)
    assert third.http_requests == 0 and server.stats()["requests_total"] - before == 600
    # ... so a finished run reruns while its server is down.
    server.stop()
    assert (await run_sweep(warm, progress=False, preflight=True)).http_requests == 0
    texts = {
        r["request_id"].split("/", 1)[1]: r["text"]
        for r in read_records(warm.run_dir / "results.jsonl")
        if r["kind"] == "response" and r["cached"]
    }
    cold_texts = {
        r["request_id"].split("/", 1)[1]: r["text"]
        for r in read_records(cold.run_dir / "results.jsonl")
        if r["kind"] == "response" and r["error"] is None
    }
    assert texts == cold_texts


async def test_canary_key_appears_in_no_file_the_run_wrote(
    tmp_path: Path,
    make_server: Callable[[ServerConfig], ServerThread],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    canary = "sk-canary-" + secrets.token_hex(16)
    monkeypatch.setenv("COTAUDIT_CANARY_KEY", canary)
    # The server demands the key, so a success proves it was sent on the wire.
    server = make_server(ServerConfig(require_api_key=canary))
    config = make_config(tmp_path, "run", server.base_url, "COTAUDIT_CANARY_KEY")
    summary = await run_sweep(config, progress=True, preflight=False)
    assert summary.written == 1200 and summary.errors == 600  # the 404 endpoint
    files = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert any(p.parent == config.cache_dir for p in files)
    assert (config.run_dir / "manifest.json") in files
    for path in files:
        data = path.read_bytes()
        assert canary.encode() not in data, f"key leaked into {path}"
        assert canary[10:].encode() not in data, f"key fragment leaked into {path}"
    captured = capsys.readouterr()
    assert canary not in captured.out and canary not in captured.err
    manifest = orjson.loads((config.run_dir / "manifest.json").read_bytes())
    assert manifest["config"]["endpoints"][0]["api_key_env"] == "COTAUDIT_CANARY_KEY"
