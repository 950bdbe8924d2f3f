"""``cotaudit run CONFIG --cancel-batches`` sends nothing new: no preflight ping either (an
online completion, billed as any other), and walks no plan, whatever the other flags."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

import orjson
import pytest

from cotaudit import cli
from runner.batch.store import BatchStore
from runner.config import load_config
from runner.engine import run_sweep
from runner.server.batch_jobs import BatchSpec
from runner.server.lifecycle import ServerThread
from runner.server.settings import ServerConfig

PROMPTS = 30
# Long enough that the batches are still open when they are cancelled; a cancel takes effect
# at once, so the cancelling run's polls (batch_poll_s) find them ended at the first look.
SPEC = BatchSpec(validating_s=1.0, processing_s=3600.0, finalizing_s=1.0, cancelling_s=0.0)


def _config(tmp_path: Path, base_url: str) -> Path:
    (tmp_path / "prompts.jsonl").write_bytes(
        b"".join(
            orjson.dumps({"id": f"q{i:03d}", "prompt": f"Say {i}."}) + b"\n" for i in range(PROMPTS)
        )
    )
    path = tmp_path / "sweep.toml"
    path.write_text(
        f"""run_dir = "run"
cache_dir = "cache"

[task]
kind = "prompts"
path = "prompts.jsonl"

[[endpoints]]
name = "ep"
provider = "openai"
model = "echo"
base_url = "{base_url}"
api_key_env = "COTAUDIT_CANCEL_TEST_KEY"
max_tokens = 64
mode = "batch"
batch_poll_s = 0.01
batch_max_requests = 12
""",
        encoding="utf-8",
    )
    return path


@pytest.mark.parametrize("flags", [[], ["--quiet"]])
def test_cancel_batches_sends_no_preflight_ping(
    tmp_path: Path,
    make_server: Callable[[ServerConfig], ServerThread],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    flags: list[str],
) -> None:
    monkeypatch.setenv("COTAUDIT_CANCEL_TEST_KEY", "key")
    server = make_server(ServerConfig(batches=SPEC))
    toml = _config(tmp_path, server.base_url)
    config = load_config(str(toml))
    stop = asyncio.Event()

    async def interrupt(seconds: float) -> None:
        stop.set()  # Ctrl-C at the first wait between polls: the batches are left open
        await asyncio.sleep(0)

    asyncio.run(run_sweep(config, progress=False, sleep=interrupt, stop_event=stop))
    assert [b.open for b in BatchStore(config.run_dir).load()] == [True] * 3
    before = server.stats()["by_route"]

    assert cli.main(["run", str(toml), "--cancel-batches", *flags]) == 3
    err = capsys.readouterr().err
    assert "3 batches cancelled" in err, err
    after = server.stats()["by_route"]
    sent = {route: n - before.get(route, 0) for route, n in after.items()}
    assert sent.get("/v1/chat/completions", 0) == 0, sent  # no online request
    assert sent.get("/v1/batches/{batch_id}/cancel") == 3
    assert sent.get("/v1/batches", 0) == 0  # no new batch
    assert "preflight" not in err
    assert "planning" not in err  # no plan is walked either
