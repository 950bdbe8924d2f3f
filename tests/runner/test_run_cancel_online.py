"""``cotaudit run --cancel-batches`` on a config with no batch endpoint has nothing to cancel:
it is refused before the run directory is made (no empty run directory, no manifest). So is
one whose run directory never sent a batch (the batches were sent from another); one whose
batches are all collected says there is nothing to cancel."""

from __future__ import annotations

from pathlib import Path

import pytest

from cotaudit.cli import main
from runner.batch.store import BatchState, BatchStore

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


BATCH_CONFIG = CONFIG.replace('provider = "local"', 'provider = "local"\nmode = "batch"')


@pytest.mark.parametrize("flags", [[], ["--run-dir", "elsewhere"]])
def test_a_run_directory_that_sent_no_batch_is_refused_and_not_made(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    flags: list[str],
) -> None:
    # The batches to cancel were sent from another run directory (a --run-dir not given as
    # then): "0 written" and exit 0 let the user believe they were cancelled.
    monkeypatch.chdir(tmp_path)  # where --run-dir is relative to
    config = tmp_path / "c.toml"
    config.write_text(BATCH_CONFIG, encoding="utf-8")
    assert main(["run", str(config), "--cancel-batches", *flags]) == 2
    err = capsys.readouterr().err
    run_dir = tmp_path / (flags[1] if flags else "run")
    assert err == (
        f"cotaudit run: error: --cancel-batches: {run_dir} holds no batch of endpoint 'ep': "
        "no run into this directory sent one, so there is nothing here to cancel. Cancel from "
        "the run directory that sent the batches: the run_dir (or --run-dir) and the endpoint "
        "names they were sent with\n"
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.toml"]


def test_a_run_directory_whose_batches_are_collected_has_nothing_to_cancel(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "c.toml"
    config.write_text(BATCH_CONFIG, encoding="utf-8")
    store = BatchStore(tmp_path / "run")
    store.save(BatchState("ep-00001", "ep", "openai", [("a", "a")], 0.0, state="done"))
    assert main(["run", str(config), "--cancel-batches"]) == 0
    assert capsys.readouterr().err == (
        f"cotaudit run: every batch in {tmp_path / 'run' / 'batches'} is collected already: "
        "nothing to cancel\n"
    )
    assert sorted(p.name for p in (tmp_path / "run").iterdir()) == ["batches"]  # untouched
