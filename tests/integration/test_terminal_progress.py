"""``cotaudit run`` on a real terminal (a pseudo-terminal): the progress bar shows what
``max_concurrency = "auto"`` is at, as docs/engine.md says."""

from __future__ import annotations

import fcntl
import os
import pty
import re
import select
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path

ANSWER_WAIT_S = 60.0  # the run takes a few seconds; a hung one fails the test, not CI


def _run_on_a_terminal(argv: list[str], cwd: Path, columns: int = 200) -> tuple[int, str]:
    """Run ``argv`` with its stdout and stderr on a new pseudo-terminal ``columns`` wide; its
    exit status and everything it wrote there."""
    master, slave = pty.openpty()
    # A terminal 200 columns wide, as many users' are: tqdm sizes the bar from it.
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, columns, 0, 0))
    env = {**os.environ, "TERM": "xterm"}
    proc = subprocess.Popen(argv, cwd=cwd, stdin=slave, stdout=slave, stderr=slave, env=env)
    os.close(slave)
    out = bytearray()
    deadline = time.monotonic() + ANSWER_WAIT_S
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.5)
            if ready:
                try:
                    chunk = os.read(master, 65536)
                except OSError:  # the terminal closed: the process has gone
                    break
                if not chunk:
                    break
                out += chunk
            elif proc.poll() is not None:
                break
    finally:
        os.close(master)
        if proc.poll() is None:
            proc.kill()
    return proc.wait(timeout=10), out.decode("utf-8", "replace")


def _sweep(tmp_path: Path) -> Path:
    config = tmp_path / "sweep.toml"
    config.write_text(
        'run_dir = "run"\ncache_dir = "cache"\n'
        '[task]\nkind = "prontoqa"\nsource = "generate"\nn = 6\nseed = 3\n'
        '[[endpoints]]\nname = "ep"\nprovider = "local"\nmodel = "faithful"\n'
        'max_concurrency = "auto"\nrequests_per_minute = 600000\ntokens_per_minute = 1e9\n'
    )
    return config


def test_the_terminal_progress_bar_shows_auto_concurrency(tmp_path: Path) -> None:
    status, shown = _run_on_a_terminal(
        [sys.executable, "-m", "cotaudit", "run", str(_sweep(tmp_path))], tmp_path
    )
    assert status == 0, shown
    values = [int(n) for n in re.findall(r"concurrency (\d+) \(auto\)", shown)]
    assert values, shown
    assert all(v >= 1 for v in values)


def test_an_80_column_terminal_shows_the_state_on_a_line_under_the_bar(tmp_path: Path) -> None:
    # On the bar's own line the state came after the counters, past the 80th column, and tqdm
    # cut it off: the user never saw the concurrency, a pace or an outage.
    status, shown = _run_on_a_terminal(
        [sys.executable, "-m", "cotaudit", "run", str(_sweep(tmp_path))], tmp_path, columns=80
    )
    assert status == 0, shown
    assert re.search(r"\r  concurrency \d+ \(auto\)", shown), shown
    bars = [p for p in re.split(r"[\r\n]+", shown.replace("\x1b[A", "\n")) if "/s" in p]
    assert bars and all(len(bar) <= 80 for bar in bars), bars
