"""Sample replicate hints: a local sweep's self-consistency samples really differ.

The engine sends ``metadata.replicate`` (the sample index) to the project's own server; the
simulated reasoners vary their text by it. Without the hint the 5 samples of a prompt at
T=0.7 would be 5 copies of one text.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

from cotaudit.schema import read_records
from runner.config import config_from_mapping
from runner.engine import run_sweep
from runner.server.lifecycle import ServerThread
from runner.server.settings import ServerConfig


async def test_local_samples_at_positive_temperature_differ(
    tmp_path: Path, make_server: Callable[[ServerConfig], ServerThread]
) -> None:
    server = make_server(ServerConfig())
    config = config_from_mapping(
        {
            "run_dir": "run",
            "cache_dir": "cache",
            "task": {
                "kind": "prontoqa",
                "source": "generate",
                "n": 3,
                "seed": 11,
                "hops_min": 3,
                "hops_max": 4,
                "samples": 5,
                "sample_temperature": 0.7,
            },
            "endpoints": [
                {
                    "name": "local",
                    "provider": "local",
                    "model": "noisy:p=0.9",
                    "base_url": server.base_url,
                    "max_concurrency": 8,
                }
            ],
        },
        config_dir=tmp_path,
    )
    summary = await run_sweep(config, progress=False)
    assert summary.errors == 0
    samples: dict[str, list[tuple[int, str]]] = defaultdict(list)
    for record in read_records(config.run_dir / "results.jsonl"):
        if record["kind"] == "response" and record["condition"] == "sample":
            samples[record["problem_id"]].append((record["sample_index"], record["text"]))
    assert len(samples) == 3
    for problem_id, texts in samples.items():
        assert sorted(i for i, _ in texts) == [0, 1, 2, 3, 4], problem_id
        distinct = {text for _, text in texts}
        assert len(distinct) >= 2, f"{problem_id}: all 5 samples identical"
