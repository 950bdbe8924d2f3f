"""Task kind ``procedural``: config validation, the balanced grid and its requests."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from cotaudit.errors import UsageError
from runner.request_spec import EndpointIdentity
from runner.tasks.procedural.task import ProceduralTask, from_config
from runner.tasks.registry import build_task

ENDPOINT = EndpointIdentity("sim", "local", "rule_mix", "127.0.0.1", "local", {"max_tokens": 64})


def _build(**table: Any) -> ProceduralTask:
    return from_config({"kind": "procedural", **table}, config_dir=Path("."), where="cfg.toml")


def test_registry_builds_the_task_with_defaults() -> None:
    task = build_task({"kind": "procedural"}, config_dir=Path("."), where="cfg.toml")
    assert isinstance(task, ProceduralTask)
    assert task.families == ("arith", "circuit", "reachability")
    assert (task.min_stratum, task.max_stratum, task.per_stratum) == (1, 5, 10)


def test_grid_is_families_by_strata_by_index() -> None:
    task = _build(families=["circuit", "arith"], min_stratum=2, max_stratum=4, per_stratum=3)
    problems = list(task.problems())
    assert len(problems) == 2 * 3 * 3
    assert {(p.family, p.stratum) for p in problems} == {
        (f, s) for f in ("circuit", "arith") for s in (2, 3, 4)
    }
    assert len({p.problem_id for p in problems}) == len(problems)


def test_three_requests_per_problem() -> None:
    task = _build(per_stratum=1, max_stratum=1, temperature=0.5)
    problem = next(task.problems())
    specs = list(task.requests(problem, ENDPOINT))
    assert [s.condition for s in specs] == ["original", "intervened", "preserving"]
    for spec in specs:
        variant = problem.variant(spec.condition)
        assert spec.messages == ({"role": "user", "content": variant.prompt},)
        assert spec.params["temperature"] == 0.5 and spec.task == "procedural"
        assert spec.problem_id == problem.problem_id
    assert specs[0].probe is None
    assert specs[1].probe is not None and "intervention" in specs[1].probe
    assert specs[2].probe is not None and "edit" in specs[2].probe
    assert len({s.cache_key for s in specs}) == 3
    assert list(task.endpoint_records(problem, ENDPOINT)) == []


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ({"families": ["sudoku"]}, "families"),
        ({"families": []}, "families"),
        ({"families": ["arith", "arith"]}, "families"),
        ({"min_stratum": 0}, "min_stratum"),
        ({"min_stratum": 4, "max_stratum": 2}, "min_stratum <= max_stratum"),
        ({"max_stratum": 99}, "max_stratum"),
        ({"per_stratum": "ten"}, "per_stratum"),
        ({"seed": -1}, "seed"),
        ({"temperature": "hot"}, "temperature"),
        (
            {"temperature": float("nan")},
            r"'temperature' must be a finite number in \[0, 2\], got nan",
        ),
        ({"temperature": float("inf")}, r"\[task\]\.temperature"),
        ({"seed": 10**23}, r"\(64 bits\), got 100000000000000000000000"),
        ({"per_stratum": 2**63}, "per_stratum"),
        ({"families": ["sudoku"]}, r'got the list \["sudoku"\]'),
        ({"strata": 3}, "unknown key"),
    ],
)
def test_bad_config_names_the_key(table: dict[str, Any], message: str) -> None:
    with pytest.raises(UsageError, match=message) as info:
        _build(**table)
    assert "cfg.toml" in str(info.value)
