"""Task kind ``procedural``: the selection study's generated families.

Config::

    [task]
    kind = "procedural"
    families = ["arith", "circuit", "reachability"]   # optional; default all three
    min_stratum = 1        # optional; smallest number of operations an intervention touches
    max_stratum = 5        # optional; largest (inclusive)
    per_stratum = 10       # optional; instances per family and stratum
    seed = 0               # optional; the generators are pure functions of (seed, stratum, index)
    temperature = 0.0      # optional; sampling temperature of every request, 0 to 2

Each problem yields three requests: ``original``, ``intervened`` and ``preserving`` (the
``condition`` field of the response record), each a single user message holding the
variant's prompt. The request's ``probe`` carries the intervention or the edit.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cotaudit.constants import (
    PROCEDURAL_MAX_STRATUM,
    PROCEDURAL_MIN_STRATUM,
    PROCEDURAL_PER_STRATUM,
    PROCEDURAL_STRATUM_LIMIT,
)
from cotaudit.errors import UsageError
from cotaudit.values import shown
from runner.request_spec import EndpointIdentity, RequestSpec, make_spec
from runner.tasks.procedural import FAMILIES
from runner.tasks.procedural.common import TASK_NAME, VARIANTS, ProceduralProblem
from runner.tasks.registry import TaskTemperature
from runner.tasks.table import task_int, task_keys, task_number

_KEYS = frozenset(
    {"kind", "families", "min_stratum", "max_stratum", "per_stratum", "seed", "temperature"}
)
MAX_STRATUM_LIMIT = PROCEDURAL_STRATUM_LIMIT


@dataclass(frozen=True, slots=True)
class ProceduralTask:
    """A balanced grid: every family x stratum x index in ``range(per_stratum)``."""

    families: tuple[str, ...] = tuple(FAMILIES)
    min_stratum: int = PROCEDURAL_MIN_STRATUM
    max_stratum: int = PROCEDURAL_MAX_STRATUM
    per_stratum: int = PROCEDURAL_PER_STRATUM
    seed: int = 0
    temperature: float = 0.0
    name: str = TASK_NAME

    def problems(self) -> Iterator[ProceduralProblem]:
        for family in self.families:
            module = FAMILIES[family]
            for stratum in range(self.min_stratum, self.max_stratum + 1):
                for index in range(self.per_stratum):
                    problem: ProceduralProblem = module.generate(stratum, index, self.seed)
                    yield problem

    def requests(
        self, problem: ProceduralProblem, endpoint: EndpointIdentity
    ) -> Iterator[RequestSpec]:
        for condition in VARIANTS:
            variant = problem.variant(condition)
            yield make_spec(
                endpoint,
                task=TASK_NAME,
                problem_id=problem.problem_id,
                condition=condition,
                messages=[{"role": "user", "content": variant.prompt}],
                temperature=self.temperature,
                probe=dict(variant.detail) or None,
            )

    def endpoint_records(
        self, problem: ProceduralProblem, endpoint: EndpointIdentity
    ) -> Iterator[dict[str, Any]]:
        return iter(())

    def highest_temperature(self) -> TaskTemperature:
        return TaskTemperature(self.temperature, "temperature")


def from_config(table: Mapping[str, Any], *, config_dir: Path, where: str) -> ProceduralTask:
    """Validate the ``[task]`` table of kind ``procedural`` (see the module docstring)."""
    task_keys(table, _KEYS, where, kind='kind = "procedural"')
    families = table.get("families", list(FAMILIES))
    if (
        not isinstance(families, list)
        or not families
        or any(f not in FAMILIES for f in families)
        or len(set(families)) != len(families)
    ):
        raise UsageError(
            f"[task].families must be a non-empty list of distinct names, got {shown(families)}",
            where=where,
            fix=f"Choose from: {', '.join(FAMILIES)}.",
        )
    lo = task_int(table, "min_stratum", PROCEDURAL_MIN_STRATUM, where, minimum=1)
    hi = task_int(table, "max_stratum", PROCEDURAL_MAX_STRATUM, where, minimum=1)
    if lo > hi or hi > MAX_STRATUM_LIMIT:
        raise UsageError(
            f"[task] needs min_stratum <= max_stratum <= {MAX_STRATUM_LIMIT}, got {lo}..{hi}",
            where=where,
            fix="Use e.g. min_stratum = 1, max_stratum = 5.",
        )
    temperature = task_number(table, "temperature", 0.0, where, low=0.0, high=2.0, example=0.0)
    return ProceduralTask(
        families=tuple(families),
        min_stratum=lo,
        max_stratum=hi,
        per_stratum=task_int(table, "per_stratum", PROCEDURAL_PER_STRATUM, where, minimum=1),
        seed=task_int(table, "seed", 0, where, minimum=0),
        temperature=temperature,
    )
