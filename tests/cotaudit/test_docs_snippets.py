"""The Python sessions the docs show run as written (in a fresh directory, as a reader would)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parents[2] / "docs"
_BLOCK = re.compile(r"```python\n(.*?)```", re.DOTALL)


def _blocks(page: str) -> list[str]:
    return _BLOCK.findall((DOCS / page).read_text(encoding="utf-8"))


@pytest.mark.parametrize(
    ("page", "index"),
    [("api.md", 0), ("server.md", 0)],
)
def test_a_documented_session_runs_as_written(page: str, index: int, tmp_path: Path) -> None:
    code = _blocks(page)[index]
    # A reader's "..." placeholder in a with-block is a statement, not a missing value.
    assert "[...]" not in code, f"{page}: a placeholder the reader cannot run"
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, f"{page} block {index}:\n{done.stderr[-3000:]}"
