"""``cotaudit plan`` refuses the overrides that change only how a run is carried out
(``--run-dir``, ``--max-concurrency``, ``--no-cache``): a plan is the same whatever they say,
so taking them silently would let a user believe it was made for them. Its help does not
offer them; ``--limit``, which changes the plan, it takes."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from cotaudit.cli import main


def _config(tmp_path: Path) -> Path:
    (tmp_path / "p.jsonl").write_bytes(
        b"".join(orjson.dumps({"id": f"q{i}", "prompt": f"Say {i}."}) + b"\n" for i in range(3))
    )
    path = tmp_path / "c.toml"
    path.write_text(
        'run_dir = "run"\ncache_dir = "cache"\n\n[task]\nkind = "prompts"\npath = "p.jsonl"\n\n'
        '[[endpoints]]\nname = "ep"\nprovider = "local"\nmodel = "echo"\n',
        encoding="utf-8",
    )
    return path


def _help(command: str, capsys: pytest.CaptureFixture[str]) -> str:
    with pytest.raises(SystemExit) as info:
        main([command, "--help"])
    assert info.value.code == 0
    return capsys.readouterr().out


@pytest.mark.parametrize(
    ("flags", "named"),
    [
        (["--run-dir", "elsewhere"], "--run-dir does nothing here"),
        (["--max-concurrency", "4"], "--max-concurrency does nothing here"),
        (["--no-cache"], "--no-cache does nothing here"),
        (
            ["--no-cache", "--run-dir", "x", "--max-concurrency", "2"],
            "--max-concurrency, --run-dir and --no-cache do nothing here",
        ),
    ],
)
def test_plan_refuses_an_operational_override_and_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], flags: list[str], named: str
) -> None:
    config = _config(tmp_path)
    before = sorted(p.name for p in tmp_path.iterdir())
    out = tmp_path / "plan.jsonl"
    assert main(["plan", str(config), "--out", str(out), *flags]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"cotaudit plan: error: {named}: cotaudit plan writes the requests")
    assert "they are options of cotaudit run" in err and err.count("\n") == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == before  # no plan, no run directory


def test_plan_takes_limit_and_does_not_offer_the_operational_overrides(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "plan.jsonl"
    assert main(["plan", str(_config(tmp_path)), "--out", str(out), "--limit", "2"]) == 0
    kinds = [orjson.loads(line)["kind"] for line in out.read_bytes().splitlines()]
    assert kinds.count("request") == 2
    capsys.readouterr()
    plan_help, run_help = _help("plan", capsys), _help("run", capsys)
    for flag in ("--run-dir", "--max-concurrency", "--no-cache"):
        assert flag not in plan_help and flag in run_help
    assert "--limit" in plan_help
