"""Every shipped example config is valid: it loads, plans and dry-runs, and writes nothing."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from cotaudit.cli import main
from runner.config import load_config

EXAMPLES = sorted((Path(__file__).resolve().parents[1] / "examples").glob("*.toml"))
KEY_VARS = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "SELFHOSTED_KEY", "LOCAL_SERVER_KEY")


def test_there_are_examples_for_each_provider_kind() -> None:
    kinds = {ep.provider for path in EXAMPLES for ep in load_config(path).endpoints}
    assert {"openai", "anthropic", "local"} <= kinds


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.name)
def test_example_dry_runs_without_writing(
    example: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    for var in KEY_VARS:
        monkeypatch.setenv(var, "sk-canary-not-a-real-key")
    # Copy next to a fresh runs/ so that a bug that writes would write into tmp_path.
    copy = tmp_path / "examples" / example.name
    copy.parent.mkdir()
    shutil.copy(example, copy)
    for extra in example.parent.glob("*.jsonl"):
        shutil.copy(extra, copy.parent / extra.name)
    config = load_config(copy)
    assert main(["run", str(copy), "--dry-run"]) == 0
    out = capsys.readouterr().out
    for ep in config.endpoints:
        assert f"{ep.name}:" in out
    assert "sk-canary" not in out
    assert not config.run_dir.exists()
