"""Time the README's first command: ``cotaudit demo`` cold, then rerun into the same directory.

Targets: the first run under 60 s on a 2-core machine; the rerun under 10 s and
without a single HTTP request. Each run is a fresh process, as a user would start it; the
script prints both wall times, their ratio to the targets and the demo's own sweep line
(responses written, already in the stream, HTTP requests served).

    python benchmarks/bench_demo.py [--problems 50] [--study grounding|selection]
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TARGETS_S = {"first run": 60.0, "rerun": 10.0}


def _run(out: Path, problems: int, study: str) -> tuple[float, str]:
    cmd = [sys.executable, "-m", "cotaudit.cli", "demo", "--out", str(out), "--quiet"]
    cmd += ["--study", study, "--problems", str(problems)]
    started = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, check=True)
    return time.perf_counter() - started, done.stdout


def _responses(out: Path) -> int:
    """Response records in the demo's streams (the selection study prints no sweep line)."""
    return sum(
        line.count(b'"kind":"response"')
        for stream in out.rglob("results.jsonl")
        for line in stream.open("rb")
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--problems", type=int, default=50)
    parser.add_argument("--study", choices=("grounding", "selection"), default="grounding")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "demo"
        before = 0
        for label in ("first run", "rerun"):
            elapsed, stdout = _run(out, args.problems, args.study)
            # The sweep's line, wrapped to the terminal's width (its continuations indented).
            sweep = re.search(r"^sweep: .*(?:\n  .*)*", stdout, re.M)
            target = TARGETS_S[label]
            now = _responses(out)
            print(
                f"{label:<9} {elapsed:6.1f} s  ({elapsed / target:.2f} of the {target:.0f} s "
                f"target)  {now - before} responses written ({now} in the streams)  "
                f"{' '.join(sweep.group(0).split()) if sweep else ''}"
            )
            before = now
    return 0


if __name__ == "__main__":
    sys.exit(main())
