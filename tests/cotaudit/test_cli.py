"""``cotaudit.cli.main``: how an ``OSError`` from any command, and a Ctrl-C at any point, reach
the user."""

from __future__ import annotations

import argparse
import errno
import subprocess
import sys
from pathlib import Path

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


def test_a_reader_that_stops_reading_ends_the_command_quietly(tmp_path: Path) -> None:
    """``cotaudit parse ... | head -1``: the pipe closes under the command, which then says
    nothing and exits 141 (128 + SIGPIPE), as a shell reports ``yes | head``."""
    sentences = tmp_path / "sentences.txt"
    sentences.write_text("".join(f"Alex{i} is a bempus.\n" for i in range(20_000)))
    with (
        sentences.open("rb") as stdin,
        subprocess.Popen(
            [sys.executable, "-m", "cotaudit.cli", "parse", "-"],
            stdin=stdin,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        ) as proc,
    ):
        assert proc.stdout is not None and proc.stderr is not None
        assert proc.stdout.readline().startswith(b"{")
        proc.stdout.close()  # the reader goes away with most of the output unread
        err = proc.stderr.read().decode()
        assert proc.wait(timeout=60) == cli.EXIT_BROKEN_PIPE == 141
    assert err == ""


def test_a_ctrl_c_while_a_commands_modules_load_exits_130_without_a_traceback(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def interrupted(selected: str | None) -> object:
        raise KeyboardInterrupt  # as a Ctrl-C lands in an import

    monkeypatch.setattr(cli, "_build", interrupted)
    assert cli.main(["evaluate", "run"]) == 130
    assert capsys.readouterr().err == ""
