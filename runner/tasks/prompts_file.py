"""Task kind ``prompts``: a JSONL file of prompts, one request per prompt and sample.

Config::

    [task]
    kind = "prompts"
    path = "prompts.jsonl"   # relative to the config file
    temperature = 0.0         # optional default for every prompt
    samples = 1               # optional default number of samples per prompt
    system = "..."            # optional default system prompt

Each line: ``{"id": "...", "prompt": "..."}`` with optional ``system``, ``temperature`` and
``samples`` overriding the defaults. The file is validated once when the task is built (every
line, ids unique), before anything is written. A file of at most ``KEEP_PARSED_MAX_BYTES`` keeps
the prompts parsed then, so planning does not parse every line a second time; a larger file is
re-read lazily when planning, so a plan of any size stays small.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, NamedTuple

import orjson

from cotaudit import values
from cotaudit.constants import INT_MAX
from cotaudit.errors import UsageError
from cotaudit.schema import SCHEMA_VERSION, Message
from runner.request_spec import EndpointIdentity, RequestSpec, make_spec
from runner.tasks.prontoqa_load import FORMATS, detect_format
from runner.tasks.registry import TaskTemperature
from runner.tasks.table import task_keys, task_path

TASK_NAME = "prompts"
_TASK_KEYS = frozenset({"kind", "path", "temperature", "samples", "system"})
_LINE_KEYS = frozenset({"id", "prompt", "system", "temperature", "samples"})
# Prompts files up to this size keep their validated prompts in memory for planning (about
# 3x the file size as Python objects); larger files are read again each time the plan is walked,
# so that memory does not grow with the file.
KEEP_PARSED_MAX_BYTES = 16 * 2**20


class PromptProblem(NamedTuple):
    """One prompt of the file; its ``problem`` record carries the prompt itself.

    A named tuple: one is built per line at validation, and a frozen dataclass's
    field-by-field ``__init__`` cost more than parsing the line."""

    problem_id: str
    prompt: str
    system: str | None
    temperature: float
    samples: int

    def messages(self) -> list[Message]:
        out: list[Message] = []
        if self.system:
            out.append({"role": "system", "content": self.system})
        out.append({"role": "user", "content": self.prompt})
        return out

    def to_record(self) -> dict[str, Any]:
        return {
            "kind": "problem",
            "schema": SCHEMA_VERSION,
            "task": TASK_NAME,
            "problem_id": self.problem_id,
            "prompt": self.prompt,
            "system": self.system,
            "temperature": self.temperature,
            "samples": self.samples,
        }


@dataclass(frozen=True, slots=True)
class PromptsTask:
    path: Path
    temperature: float = 0.0
    samples: int = 1
    system: str | None = None
    name: str = TASK_NAME
    # The prompts as validated by from_config (small files only); None: read the file lazily.
    parsed: tuple[PromptProblem, ...] | None = field(default=None, repr=False, compare=False)
    # The highest temperature of any prompt, and where it is set (found by from_config).
    hottest: TaskTemperature | None = field(default=None, repr=False, compare=False)

    def problems(self) -> Iterator[PromptProblem]:
        if self.parsed is not None:
            yield from self.parsed
            return
        for _, problem in self._read():
            yield problem

    def _read(self) -> Iterator[tuple[int, PromptProblem]]:
        """(line number in the file, prompt) for each non-blank line."""
        with self.path.open("rb") as f:
            for number, line in enumerate(f, start=1):
                if line.strip():
                    yield number, self._parse(line, number)

    def requests(self, problem: PromptProblem, endpoint: EndpointIdentity) -> Iterator[RequestSpec]:
        messages = problem.messages()
        for k in range(problem.samples):
            yield make_spec(
                endpoint,
                task=TASK_NAME,
                problem_id=problem.problem_id,
                condition="prompt",
                messages=messages,
                temperature=problem.temperature,
                sample_index=k,
            )

    def endpoint_records(
        self, problem: PromptProblem, endpoint: EndpointIdentity
    ) -> Iterator[dict[str, Any]]:
        return iter(())

    def highest_temperature(self) -> TaskTemperature:
        """The hottest prompt's temperature: a line's own, or the ``[task]`` default."""
        if self.hottest is None:
            return self._validated(keep=False)[2]
        return self.hottest

    def validate(self) -> int:
        """Read every line once; ``UsageError`` naming file:line and field. Returns the count."""
        return self._validated(keep=False)[0]

    def _validated(self, *, keep: bool) -> tuple[int, list[PromptProblem], TaskTemperature]:
        """Validate the file (not ``parsed``); the count, the prompts when ``keep``, and the
        highest temperature (a line above the ``[task]`` default is named by its line)."""
        seen: set[str] = set()
        kept: list[PromptProblem] = []
        hottest = TaskTemperature(self.temperature, "temperature")
        for number, problem in self._read():
            if problem.temperature > hottest.value:
                hottest = TaskTemperature(
                    problem.temperature, "temperature", f"{self.path}:{number}"
                )
            if problem.problem_id in seen:
                raise UsageError(
                    f"duplicate id {problem.problem_id!r}",
                    where=f"{self.path}:{number}",
                    fix="Give every prompt a distinct id.",
                )
            seen.add(problem.problem_id)
            if keep:
                kept.append(problem)
        if not seen:
            raise UsageError("no prompts", where=str(self.path), fix="Add JSONL lines.")
        return len(seen), kept, hottest

    def _parse(self, line: bytes, number: int) -> PromptProblem:
        try:
            data = orjson.loads(line)
        except orjson.JSONDecodeError as exc:
            self._refuse_a_json_document(number)
            raise UsageError(
                f"not valid JSON ({exc})",
                where=f"{self.path}:{number}",
                fix='Write {"id": ..., "prompt": ...}.',
            ) from exc
        # Fast path (every line is parsed at validation, and again when planning from a large
        # file): exact type checks only; anything unusual goes through _checked for a precise
        # message.
        if type(data) is dict and _LINE_KEYS.issuperset(data):
            pid, prompt = data.get("id"), data.get("prompt")
            system = data.get("system", self.system)
            temperature = data.get("temperature", self.temperature)
            samples = data.get("samples", self.samples)
            if (
                type(pid) is str
                and pid
                and "/" not in pid
                and type(prompt) is str
                and prompt
                and (system is None or type(system) is str)
                and type(temperature) in (int, float)
                and 0 <= temperature <= 2
                and type(samples) is int
                and 1 <= samples <= INT_MAX
            ):
                return PromptProblem(pid, prompt, system, float(temperature), samples)
        if not isinstance(data, dict):
            self._refuse_a_json_document(number)
        return self._checked(data, f"{self.path}:{number}")

    def _refuse_a_json_document(self, number: int) -> None:
        """A first line that is not a JSON object may be the start of one JSON document (a
        ProntoQA file, an array of prompts): say so, and which task kind reads it, rather
        than report its first line's JSON error. Only for a file small enough to keep parsed
        (``KEEP_PARSED_MAX_BYTES``): a larger one is not parsed whole for a message."""
        if self.path.stat().st_size > KEEP_PARSED_MAX_BYTES:
            return
        with self.path.open("rb") as f:
            first = next((n for n, line in enumerate(f, start=1) if line.strip()), None)
        if first != number:
            return
        try:
            data = orjson.loads(self.path.read_bytes())
        except orjson.JSONDecodeError:
            return
        found = detect_format(data)
        what = FORMATS[found] if found is not None else "a single JSON document"
        fix = (
            f'Read it with kind = "prontoqa" and source = "{found}", or write'
            if found is not None
            else "Write"
        )
        raise UsageError(
            f"this is {what}, not a prompts file (JSON Lines: one object per line)",
            where=str(self.path),
            fix=f'{fix} one {{"id": ..., "prompt": ...}} object per line.',
        )

    def _checked(self, data: Any, where: str) -> PromptProblem:
        if not isinstance(data, dict):
            raise UsageError("not a JSON object", where=where, fix='Write {"id": ..., ...}.')
        unknown = sorted(set(data) - _LINE_KEYS)
        if unknown:
            raise UsageError(
                f"unknown field {unknown[0]!r}",
                where=f"{where}: {unknown[0]}",
                fix=f"Accepted fields: {', '.join(sorted(_LINE_KEYS))}.",
            )
        pid, prompt = data.get("id"), data.get("prompt")
        if not isinstance(pid, str) or not pid or "/" in pid:
            raise UsageError(
                f"'id' must be a non-empty string without '/', got {values.shown(pid, json=True)}",
                where=f"{where}: id",
                fix="Use a short unique id such as q001.",
            )
        if not isinstance(prompt, str) or not prompt:
            raise UsageError(
                "'prompt' must be a non-empty string", where=f"{where}: prompt", fix="Add one."
            )
        return PromptProblem(
            problem_id=pid,
            prompt=prompt,
            system=_system(data.get("system", self.system), f"{where}: system", json=True),
            temperature=_temperature(
                data.get("temperature", self.temperature), f"{where}", json=True
            ),
            samples=_samples(data.get("samples", self.samples), f"{where}", json=True),
        )


def _system(value: Any, where: str, *, json: bool = False) -> str | None:
    """A system prompt or None; ``where`` is the full location of the field; ``json``: the
    value comes from a JSONL line (for the message's type names)."""
    if value is not None and not isinstance(value, str):
        raise UsageError(
            f"'system' must be a string, got {values.shown(value, json=json)}",
            where=where,
            fix="Use a string or leave it out.",
        )
    return value


def _temperature(value: Any, where: str, *, json: bool = False) -> float:
    return values.number(
        value,
        name="'temperature'",
        where=f"{where}: temperature",
        fix="Use e.g. 0 or 0.7.",
        low=0.0,
        high=2.0,
        given=values.shown(value, json=json),
    )


def _samples(value: Any, where: str, *, json: bool = False) -> int:
    return values.integer(
        value,
        name="'samples'",
        where=f"{where}: samples",
        fix="Use e.g. 1 or 5.",
        low=1,
        given=values.shown(value, json=json),
    )


def from_config(table: Mapping[str, Any], *, config_dir: Path, where: str) -> PromptsTask:
    """Build (and validate) the task from the config's ``[task]`` table."""
    task_keys(table, _TASK_KEYS, where, kind='kind = "prompts"')
    path = task_path(
        table, "path", config_dir, where, points_at="a JSONL file of prompts", file=True
    )
    system = _system(table.get("system"), f"{where}: [task].system")
    task = PromptsTask(
        path=path,
        temperature=_temperature(table.get("temperature", 0.0), f"{where}: [task]"),
        samples=_samples(table.get("samples", 1), f"{where}: [task]"),
        system=system,
    )
    keep = path.stat().st_size <= KEEP_PARSED_MAX_BYTES
    _, problems, hottest = task._validated(keep=keep)
    return replace(task, parsed=tuple(problems) if keep else None, hottest=hottest)
