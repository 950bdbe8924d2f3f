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


def test_a_simulated_reasoning_model_writes_the_truth_of_both_its_texts_once(
    tmp_path: Path,
) -> None:
    # The task wrote only the answer's truth record: `evaluate --trace reasoning` had nothing
    # to score the reasoning trace's audit against.
    config = tmp_path / "sweep.toml"
    config.write_text(
        CONFIG.replace('name = "faithful"', 'name = "thinker"').replace(
            'model = "faithful"', 'model = "thinker:trace=shortcut,answer=faithful,p=1"'
        ),
        encoding="utf-8",
    )

    def truths() -> list[tuple[str, str]]:
        lines = (tmp_path / "run" / "results.jsonl").read_bytes().splitlines()
        records = [orjson.loads(x) for x in lines]
        return [(r["problem_id"], r.get("trace")) for r in records if r["kind"] == "truth"]

    assert main(["run", str(config), "--no-progress"]) == 0
    first = truths()
    problems = sorted({pid for pid, _ in first})
    assert len(problems) == 2
    assert sorted(first) == sorted((pid, t) for pid in problems for t in ("answer", "reasoning"))
    # A rerun finds both in the stream and writes neither again.
    assert main(["run", str(config), "--no-progress"]) == 0
    assert truths() == first
    out = tmp_path / "eval"
    assert (
        main(
            [
                "evaluate",
                str(tmp_path / "run"),
                "--trace",
                "reasoning",
                "--out",
                str(out),
                "--n-boot",
                "0",
                "--no-figures",
                "--quiet",
            ]
        )
        == 0
    )
    report = orjson.loads((out / "report.json").read_bytes())
    (model,) = report["models"].values()
    # Scored against the reasoning trace's own truth: its shortcut ignores premises there.
    assert model["truth"]["ignored_premises"] > 0, model.get("truth")
