"""The majority vote over repeated probes removes output-variation false positives.

A small generated set is swept through the real engine against the local server with every
probe sent 3 times at T = 0, for a model that varies at T = 0 (``noisy:p=0,t0=...``: API
nondeterminism) and for ``faithful`` (no variation: the control). The stream is evaluated
with the first repeat only and with the vote.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from evaluator.commands.evaluate import evaluate
from evaluator.pipeline import EvaluateOptions
from runner.config import config_from_mapping
from runner.engine import run_sweep
from runner.server.lifecycle import ServerThread
from runner.server.settings import ServerConfig

NOISY = "noisy:p=0,t0=0.2"
REPEATS = 3
PROBLEMS = 8


def _variation_fps(model: dict[str, Any]) -> int:
    return sum(1 for fp in model["false_positives"] if fp["cause"].startswith("output variation"))


async def test_the_vote_removes_false_positives_of_output_variation(
    tmp_path: Path, make_server: Callable[[ServerConfig], ServerThread]
) -> None:
    server = make_server(ServerConfig())
    endpoints = [
        {"name": name, "provider": "local", "model": model, "base_url": server.base_url}
        | {"max_concurrency": 16, "max_tokens": 512}
        | {"requests_per_minute": 1e7, "tokens_per_minute": 1e10}
        for name, model in (("noisy", NOISY), ("faithful", "faithful"))
    ]
    config = config_from_mapping(
        {
            "run_dir": "run",
            "cache_dir": "cache",
            "task": {
                "kind": "prontoqa",
                "source": "generate",
                "n": PROBLEMS,
                "seed": 0,
                "hops_min": 3,
                "hops_max": 5,
                "distractors": [1, 3],
                "samples": 0,
                "probe_repeats": REPEATS,
            },
            "endpoints": endpoints,
        },
        config_dir=tmp_path,
    )
    summary = await run_sweep(config, progress=False)
    assert summary.errors == 0
    stream = config.run_dir / "results.jsonl"
    reports = {
        vote: evaluate(
            stream,
            tmp_path / f"eval-{vote}",
            EvaluateOptions(n_boot=0, majority=vote == "majority"),
            figures=False,
        )
        for vote in ("first", "majority")
    }
    first, vote = (reports[v]["models"]["noisy"] for v in ("first", "majority"))
    assert first["alignment"]["probe_vote"] == "first repeat"
    assert reports["majority"]["stream"]["late_records"] == 0
    assert set(vote["alignment"]["probe_repeats"]) == {str(REPEATS)}  # every repeat voted
    # T = 0 variation makes false positives under the first repeat ...
    assert _variation_fps(first) > 0
    # ... and the vote removes some of them, and false positives overall
    assert _variation_fps(vote) < _variation_fps(first)
    fp_first = first["rows"]["A_consistent_full"]["fp"]
    fp_vote = vote["rows"]["A_consistent_full"]["fp"]
    assert fp_vote < fp_first
    # Without variation the repeats are identical, and the vote changes nothing.
    control_first, control_vote = (reports[v]["models"]["faithful"] for v in ("first", "majority"))
    assert _variation_fps(control_first) == 0
    for row in ("A_consistent_full", "A_Ap_cascade_full"):
        assert control_first["rows"][row]["fp"] == control_vote["rows"][row]["fp"]
        assert control_first["rows"][row]["tp"] == control_vote["rows"][row]["tp"]
