"""Habits shared by every command (docs/command-line.md): ``cotaudit help COMMAND``, the nearest
command or option named for a misspelt one, and ``-`` as a path (standard output for an output
file, refused for an output directory)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from cotaudit import cli


def _exit(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[object, str, str]:
    """Run ``cotaudit ARGV`` to argparse's exit; return its status, stdout and stderr."""
    with pytest.raises(SystemExit) as exc:
        cli.main(argv)
    out, err = capsys.readouterr()
    return exc.value.code, out, err


def test_help_command_is_the_command_s_help(capsys: pytest.CaptureFixture[str]) -> None:
    code, help_out, _ = _exit(["help", "evaluate"], capsys)
    assert code == 0 and help_out.startswith("usage: cotaudit evaluate")
    assert _exit(["evaluate", "--help"], capsys)[1] == help_out
    code, top, _ = _exit(["help"], capsys)
    assert code == 0 and "COMMAND" in top and "cotaudit help COMMAND" in top


@pytest.mark.parametrize(
    ("argv", "typed", "nearest"),
    [
        (["evalute", "runs/x"], "evalute", "evaluate"),
        (["help", "selektion"], "selektion", "selection"),
    ],
)
def test_a_misspelt_command_names_the_nearest(
    argv: list[str], typed: str, nearest: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = _exit(argv, capsys)
    assert code == 2 and out == ""
    assert f"cotaudit: error: unknown command '{typed}'; did you mean '{nearest}'?" in err


@pytest.mark.parametrize(
    ("argv", "usage", "message"),
    [
        # The unknown option swallowed no value, so "3" became RUN_DIR and "x" an extra word.
        (["evaluate", "--n-bot", "3", "x"], "cotaudit evaluate", "--n-bot; did you mean --n-boot?"),
        (["evaluate", "x", "--qiet"], "cotaudit evaluate", "--qiet; did you mean --quiet?"),
        # Named before argparse's "the following arguments are required: --out".
        (["import-evidence", "--outt", "d", "pack"], "cotaudit import-evidence", "--out?"),
        (["verify", "--eval_dir=e", "run"], "cotaudit verify", "did you mean --eval-dir?"),
        (["verify", "run", "--zzz"], "cotaudit verify", "unrecognized option --zzz ("),
        (["verify", "run", "other"], "cotaudit verify", "unrecognized arguments: other"),
    ],
)
def test_an_unknown_option_is_refused_under_the_command_s_usage(
    argv: list[str], usage: str, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = _exit(argv, capsys)
    assert code == 2 and out == ""
    assert err.startswith(f"usage: {usage} ")
    assert f"{usage}: error: " in err and message in err


def test_an_abbreviated_option_still_works(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    steps = tmp_path / "steps.txt"
    steps.write_text("Alex is a cat.\n")
    assert cli.main(["parse", "--vocab", "cat", str(steps)]) == 0
    assert json.loads(capsys.readouterr().out.splitlines()[0])


@pytest.mark.parametrize(
    "argv",
    [
        ["evaluate", "RUN", "--out", "-"],
        ["selection", "RUN", "--out", "-"],
        ["demo", "--out", "-"],
        ["reproduce", "PACK", "--out", "-"],
        ["import-evidence", "PACK", "--out", "-"],
        ["evaluate", "RUN", "--out", ""],
    ],
)
def test_an_output_directory_of_dash_is_refused_not_created(
    argv: list[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(tmp_path)
    code, out, err = _exit(argv, capsys)
    assert code == 2 and out == ""
    assert f"cotaudit {argv[0]}: error: argument --out: " in err
    assert ("standard output" if argv[-1] == "-" else "empty path") in err
    assert list(tmp_path.iterdir()) == []


def test_rescore_json_dash_is_the_json_on_stdout(
    pack_dir: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(tmp_path)
    assert cli.main(["rescore", str(pack_dir), "--n-boot", "0", "--json", "-"]) == 0
    out, err = capsys.readouterr()
    assert list(json.loads(out)["models"]) == ["gpt-4o"]
    assert "published" in err  # the table, beside the JSON
    assert list(tmp_path.iterdir()) == []


def test_selection_json_dash_is_the_json_on_stdout(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    counts = tmp_path / "t.csv"
    counts.write_text("deployment,a,b,c,d\nm1,40,10,20,30\nm2,30,20,25,25\n")
    monkeypatch.chdir(tmp_path)
    assert cli.main(["selection", "--counts", str(counts), "--json", "-", "--n-boot", "10"]) == 0
    out, err = capsys.readouterr()
    assert set(json.loads(out)["deployments"]) == {"m1", "m2"}
    assert "m1" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.csv"]


def test_view_out_dash_is_the_page_on_stdout(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    demo = tmp_path / "demo"
    argv = ["demo", "--problems", "2", "--out", str(demo), "--no-figures", "--quiet"]
    assert cli.main(argv) == 0
    capsys.readouterr()
    monkeypatch.chdir(tmp_path)
    assert cli.main(["view", str(demo / "run"), "--out", "-"]) == 0
    out, err = capsys.readouterr()
    assert out.startswith("<!DOCTYPE html>") and out.rstrip().endswith("</html>")
    assert "standard output" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["demo"]
    assert not (demo / "run" / "eval" / "view.html").exists()
    assert cli.main(["view", str(demo / "run"), "--out", "-", "--serve"]) == 2
    assert "--serve" in capsys.readouterr().err


def test_selection_counts_dash_reads_standard_input(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "cotaudit.cli", "selection", "--counts", "-", "--n-boot", "10"],
        input=b"deployment,a,b,c,d\nm1,40,10,20,30\n",
        capture_output=True,
        cwd=tmp_path,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr.decode()
    assert done.stdout.decode().splitlines()[1].startswith("m1 ")
    assert list(tmp_path.iterdir()) == []
