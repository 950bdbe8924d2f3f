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


def _run_on_a_terminal(argv: list[str], cwd: Path) -> tuple[int, str]:
    """Run ``argv`` with its stdout and stderr on a new pseudo-terminal; its exit status and
    everything it wrote there."""
    master, slave = pty.openpty()
    # A terminal 200 columns wide, as a user's is: tqdm sizes the bar from it.
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 200, 0, 0))
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


def test_the_terminal_progress_bar_shows_auto_concurrency(tmp_path: Path) -> None:
    config = tmp_path / "sweep.toml"
    config.write_text(
        'run_dir = "run"\ncache_dir = "cache"\n'
        '[task]\nkind = "prontoqa"\nsource = "generate"\nn = 6\nseed = 3\n'
        '[[endpoints]]\nname = "ep"\nprovider = "local"\nmodel = "faithful"\n'
        'max_concurrency = "auto"\nrequests_per_minute = 600000\ntokens_per_minute = 1e9\n'
    )
    status, shown = _run_on_a_terminal(
        [sys.executable, "-m", "cotaudit", "run", str(config)], tmp_path
    )
    assert status == 0, shown
    values = [int(n) for n in re.findall(r"concurrency (\d+) \(auto\)", shown)]
    assert values, shown
    assert all(v >= 1 for v in values)
