"""The run summary ``cotaudit run`` ends with: thousands separators as in the progress lines,
two lines that fit a terminal (what the stream holds, then how the run got there), and every
count a script may read always there under its label."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from cotaudit.cli import main
from runner.commands.run import report
from runner.engine import RunSummary

ARGS = argparse.Namespace(
    config="sweep.toml", model=None, run_dir=None, limit=None, max_concurrency=None,
    shard=None, no_cache=False, no_preflight=False, quiet=True,
)  # fmt: skip


def _summary(**changes: object) -> RunSummary:
    fields: dict[str, object] = {
        "run_dir": Path("runs/audit-openai"),
        "planned": 5433,
        "written": 5433,
        "skipped": 0,
        "cache_hits": 0,
        "http_requests": 5433,
        "retries": 386,
        "errors": 0,
        "elapsed_s": 1553.24,
    }
    fields.update(changes)
    return RunSummary(**fields)  # type: ignore[arg-type]


def test_a_complete_run_reads_in_two_short_lines_with_separators() -> None:
    summary = _summary()
    assert summary.lines() == (
        "5,433 planned, 5,433 written, 0 already done, 0 errors",
        "in 1,553.2 s: 0 from cache, 5,433 HTTP requests, 386 retries",
    )
    assert summary.line() == "; ".join(summary.lines())  # one line, for a log
    assert report(summary, ARGS) == [
        "cotaudit run: 5,433 planned, 5,433 written, 0 already done, 0 errors -> runs/audit-openai",
        "cotaudit run: in 1,553.2 s: 0 from cache, 5,433 HTTP requests, 386 retries",
    ]


def test_what_happened_is_said_only_when_it_did_on_the_second_line() -> None:
    summary = _summary(
        written=3730,
        pending=1703,
        interrupted=True,
        probes=12,
        batches=1,
        batches_cancelled=2,
        uncached=1500,
    )
    stream, traffic = summary.lines()
    assert stream == "5,433 planned, 3,730 written, 0 already done, 1,703 pending, 0 errors"
    assert traffic == (
        "in 1,553.2 s: 0 from cache, 5,433 HTTP requests, 386 retries, "
        "12 probes of down endpoints, 1 batch submitted, 2 batches cancelled, "
        "1,500 not cached (the store failed)"
    )
    # The advice is the next line's, once: why they are pending and how to resume.
    lines = report(summary, ARGS)
    assert sum("resume" in line for line in lines) == 1
    assert lines[-1] == (
        "cotaudit run: interrupted with 1,703 of 5,433 planned requests pending; "
        "rerun the same command to resume"
    )


def test_an_uncounted_plan_says_its_counts_are_lower_bounds() -> None:
    summary = _summary(planned=5120, written=4672, pending=448, interrupted=True, counted=False)
    assert summary.lines()[0] == (
        "5,120+ planned, 4,672 written, 0 already done, 448+ pending, 0 errors"
    )
    before = _summary(started=False, elapsed_s=0.04)
    assert report(before, ARGS)[0] == (
        "cotaudit run: stopped before the sweep started, 0.0 s -> runs/audit-openai"
    )


def test_cotaudit_run_ends_with_the_two_lines_fresh_and_resumed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A real run of the embedded reasoner, then its rerun from the stream."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    command = ["run", "--model", "local/faithful", "--limit", "40", "--quiet"]
    assert main(command) == 0
    first = capsys.readouterr().err.splitlines()[-2:]
    run_dir = tmp_path / "runs" / "local-faithful"
    assert first[0].startswith("cotaudit run: 1,") and first[0].endswith(f" -> {run_dir}")
    planned = first[0].removeprefix("cotaudit run: ").split(" planned")[0]
    assert first[0] == (
        f"cotaudit run: {planned} planned, {planned} written, 0 already done, 0 errors -> {run_dir}"
    )
    assert first[1].startswith("cotaudit run: in ")
    assert f": 0 from cache, {planned} HTTP requests, 0 retries" in first[1]
    assert main(command) == 0
    again = capsys.readouterr().err.splitlines()[-2:]
    assert again[0] == (
        f"cotaudit run: {planned} planned, 0 written, {planned} already done, 0 errors -> {run_dir}"
    )
    assert ": 0 from cache, 0 HTTP requests, 0 retries" in again[1]
    # Within 80 columns but for the run directory, which is the user's.
    for line in first + again:
        assert len(line.removesuffix(f" -> {run_dir}")) <= 80, line


@pytest.mark.parametrize("stop", [{"interrupted": True}, {"stopped_endpoints": ("ep",)}])
def test_a_run_stopped_with_batches_at_the_provider_says_they_run_on(
    stop: dict[str, object],
) -> None:
    # Ctrl-C stops polling, not the batches: the provider runs and bills them. Said with
    # "rerun to resume" alone, whoever stopped the run to stop spending was not told.
    summary = _summary(written=0, pending=5433, batches=3, batches_open=3, **stop)
    assert report(summary, ARGS)[-1] == (
        "cotaudit run: 3 batches at the provider are not collected: stopping the run does not "
        "stop them, and the provider runs and bills them all the same. Rerun the same command "
        "to collect the results, or cancel them with: cotaudit run sweep.toml --quiet "
        "--cancel-batches"
    )
    one = report(_summary(batches_open=1, **stop), ARGS)[-1]
    assert one.startswith("cotaudit run: 1 batch at the provider is not collected: stopping")
    assert one.endswith("bills it all the same. Rerun the same command to collect the "
                        "results, or cancel it with: cotaudit run sweep.toml --quiet "
                        "--cancel-batches")  # fmt: skip


def test_a_finished_run_says_nothing_of_batches() -> None:
    assert len(report(_summary(batches=3), ARGS)) == 2
