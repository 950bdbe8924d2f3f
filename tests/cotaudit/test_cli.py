"""``cotaudit.cli.main``: how an ``OSError`` from any command reaches the user."""

from __future__ import annotations

import argparse
import errno

import pytest

from cotaudit import cli


@pytest.mark.parametrize(
    ("command", "resumes"), [("run", True), ("demo", True), ("evaluate", False), ("verify", False)]
)
def test_an_os_error_is_one_line_with_advice_for_its_command(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    command: str,
    resumes: bool,
) -> None:
    module = cli._load(command)
    assert module is not None

    def fail(args: argparse.Namespace) -> int:
        raise OSError(errno.ENOSPC, "No space left on device", "/data/out/report.json")

    monkeypatch.setattr(module, "run", fail)
    # Each command's required arguments, so argparse lets the call through to ``run``.
    argv = {"run": ["x.toml"], "demo": [], "evaluate": ["RUN"], "verify": ["RUN"]}[command]
    assert cli.main([command, *argv]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert "No space left on device: /data/out/report.json" in err
    assert ("the run resumes where it stopped" in err) is resumes
