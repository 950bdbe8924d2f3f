"""``cotaudit verify`` where there is no evaluation to check: one message saying what stands
there instead and what to do, exit 2, and the run left as it was."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from cotaudit.cli import main
from tests.evaluator.test_pipeline import records, write_stream


@pytest.fixture
def run(tmp_path: Path) -> Path:
    run = tmp_path / "run"
    run.mkdir()
    write_stream(run / "results.jsonl", records())
    return run


def _verify(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    assert main(["verify", *args]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and err.count("\n") == 1
    return err


def test_a_run_never_evaluated_is_named_with_the_command_to_run(
    run: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    err = _verify(capsys, str(run))
    assert f"{run}: not evaluated: there is no {run / 'eval' / 'certificates.jsonl'}" in err
    assert f"Run `cotaudit evaluate {run}` first" in err
    assert sorted(p.name for p in run.iterdir()) == ["results.jsonl"]


def test_a_selection_study_is_not_sent_to_cotaudit_evaluate(
    run: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # `cotaudit evaluate` refuses a procedural run: its advice would lead nowhere.
    (run / "eval").mkdir()
    (run / "eval" / "selection.json").write_bytes(b"{}\n")
    err = _verify(capsys, str(run))
    assert "this is a selection study's output (selection.json)" in err
    assert "cotaudit evaluate" not in err.split(". ", 1)[1]
    assert f"cotaudit selection {run}" in err


@pytest.mark.parametrize(
    ("make", "what"),
    [
        (lambda p: None, "no such directory"),
        (lambda p: p.write_bytes(b"x"), "a file, not a directory"),
        (lambda p: p.mkdir(), "not an evaluation: no certificates.jsonl in it"),
    ],
)
def test_an_eval_dir_that_is_no_evaluation_names_the_flag(
    run: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    make: Callable[[Path], object],
    what: str,
) -> None:
    target = tmp_path / "elsewhere"
    make(target)
    err = _verify(capsys, str(run), "--eval-dir", str(target))
    assert f"--eval-dir {target}: {what}" in err


@pytest.mark.parametrize("command", ["verify", "evaluate", "selection"])
def test_an_evaluation_directory_given_for_its_run_names_the_run(
    run: Path, capsys: pytest.CaptureFixture[str], command: str
) -> None:
    # `cotaudit verify RUN/eval` used to answer "run directory has no results.jsonl. Run
    # `cotaudit run` ... into it first": a run inside the evaluation.
    assert main(["evaluate", str(run), "--n-boot", "0", "--no-figures", "--quiet"]) == 0
    capsys.readouterr()
    before = {p.name: p.read_bytes() for p in (run / "eval").iterdir()}
    assert main([command, str(run / "eval")]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"cotaudit {command}: error: {run / 'eval'}: this is an evaluation ")
    assert f"Give its run directory instead: {run}, the directory holding results.jsonl." in err
    assert "cotaudit run" not in err and err.count("\n") == 1
    assert {p.name: p.read_bytes() for p in (run / "eval").iterdir()} == before
    capsys.readouterr()
    assert main(["verify", str(run)]) == 0  # the advice, followed, works
