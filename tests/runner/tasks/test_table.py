"""The shared [task] table validators: one message shape for every task kind."""

from __future__ import annotations

from pathlib import Path

import pytest

from cotaudit.errors import UsageError
from runner.tasks.table import task_int, task_number, task_path


def test_task_int_takes_the_default_and_checks_type_and_minimum() -> None:
    assert task_int({}, "seed", 7, "cfg.toml", minimum=0) == 7
    assert task_int({"seed": 3}, "seed", 7, "cfg.toml", minimum=0) == 3
    for bad in (True, 1.5, "2", -1):
        with pytest.raises(UsageError, match="'seed' must be an integer >= 0") as info:
            task_int({"seed": bad}, "seed", 7, "cfg.toml", minimum=0)
        assert "cfg.toml: [task].seed" in str(info.value)
    with pytest.raises(UsageError) as info:
        task_int({"n": 0}, "n", 0, "cfg.toml", minimum=1)
    assert "Set n = 1" in str(info.value)  # the suggestion itself is acceptable


def test_task_path_is_relative_to_the_config_and_must_exist(tmp_path: Path) -> None:
    (tmp_path / "data.json").write_text("[]")
    assert task_path({"path": "data.json"}, "path", tmp_path, "cfg.toml") == tmp_path / "data.json"
    with pytest.raises(UsageError, match="does not exist"):
        task_path({"path": "missing.json"}, "path", tmp_path, "cfg.toml")
    with pytest.raises(UsageError, match="must be a path string") as info:
        task_path({"path": 3}, "path", tmp_path, "cfg.toml")
    assert "[task].path" in str(info.value)
    with pytest.raises(UsageError, match="missing 'path'"):
        task_path({}, "path", tmp_path, "cfg.toml")
    with pytest.raises(UsageError, match="is not a file") as info:
        task_path({"path": "."}, "path", tmp_path, "cfg.toml", points_at="a file", file=True)
    assert "Point path at a file" in str(info.value)


def test_task_int_refuses_an_integer_past_64_bits() -> None:
    with pytest.raises(
        UsageError,
        match=r"'seed' must be an integer >= 0 and <= 9223372036854775807 "
        r"\(64 bits\), got 100000000000000000000000",
    ) as info:
        task_int({"seed": 10**23}, "seed", 0, "cfg.toml", minimum=0)
    assert "cfg.toml: [task].seed" in str(info.value)
    assert task_int({"seed": 2**63 - 1}, "seed", 0, "cfg.toml", minimum=0) == 2**63 - 1


def test_task_number_refuses_nan_and_inf() -> None:
    table = {"t": 0.7}
    assert task_number(table, "t", 0.0, "cfg.toml", low=0.0, high=2.0, example=0.7) == 0.7
    for bad, got in ((float("nan"), "nan"), (float("inf"), "inf"), ("hot", 'the string "hot"')):
        with pytest.raises(UsageError, match="'t' must be a") as info:
            task_number({"t": bad}, "t", 0.0, "cfg.toml", low=0.0, high=2.0, example=0.7)
        assert str(info.value).startswith("cfg.toml: [task].t: ")
        assert f"got {got}. Set t = 0.7." in str(info.value)


def test_task_path_shows_a_bad_value_as_written(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match=r'got the list \["a.json"\]'):
        task_path({"path": ["a.json"]}, "path", tmp_path, "cfg.toml")
