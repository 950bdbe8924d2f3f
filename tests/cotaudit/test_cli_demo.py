"""``cotaudit demo``: a flag is used or refused, never taken and ignored (docs/command-line.md)."""

from __future__ import annotations

from pathlib import Path

import pytest

from cotaudit import cli


@pytest.mark.parametrize(
    ("flags", "named"),
    [
        (["--seed", "3"], "--seed applies"),
        (["--problems", "4", "--ontology", "true"], "--problems, --ontology apply"),
    ],
)
def test_the_selection_study_refuses_the_grounding_study_s_flags(
    flags: list[str], named: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "demo"
    assert cli.main(["demo", "--study", "selection", "--out", str(out), *flags]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"cotaudit demo: error: --study selection: {named} to the grounding")
    assert len(err.splitlines()) == 1
    assert not out.exists()


def test_the_grounding_study_still_takes_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "demo"
    argv = ["demo", "--out", str(out), "--problems", "2", "--seed", "3", "--quiet"]
    assert cli.main([*argv, "--no-figures"]) == 0
    problems = [
        line
        for line in (out / "run" / "results.jsonl").read_text().splitlines()
        if '"kind":"problem"' in line
    ]
    assert len(problems) == 2
