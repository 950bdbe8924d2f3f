"""Ctrl-C at any point of ``cotaudit reproduce`` and ``cotaudit demo``: one line says what was
kept and how to go on, and an ``--out`` the command made and wrote no file into is removed
(``cotaudit/commands/interrupts.py``).

The child processes are stopped at chosen points without sleeping: a pack file that is a
named pipe holds ``reproduce`` in its read until the test has sent the signal (and serves
the file's bytes after it), and the demo is signalled as soon as its ``--out`` appears.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cotaudit.commands.interrupts import (
    command_interrupts,
    evaluation_interrupts,
)
from cotaudit.errors import UsageError
from tests.ctrl_c import sigint_as_a_terminal_sends_it

ROOT = Path(__file__).resolve().parents[2]


# --- the shared mechanism, one function at a time, on real directories -----------------------


def _interrupted(out: Path, run_dir: Path, *, make: bool = True) -> None:
    with command_interrupts("reproduce", out, run_dir):
        if make:
            out.mkdir(parents=True, exist_ok=True)
            (out / "cache").mkdir(exist_ok=True)  # an empty directory is no file written
        raise KeyboardInterrupt


def test_a_ctrl_c_before_any_result_removes_the_out_it_made_with_its_parents(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "a" / "b" / "repro"
    with pytest.raises(KeyboardInterrupt):
        _interrupted(out, out / "run")
    assert not (tmp_path / "a").exists() and tmp_path.is_dir()
    assert capsys.readouterr().err == (
        f"cotaudit reproduce: interrupted before any result was written; {out}, which it had "
        "made, is removed: rerun the same command to start\n"
    )


def test_a_ctrl_c_before_out_is_made_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "repro"
    with pytest.raises(KeyboardInterrupt):
        _interrupted(out, out / "run", make=False)
    assert capsys.readouterr().err == (
        f"cotaudit reproduce: interrupted before any result was written; no {out} was made: "
        "rerun the same command to start\n"
    )


def test_an_out_that_was_there_is_left_and_one_holding_a_file_is_kept(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    mine = tmp_path / "mine"
    mine.mkdir()
    with pytest.raises(KeyboardInterrupt):
        _interrupted(mine, mine / "run")
    assert mine.is_dir() and (mine / "cache").is_dir()  # not made by the command: untouched
    assert f"{mine} is left as it was: rerun the same command to start" in capsys.readouterr().err

    out = tmp_path / "repro"
    with pytest.raises(KeyboardInterrupt), command_interrupts("reproduce", out, out / "run"):
        (out / "cache").mkdir(parents=True)
        (out / "cache" / "cache.db").write_bytes(b"")
        raise KeyboardInterrupt
    assert (out / "cache" / "cache.db").is_file()
    assert f"{out} is kept: rerun the same command to start" in capsys.readouterr().err


def test_a_stream_is_kept_and_rerunning_resumes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "repro"
    stream = out / "run" / "results.jsonl"
    with pytest.raises(KeyboardInterrupt), command_interrupts("demo", out, out / "run"):
        stream.parent.mkdir(parents=True)
        stream.write_bytes(b'{"kind": "problem"}\n')
        raise KeyboardInterrupt
    assert stream.is_file()
    assert capsys.readouterr().err == (
        f"cotaudit demo: interrupted; the stream so far is kept in {stream}: rerun the same "
        "command to resume\n"
    )


def test_a_refusal_leaves_no_empty_out_and_says_nothing_more(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "repro"
    with pytest.raises(UsageError), command_interrupts("reproduce", out, out / "run"):
        out.mkdir()
        raise UsageError("refused")
    assert not out.exists()
    assert capsys.readouterr().err == ""


def test_after_the_evaluation_the_line_says_it_is_complete(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "repro"
    with pytest.raises(KeyboardInterrupt), command_interrupts("reproduce", out, out / "run"):
        (out / "run" / "eval").mkdir(parents=True)
        (out / "run" / "eval" / "report.md").write_text("# report\n", encoding="utf-8")
        with evaluation_interrupts("reproduce"):
            pass
        raise KeyboardInterrupt  # while the table prints
    assert capsys.readouterr().err == (
        f"cotaudit reproduce: interrupted after the evaluation, which is complete in "
        f"{out / 'run' / 'eval'}: rerun the same command to print the table again (nothing is "
        "sent again)\n"
    )


# --- the commands, in a real child process ----------------------------------------------------


def _command(*args: str) -> list[str]:
    return [sys.executable, "-m", "cotaudit", *args]


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1"}


def _fifo_pack(pack_dir: Path, tmp_path: Path) -> tuple[Path, Path, bytes]:
    """A copy of the pack whose first probe output is a named pipe: each read of it waits for
    the test to open the pipe's other end. ``(pack, pipe, its bytes)``."""
    pack = tmp_path / "pack"
    shutil.copytree(pack_dir, pack)
    pipe = pack / "evidence" / "gpt-4o" / "p001" / "probes" / "semantic_P1.json"
    content = pipe.read_bytes()
    pipe.unlink()
    os.mkfifo(pipe)
    return pack, pipe, content


def _finish(child: subprocess.Popen[bytes], writer: int | None, content: bytes) -> str:
    """Serve the pipe's bytes to the read the signal interrupted, and the child's stderr."""
    try:
        if writer is not None:
            # The reader may be gone: the interrupt ended the read.
            with contextlib.suppress(BrokenPipeError):
                os.write(writer, content)
            os.close(writer)
        _, err = child.communicate(timeout=120)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    return err.decode()


@pytest.mark.slow
@pytest.mark.parametrize("out_exists", [False, True])
def test_ctrl_c_while_reproduce_reads_the_pack_says_nothing_was_written(
    pack_dir: Path, tmp_path: Path, out_exists: bool
) -> None:
    pack, pipe, content = _fifo_pack(pack_dir, tmp_path)
    out = tmp_path / "repro"
    if out_exists:
        out.mkdir()  # the user's, empty: a reproduce may use it, and must leave it
    child = subprocess.Popen(
        _command("reproduce", str(pack), "--out", str(out), "--quiet", "--no-figures"),
        env=_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        preexec_fn=sigint_as_a_terminal_sends_it,
    )
    writer = None
    try:
        # Returns once the child opened the pipe to read it (reading the pack's recordings,
        # before it makes --out): it waits in the read for what is not written yet.
        writer = os.open(pipe, os.O_WRONLY)
        child.send_signal(signal.SIGINT)
    finally:
        err = _finish(child, writer, content)
    assert child.returncode == 130, err
    kept = f"{out} is left as it was" if out_exists else f"no {out} was made"
    assert err == (
        f"cotaudit reproduce: interrupted before any result was written; {kept}: rerun the "
        "same command to start\n"
    )
    assert out.is_dir() is out_exists
    if out_exists:
        assert list(out.iterdir()) == []


@pytest.mark.slow
def test_ctrl_c_before_reproduce_sends_anything_removes_the_out_it_made(
    pack_dir: Path, tmp_path: Path
) -> None:
    pack, pipe, content = _fifo_pack(pack_dir, tmp_path)
    out = tmp_path / "repro"
    child = subprocess.Popen(
        _command("reproduce", str(pack), "--out", str(out), "--no-figures"),
        env=_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        preexec_fn=sigint_as_a_terminal_sends_it,
    )
    writer = None
    try:
        # The first read (the config's longest recording) is served whole; the second is the
        # task's (the probes' fresh words), once --out is made and the sweep's handlers are in
        # place: the signal stops the sweep while it counts its plan.
        first = os.open(pipe, os.O_WRONLY)
        os.write(first, content)
        os.close(first)
        deadline = time.monotonic() + 60
        while not out.exists():
            assert child.poll() is None and time.monotonic() < deadline, "no --out made"
            time.sleep(0.001)  # polling a real subprocess: there is no clock to inject
        writer = os.open(pipe, os.O_WRONLY)
        child.send_signal(signal.SIGINT)
    finally:
        err = _finish(child, writer, content)
    assert child.returncode == 130, err
    assert err.splitlines()[-1] == (
        "cotaudit reproduce: interrupted while counting the plan, before anything was sent or "
        f"written; {out}, which it had made, is removed: rerun the same command to start"
    ), err
    assert "Traceback" not in err
    assert not out.exists()


@pytest.mark.slow
def test_ctrl_c_as_soon_as_the_demo_makes_its_out_removes_it(tmp_path: Path) -> None:
    out = tmp_path / "demo"
    child = subprocess.Popen(
        _command("demo", "--problems", "3", "--no-figures", "--out", str(out)),
        env=_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        preexec_fn=sigint_as_a_terminal_sends_it,
    )
    try:
        deadline = time.monotonic() + 60
        while not out.exists():
            assert child.poll() is None and time.monotonic() < deadline, "no --out made"
            time.sleep(0.001)  # polling a real subprocess: there is no clock to inject
        child.send_signal(signal.SIGINT)
    finally:
        err = _finish(child, None, b"")
    assert child.returncode == 130, err
    # Before the sweep's handlers (the engine's modules loading), or within them while the
    # plan is counted: either way nothing was written, and --out is gone.
    removed = f"{out}, which it had made, is removed: rerun the same command to start"
    assert err.splitlines()[-1] in (
        f"cotaudit demo: interrupted before any result was written; {removed}",
        "cotaudit demo: interrupted while counting the plan, before anything was sent or "
        f"written; {removed}",
    ), err
    assert "Traceback" not in err and "Exception ignored" not in err, err
    assert not out.exists()
