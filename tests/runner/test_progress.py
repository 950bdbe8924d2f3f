"""The progress display: one labelled line per endpoint when a sweep has several, each with
its total, share, rate and time left; stage lines only when progress is shown."""

from __future__ import annotations

import io

from runner.manifest import config_differences
from runner.progress import Counts, Progress, Track


def test_a_sweep_of_several_endpoints_shows_one_labelled_line_each() -> None:
    now = [0.0]
    out = io.StringIO()
    gpt, claude = Counts(written=30, errors=2), Counts(written=10, cache_hits=4)
    progress = Progress(
        enabled=True,
        stream=out,
        clock=lambda: now[0],
        tty=False,
        tracks=[
            Track("gpt-4o", gpt, 90, lambda: "concurrency 40 (auto)"),
            Track("claude", claude, 10),
        ],
    )
    now[0] = 10.0
    progress.refresh()
    first, second = out.getvalue().splitlines()
    assert first == (
        "cotaudit [gpt-4o]: 30/90 records (33%), 3.0/s, 20 s left, retries 0, errors 2, "
        "cache hits 0, 10 s elapsed; concurrency 40 (auto)"
    )
    # Done: no time left to show.
    assert second.startswith("cotaudit [claude]: 10/10 records (100%), 1.0/s, retries 0")


def test_one_endpoint_keeps_one_unlabelled_line_and_stage_lines_obey_quiet() -> None:
    out = io.StringIO()
    progress = Progress(
        enabled=True, stream=out, clock=lambda: 1.0, tty=False, tracks=[Track("only", Counts())]
    )
    progress.say("preflight: checking 1 endpoint with one small request each ...")
    progress.refresh()
    lines = out.getvalue().splitlines()
    assert lines[0] == "cotaudit: preflight: checking 1 endpoint with one small request each ..."
    assert lines[1].startswith("cotaudit: 0 records")
    quiet = io.StringIO()
    muted = Progress(enabled=False, stream=quiet, tty=False)
    muted.say("preflight: ...")
    muted.refresh()
    assert quiet.getvalue() == ""


def test_a_changed_endpoint_list_is_named_by_endpoint_names_not_a_repr() -> None:
    from pathlib import Path

    from runner.config import SweepConfig, config_from_mapping

    def config(*names: str) -> SweepConfig:
        return config_from_mapping(
            {
                "run_dir": "r",
                "task": {"kind": "prompts", "path": "p.jsonl"},
                "endpoints": [{"name": n, "provider": "local", "model": "echo"} for n in names],
            },
            config_dir=Path("/nonexistent"),
        )

    old = {"output_config": config("a", "b").output_config()}
    text = config_differences(old, config("a"))
    assert text == "endpoints: endpoints a, b -> endpoints a"
