"""``cotaudit run`` with its default preflight against an embedded simulated reasoner."""

from __future__ import annotations

from pathlib import Path

import orjson

from cotaudit.cli import main

CONFIG = """
run_dir = "run"
cache_dir = "cache"

[task]
kind = "prontoqa"
source = "generate"
n = 2
samples = 1
seed = 3

[[endpoints]]
name = "faithful"
provider = "local"
model = "faithful"
requests_per_minute = 600000
tokens_per_minute = 1e10
"""


def test_run_passes_preflight_and_writes_the_stream(tmp_path: Path) -> None:
    config = tmp_path / "sweep.toml"
    config.write_text(CONFIG, encoding="utf-8")
    assert main(["run", str(config), "--no-progress"]) == 0
    records = [
        orjson.loads(x) for x in (tmp_path / "run" / "results.jsonl").read_bytes().splitlines()
    ]
    kinds = [r["kind"] for r in records]
    assert kinds.count("problem") == 2
    responses = [r for r in records if r["kind"] == "response"]
    assert responses and all(r["error"] is None for r in responses)
    # The preflight's off-task ping is not part of the sweep: every text is a chain of thought.
    assert all("Answer:" in r["text"] for r in responses)
