"""Task kinds of a sweep config, resolved lazily so each kind lives in its own module.

A task module exposes ``from_config(table, *, config_dir, where) -> Task``. A ``Task``
yields its problems (each with ``problem_id`` and ``to_record()``) and, per problem and
endpoint, the request specs to send. Problems are regenerated per endpoint: cheap, and it
keeps every plan lazy.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, NamedTuple, Protocol

from cotaudit.errors import UsageError
from cotaudit.values import nearest, shown
from runner.request_spec import EndpointIdentity, RequestSpec


class TaskProblem(Protocol):
    @property
    def problem_id(self) -> str: ...

    def to_record(self) -> dict[str, Any]: ...


class TaskTemperature(NamedTuple):
    """The highest temperature a task's requests are sent, and the key that sets it."""

    value: float
    name: str  # the key: "temperature", "sample_temperature"
    file: str | None = None  # None: the config's [task] table; else "path:line" of a task file


class Task(Protocol):
    name: str

    def problems(self) -> Iterator[TaskProblem]: ...

    def requests(self, problem: Any, endpoint: EndpointIdentity) -> Iterator[RequestSpec]: ...

    def endpoint_records(
        self, problem: Any, endpoint: EndpointIdentity
    ) -> Iterator[dict[str, Any]]:
        """Extra records for (problem, endpoint), e.g. a simulated model's ``truth``; written
        once, after the problem record and before the responses. Usually empty."""
        ...

    def highest_temperature(self) -> TaskTemperature:
        """The highest temperature any request is sent at (0 when none samples), so a config
        can be checked against what each endpoint's API takes before anything is sent."""
        ...


TASK_MODULES: dict[str, str] = {
    "prompts": "runner.tasks.prompts_file",
    "prontoqa": "runner.tasks.prontoqa_task",
    "procedural": "runner.tasks.procedural.task",
}


def build_task(table: Mapping[str, Any], *, config_dir: Path, where: str) -> Task:
    """Build the task described by the config's ``[task]`` table."""
    kind = table.get("kind")
    if kind not in TASK_MODULES:
        kinds = f"Use one of: {', '.join(sorted(TASK_MODULES))}."
        close = nearest(kind, TASK_MODULES) if isinstance(kind, str) else None
        if kind is None:
            what = "missing 'kind'"
        elif isinstance(kind, str):
            what = f'unknown task kind "{kind}"'
        else:
            what = f"the task kind must be a string, not {shown(kind)}"
        raise UsageError(
            what,
            where=f"{where}: [task].kind",
            fix=f"Did you mean {close!r}? {kinds}" if close else kinds,
        )
    module = importlib.import_module(TASK_MODULES[kind])
    task: Task = module.from_config(table, config_dir=config_dir, where=where)
    return task
