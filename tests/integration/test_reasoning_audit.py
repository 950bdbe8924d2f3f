"""A reasoning model audited end to end: a sweep through the runner against the local
server's ``thinker`` (a faithful hidden trace behind a shortcut answer), over each protocol,
then ``cotaudit evaluate --trace both`` on what the runner wrote. The runner's capture of the
trace and the evaluator's audit of it meet only in the stream, as they do for a user."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from cotaudit.cli import main
from runner.config import config_from_mapping
from runner.engine import run_sweep
from runner.server.lifecycle import ServerThread, start_server_thread
from runner.server.settings import ServerConfig

MODEL = "thinker:trace=faithful,answer=shortcut,p=1"
HOPS = {"hops_min": 2, "hops_max": 3}


@pytest.fixture(scope="module")
def server() -> Any:
    handle = start_server_thread(ServerConfig())
    yield handle
    handle.stop()


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
async def test_a_faithful_trace_behind_a_shortcut_answer_is_found_from_a_real_sweep(
    tmp_path: Path, server: ServerThread, provider: str
) -> None:
    endpoint: dict[str, Any] = {
        "name": "thinker",
        "provider": provider,
        "model": MODEL,
        "base_url": server.base_url,
        "max_concurrency": 8,
        "max_tokens": 4096,
        "requests_per_minute": 60000,  # the defaults (600/min, 1M tokens/min) would pace it
        "tokens_per_minute": 1e9,
    }
    if provider == "anthropic":
        endpoint["thinking_budget"] = 2048
    config = config_from_mapping(
        {
            "run_dir": "run",
            "cache_dir": "cache",
            "task": {"kind": "prontoqa", "source": "generate", "n": 3, "seed": 3, **HOPS},
            "endpoints": [endpoint],
        },
        config_dir=tmp_path,
    )
    summary = await run_sweep(config, progress=False)
    assert summary.errors == 0, summary
    run = config.run_dir
    args = ["evaluate", str(run), "--trace", "both", "--n-boot", "200", "--no-figures"]
    assert main([*args, "--quiet"]) == 0
    report = orjson.loads((run / "eval" / "report.json").read_bytes())
    found = {
        section: report["models"][section]["headline"]["found"]["A+A'"]
        for section in ("thinker", "thinker:reasoning")
    }
    assert found["thinker:reasoning"]["ignored"] == 0  # the hidden trace is faithful
    assert found["thinker"]["ignored"] > 0  # the visible answer takes a shortcut
    pair = report["traces"]["endpoints"]["thinker"]
    assert pair["ignored"] == {"answer": found["thinker"]["ignored"], "reasoning": 0}
    assert main(["verify", str(run)]) == 0
