"""`cotaudit run --model` and `cotaudit plan --model`: a refused ``--model`` never repeats a
key written into its URL (`runner/commands/one_line.py`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from cotaudit.cli import main

SECRET = "sk-proj-Zq8vX2mN4kR7tY1wP5sL9dF3"
SPECS = [
    (f"openai-compatible/m@http://user:{SECRET}@127.0.0.1:8000/v1", "must not carry credentials"),
    (f"openai-compatible/m@http://{SECRET}@127.0.0.1:8000/v1", "must not carry credentials"),
    (f"openai-compatible/m@http://127.0.0.1:8000/v1?api-key={SECRET}", "(parameter api-key)"),
    (f"openai-compatible/m@http://127.0.0.1:8000/v1#{SECRET}", "query string or fragment"),
    (f"openai-compat/m@http://user:{SECRET}@127.0.0.1:8000/v1", "cannot read the model"),
    (f"http://user:{SECRET}@127.0.0.1:8000/v1", "cannot read the model"),
]


@pytest.mark.parametrize(("spec", "expected"), SPECS)
@pytest.mark.parametrize("command", ["run", "plan"])
def test_a_key_in_the_models_url_is_not_repeated_by_its_refusal(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    command: str,
    spec: str,
    expected: str,
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    flags = ["--out", str(tmp_path / "plan.jsonl")] if command == "plan" else ["--dry-run"]
    assert main([command, "--model", spec, "--limit", "1", *flags]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"cotaudit {command}: error: ") and expected in err, err
    assert SECRET not in err and SECRET[:12] not in err, err
    assert "127.0.0.1:8000" in err  # what the message is about is still named
    assert list(tmp_path.iterdir()) == []


def test_a_url_without_credentials_is_repeated_as_given(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    spec = "openai-compatible/m@127.0.0.1:8000/v1"
    assert main(["run", "--model", spec, "--limit", "1", "--dry-run"]) == 2
    assert f"--model {spec}: " in capsys.readouterr().err
