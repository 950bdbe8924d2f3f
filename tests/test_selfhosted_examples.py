"""The self-hosted examples run as written against a server that behaves like theirs: the
local server in llama.cpp's "answer any name with the loaded model" mode, reached over
loopback at the example's endpoint (``base_urls``), with the task cut to one problem."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path

import pytest

from cotaudit.schema import read_records
from runner.config import load_config
from runner.engine import run_sweep
from runner.server.lifecycle import ServerThread
from runner.server.settings import ServerConfig

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


@pytest.mark.parametrize("name", ["ollama.toml", "llamacpp.toml", "vllm.toml"])
async def test_self_hosted_example_runs_against_a_server_like_its_own(
    tmp_path: Path,
    make_server: Callable[[ServerConfig], ServerThread],
    capsys: pytest.CaptureFixture[str],
    name: str,
) -> None:
    config = load_config(EXAMPLES / name)
    assert all(ep.api_key_env is None for ep in config.endpoints)  # no dummy key variables
    config = dataclasses.replace(
        config,
        run_dir=tmp_path / "run",
        cache_dir=tmp_path / "cache",
        task={**config.task, "n": 1, "samples": 2},
    )
    server = make_server(ServerConfig(loaded_model="thinker"))
    summary = await run_sweep(
        config,
        progress=False,
        preflight=True,
        base_urls={ep.name: server.base_url for ep in config.endpoints},
    )
    assert summary.errors == 0 and summary.written > 0
    err = capsys.readouterr().err
    assert "'thinker' answers requests for" in err  # preflight says which model answers
    records = [r for r in read_records(config.run_dir / "results.jsonl") if r["kind"] == "response"]
    assert {r["served_model"] for r in records} == {"thinker"}
    assert all(r["reasoning"] for r in records)  # the trace, apart from the answer
    samples = [r for r in records if r["condition"] == "sample"]
    assert len({r["params"]["seed"] for r in samples}) == len(samples) == 2
