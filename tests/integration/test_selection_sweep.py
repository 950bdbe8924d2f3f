"""The selection study end to end: generated tasks -> local server -> engine -> evaluation."""

from __future__ import annotations

import time
from pathlib import Path

import orjson
import pytest

from cotaudit.cli import main
from cotaudit.commands.demo_selection import DEMO_DEPLOYMENTS, demo_config, run_selection_demo
from evaluator.selection_report import FIGURES
from runner.server.deployments import closed_form, mix_of
from runner.tasks.procedural.task import ProceduralTask


@pytest.mark.slow
def test_demo_runs_the_whole_study_and_the_command_agrees(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "demo"
    started = time.monotonic()
    assert run_selection_demo(out, quiet=True) == 0
    assert time.monotonic() - started < 60
    # --quiet drops the progress, not the results (as for the grounding demo).
    printed = capsys.readouterr().out
    assert "Closed-form predictions on this task mix:" in printed
    assert all(name in printed for name in DEMO_DEPLOYMENTS) and "\nwrote " in printed

    config = demo_config(out)
    eval_dir = config.run_dir / "eval"
    data = orjson.loads((eval_dir / "selection.json").read_bytes())
    task = config.build_task()
    assert isinstance(task, ProceduralTask)
    problems = list(task.problems())
    mix = mix_of(problems)
    deployments = data["deployments"]
    assert list(deployments) == list(DEMO_DEPLOYMENTS)
    for name, params in DEMO_DEPLOYMENTS.items():
        row = deployments[name]
        assert row["n"] == len(problems)  # every trace scored: nothing failed or unreadable
        assert data["excluded"][name] == {}
        assert row["ceiling"] is params.ceiling
        if not params.ceiling:
            lo, hi = row["delta_ci"]
            assert lo <= closed_form(params, mix).delta <= hi, name
    assert data["ceiling"] == ["sim-ceiling"]
    assert data["pooled"]["deployments"] == ["sim-careful", "sim-sloppy", "sim-shortcut"]
    assert set(data["strata"]["sim-careful"]["strata"]) == {"1", "2", "3", "4", "5"}
    assert data["preserving"]["sim-ceiling"] == {"n": len(problems), "agree": len(problems)}
    for name in FIGURES:
        assert (eval_dir / name).is_file()
    md = (eval_dir / "selection.md").read_text(encoding="utf-8")
    assert "## By task family" in md and "| sim-shortcut | circuit | 100 |" in md
    assert "sim-ceiling: 300 of 300 readable answers unchanged" in md

    # The command on the same run directory computes the same statistics.
    again = tmp_path / "again.json"
    assert main(["selection", str(config.run_dir), "--json", str(again), "--no-figures"]) == 0
    printed = capsys.readouterr().out
    assert "sim-careful" in printed and "Ceiling controls" in printed
    assert orjson.loads(again.read_bytes())["deployments"] == deployments

    # Rerunning the demo resumes the complete run: no new records, same numbers.
    lines = (config.run_dir / "results.jsonl").read_bytes().count(b"\n")
    assert run_selection_demo(out, quiet=True) == 0
    assert (config.run_dir / "results.jsonl").read_bytes().count(b"\n") == lines
    rerun = orjson.loads((eval_dir / "selection.json").read_bytes())
    assert rerun["deployments"] == deployments
