"""``cotaudit run --cancel-batches`` on a config with no batch endpoint has nothing to cancel:
it is refused before the run directory is made (no empty run directory, no manifest)."""

from __future__ import annotations

from pathlib import Path

import pytest

from cotaudit.cli import main

CONFIG = """run_dir = "run"
cache_dir = "cache"

[task]
kind = "prontoqa"
source = "generate"
n = 2
seed = 0

[[endpoints]]
name = "ep"
provider = "local"
model = "faithful"
"""


@pytest.mark.parametrize("flags", [[], ["--quiet"], ["--no-preflight"]])
def test_cancel_batches_without_a_batch_endpoint_is_refused_and_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], flags: list[str]
) -> None:
    config = tmp_path / "c.toml"
    config.write_text(CONFIG, encoding="utf-8")
    assert main(["run", str(config), "--cancel-batches", *flags]) == 2
    err = capsys.readouterr().err
    assert err.startswith(
        f"cotaudit run: error: --cancel-batches: no endpoint of {config} is in batch mode"
    )
    assert 'rerun with mode = "batch" on their endpoint' in err and err.count("\n") == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.toml"]  # no run dir, no cache


def test_a_one_line_run_has_no_batch_to_cancel(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert main(["run", "--model", "local/faithful", "--cancel-batches"]) == 2
    assert "no endpoint of --model local/faithful is in batch mode" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []
