"""``cotaudit reproduce`` keeps the habits of the other commands (docs/command-line.md):
requests that failed for good exit 3 as in ``run`` ("Exit status of every command"), and
``--no-figures`` skips the figures as in ``evaluate``, ``selection`` and ``demo``."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from cotaudit import cli


def test_a_replay_that_failed_for_good_exits_3_now_and_on_a_rerun(
    pack_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pack = tmp_path / "pack"
    shutil.copytree(pack_dir, pack)
    (pack / "evidence" / "gpt-4o" / "p001" / "probes" / "local_P1.json").unlink()
    out = tmp_path / "repro"
    argv = ["reproduce", str(pack), "--out", str(out), "--quiet"]
    for attempt in ("first", "rerun"):
        assert cli.main(argv) == 3, attempt
        captured = capsys.readouterr()
        assert "A consistent, full" in captured.out  # the table is printed all the same
        assert "cotaudit reproduce: 1 replayed request failed for good" in captured.err
        assert "(1 NotFound)" in captured.err or attempt == "rerun"
        assert "a new --out directory" in captured.err


def test_reproduce_takes_no_figures_as_the_other_evaluating_commands_do(
    pack_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "repro"
    argv = ["reproduce", str(pack_dir), "--out", str(out), "--quiet", "--no-figures"]
    assert cli.main(argv) == 0
    eval_dir = out / "run" / "eval"
    assert (eval_dir / "report.md").is_file()
    assert not [p.name for p in eval_dir.iterdir() if p.suffix in (".png", ".svg", ".pdf")]
