"""Task kind ``prontoqa``: the interventional grounding audit's workload (docs/protocol.md).

Config::

    [task]
    kind = "prontoqa"
    source = "paper50"        # "paper50" | "logiclm" | "native" | "generate"
    path = "../shared/data/grounding-audit-gpt4o/data/prontoqa_50"  # files; relative to config
    limit = 10                # optional: the first N problems
    samples = 5               # self-consistency samples of the original prompt
    sample_temperature = 0.7
    probe_repeats = 1         # each probe sent r times at T=0 (sample_index 0..r-1)
    template = "paper"        # prompt template (runner/tasks/prompts.py)
    fresh_words_from = "../shared/data/grounding-audit-gpt4o/evidence/gpt-4o"  # optional
    # source = "generate" only:
    n = 100
    hops_min = 3
    hops_max = 5
    distractors = [0, 2]      # a count or [min, max]
    seed = 0
    styles = ["plural"]       # rule sentence styles: "plural", "each", "every"
    ontology = "fictional"    # "fictional" | "true" | "false" | "number" (docs/tasks.md)

``path``: the ``prontoqa_50`` directory (or one ``pNNN.json``) for ``paper50``, ``dev.json``
for ``logiclm``, one ``Nhop.json`` or the directory of them for ``native``.

``fresh_words`` (a table ``problem_id -> {predicate = word}``) or ``fresh_words_from`` (an
evidence directory laid out like the pack, ``<problem_id>/probes/*.json``, whose recorded
substitutions are used wherever they are not the default ``zq`` form) choose the fresh word
of a substitution probe instead of ``zq`` + name: with the pack's directory, the probes of
the paper's 50 problems are the pack's, byte for byte.

Per problem and endpoint: 1 ``original`` (T=0); for each premise ``consistent``, ``local``
and ``surface`` probes (T=0, ``probe_repeats`` each); ``samples`` x ``sample`` (T =
``sample_temperature``, ``sample_index`` i). So ``1 + 3 k r + samples`` requests for a problem
with k premises.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import orjson

from cotaudit.constants import SELF_CONSISTENCY_SAMPLES, SELF_CONSISTENCY_TEMPERATURE
from cotaudit.domain.ontology import ONTOLOGIES, Ontology
from cotaudit.domain.pack_layout import pack_json
from cotaudit.domain.problem import Problem
from cotaudit.errors import UsageError
from cotaudit.schema import Message
from cotaudit.values import integer, shown
from runner.request_spec import EndpointIdentity, RequestSpec, make_spec
from runner.tasks.generator import RULE_STYLES, iter_generated
from runner.tasks.probes import build_probes
from runner.tasks.prompts import TEMPLATES, render_prompt
from runner.tasks.prontoqa_load import (
    SOURCE_PATHS,
    load_logiclm,
    load_native,
    load_paper_problems,
)
from runner.tasks.registry import TaskTemperature
from runner.tasks.table import task_int, task_keys, task_number, task_path

TASK_NAME = "prontoqa"
SOURCES: tuple[str, ...] = ("paper50", "logiclm", "native", "generate")
_COMMON_KEYS = frozenset(
    {
        "kind",
        "source",
        "limit",
        "samples",
        "sample_temperature",
        "probe_repeats",
        "template",
        "fresh_words",
        "fresh_words_from",
    }
)
_FILE_KEYS = frozenset({"path"})
_GENERATOR_KEYS = frozenset(
    {"n", "hops_min", "hops_max", "distractors", "seed", "styles", "ontology"}
)


@dataclass(frozen=True, slots=True)
class GeneratorParams:
    n: int
    hops_min: int = 3
    hops_max: int = 5
    distractors: tuple[int, int] = (0, 2)
    seed: int = 0
    styles: tuple[str, ...] = ("plural",)
    ontology: Ontology = "fictional"


@dataclass(frozen=True, slots=True)
class ProntoQATask:
    """The ``prontoqa`` task: problems from a source, requests per problem and endpoint."""

    source: str
    loaded: tuple[Problem, ...] = ()  # file sources, read (and validated) when built
    generator: GeneratorParams | None = None
    limit: int | None = None
    samples: int = SELF_CONSISTENCY_SAMPLES
    sample_temperature: float = SELF_CONSISTENCY_TEMPERATURE
    probe_repeats: int = 1
    template: str = "paper"
    fresh_words: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    name: str = TASK_NAME

    def problems(self) -> Iterator[Problem]:
        """The problems, in source order, at most ``limit``; generated ones lazily.

        Each carries ``extra["plan"]`` (samples and probe repeats per endpoint), so that the
        evaluator knows when a problem's responses are all in and can release it early.
        """
        if self.generator is not None:
            g = self.generator
            count = g.n if self.limit is None else min(g.n, self.limit)
            source: Iterator[Problem] = iter_generated(
                count,
                hops=(g.hops_min, g.hops_max),
                distractors=g.distractors,
                seed=g.seed,
                styles=g.styles,
                ontology=g.ontology,
            )
        else:
            source = iter(self.loaded[: self.limit])
        plan = {"samples": self.samples, "probe_repeats": self.probe_repeats}
        return (replace(p, extra={**p.extra, "plan": plan}) for p in source)

    def requests_per_problem(self, problem: Problem) -> int:
        return 1 + 3 * len(problem.premises) * self.probe_repeats + self.samples

    def _messages(self, premises: Any, question: str) -> list[Message]:
        return [{"role": "user", "content": render_prompt(premises, question, self.template)}]

    def requests(self, problem: Problem, endpoint: EndpointIdentity) -> Iterator[RequestSpec]:
        """Original, then each premise's three probes, then the self-consistency samples."""
        original = self._messages(problem.premises, problem.question)
        yield make_spec(
            endpoint,
            task=TASK_NAME,
            problem_id=problem.problem_id,
            condition="original",
            messages=original,
            temperature=0.0,
        )
        fresh = self.fresh_words.get(problem.problem_id)
        try:
            probes = build_probes(problem, fresh_words=fresh)
        except ValueError as exc:
            raise UsageError(
                str(exc),
                where=f"[task] {TASK_NAME}",
                fix="Rewrite the premise in a form of runner/tasks/sentences.py.",
            ) from exc
        for probe in probes:
            messages = self._messages(probe.premises, problem.question)
            record = probe.record()
            for r in range(self.probe_repeats):
                yield make_spec(
                    endpoint,
                    task=TASK_NAME,
                    problem_id=problem.problem_id,
                    condition=probe.condition,
                    messages=messages,
                    temperature=0.0,
                    target_premise=probe.target_premise,
                    sample_index=r,
                    probe=record,
                )
        for i in range(self.samples):
            yield make_spec(
                endpoint,
                task=TASK_NAME,
                problem_id=problem.problem_id,
                condition="sample",
                messages=original,
                temperature=self.sample_temperature,
                sample_index=i,
            )

    def highest_temperature(self) -> TaskTemperature:
        """The samples' temperature (the original and the probes go at 0)."""
        return TaskTemperature(
            self.sample_temperature if self.samples else 0.0, "sample_temperature"
        )

    def endpoint_records(
        self, problem: Problem, endpoint: EndpointIdentity
    ) -> Iterator[dict[str, Any]]:
        """For the embedded server's simulated reasoners: the model's ``truth`` records, one
        per text it writes (a reasoning model's answer and its reasoning trace each have one)."""
        if endpoint.provider != "local":
            return
        from runner.server.reasoners import truth_records

        try:
            records = truth_records(endpoint.model, problem)
        except ValueError as exc:  # a simulated model name with a bad option
            raise UsageError(
                str(exc),
                where=f"endpoint {endpoint.name!r}: model",
                fix="Fix the model's options (e.g. 'shortcut:p=0.5').",
            ) from exc
        for record in records:
            # The endpoint names the record in the stream, so a resumed run finds it and does
            # not write it again.
            yield {**record, "endpoint": endpoint.name}


# Config ---------------------------------------------------------------------------------


def _directory_source(path: Path) -> str | None:
    """The file source whose files a directory holds (by their names), if any."""
    if next(path.glob("p[0-9]*.json"), None) is not None:
        return "paper50"
    if next(path.glob("*hop.json"), None) is not None:
        return "native"
    return None


_DIRECTORY_HOLDS = {
    "paper50": "the paper's problem files (pNNN.json)",
    "native": "ProntoQA generator files (Nhop.json)",
}


def _other_source(path: Path, source: str) -> str:
    """Advice for a directory ``source`` cannot read: the source its files are for, if any."""
    found = _directory_source(path)
    if found is None or found == source:
        return ""
    return f' It holds {_DIRECTORY_HOLDS[found]}: set source = "{found}" to read them.'


def _load(source: str, path: Path) -> list[Problem]:
    if source == "paper50":
        if path.is_dir() and _directory_source(path) != "paper50":
            raise UsageError(
                "no problem files p<number>.json in this directory",
                where=str(path),
                fix=f"Point path at {SOURCE_PATHS[source]}.{_other_source(path, source)}",
            )
        return load_paper_problems(path)
    if source == "logiclm":
        if path.is_dir():
            # One file; reading a directory would fail as an OSError (exit 1), not bad input.
            raise UsageError(
                'source = "logiclm" reads one file, and this is a directory',
                where=str(path),
                fix=f"Point path at {SOURCE_PATHS[source]}.{_other_source(path, source)}",
            )
        return load_logiclm(path)
    files = sorted(path.glob("*hop.json")) if path.is_dir() else [path]
    if not files:
        raise UsageError(
            "no <N>hop.json files in this directory",
            where=str(path),
            fix=f"Point path at {SOURCE_PATHS[source]}.{_other_source(path, source)}",
        )
    return [problem for f in files for problem in load_native(f)]


def fresh_words_from_evidence(directory: Path) -> dict[str, dict[str, str]]:
    """Recorded non-default fresh words of an evidence directory, per problem id.

    Reads every ``<problem_id>/probes/*.json`` and keeps each ``substitution`` entry whose
    word is not ``zq`` + predicate.
    """
    out: dict[str, dict[str, str]] = {}
    files = sorted(directory.glob("*/probes/*.json"))
    if not files:
        # Pointed at the wrong folder (the pack's root, a problem file), the probes would
        # silently keep zq + name and differ from the pack's.
        raise UsageError(
            "no probe files <problem_id>/probes/*.json under this path",
            where=str(directory),
            fix="Point fresh_words_from at an evidence directory laid out like the pack's, "
            "e.g. grounding-audit-gpt4o/evidence/gpt-4o.",
        )
    for path in files:
        try:
            record = pack_json(path.read_bytes())
        except orjson.JSONDecodeError as exc:
            raise UsageError(f"not valid JSON ({exc})", where=str(path), fix="") from exc
        substitution = record.get("substitution") if isinstance(record, dict) else None
        if not isinstance(substitution, dict):
            continue
        for old, new in substitution.items():
            if isinstance(new, str) and new != "zq" + old:
                out.setdefault(path.parent.parent.name, {})[old] = new
    return out


def _fresh_words(
    table: Mapping[str, Any], config_dir: Path, where: str
) -> dict[str, dict[str, str]]:
    words: dict[str, dict[str, str]] = {}
    if "fresh_words_from" in table:
        words = fresh_words_from_evidence(task_path(table, "fresh_words_from", config_dir, where))
    given = table.get("fresh_words", {})
    if not isinstance(given, Mapping) or not all(
        isinstance(m, Mapping) and all(isinstance(v, str) for v in m.values())
        for m in given.values()
    ):
        raise UsageError(
            "'fresh_words' must be a table of problem id -> {predicate = word}",
            where=f"{where}: [task].fresh_words",
            fix='Write [task.fresh_words] p019 = { clempus = "frondus" }.',
        )
    for problem_id, mapping in given.items():
        words.setdefault(str(problem_id), {}).update({str(k): v for k, v in mapping.items()})
    return words


def _generator(table: Mapping[str, Any], where: str) -> GeneratorParams:
    n = task_int(table, "n", 0, where, minimum=1) if "n" in table else None
    if n is None:
        raise UsageError(
            "missing 'n'", where=f"{where}: [task].n", fix="Set n = 100 (problems to generate)."
        )
    hops_min = task_int(table, "hops_min", 3, where, minimum=1)
    hops_max = task_int(table, "hops_max", max(5, hops_min), where, minimum=hops_min)
    raw = table.get("distractors", [0, 2])
    pair = [raw, raw] if isinstance(raw, int) and not isinstance(raw, bool) else raw
    at, fix = f"{where}: [task].distractors", "Set distractors = [0, 2]."
    if not isinstance(pair, list) or len(pair) != 2:
        raise UsageError(
            f"'distractors' must be a count or [min, max] of counts >= 0, got {shown(raw)}",
            where=at,
            fix=fix,
        )
    low, high = (integer(x, name="'distractors'", where=at, fix=fix, low=0) for x in pair)
    if low > high:
        raise UsageError(
            f"'distractors' must be [min, max] with min <= max, got {shown(raw)}",
            where=at,
            fix=fix,
        )
    styles = table.get("styles", ["plural"])
    if (
        not isinstance(styles, list)
        or not styles
        or not all(isinstance(s, str) and s in RULE_STYLES for s in styles)
    ):
        raise UsageError(
            f"'styles' must be a non-empty list of {', '.join(RULE_STYLES)}, got {shown(styles)}",
            where=f"{where}: [task].styles",
            fix='Set styles = ["plural", "each", "every"].',
        )
    ontology = table.get("ontology", "fictional")
    if ontology not in ONTOLOGIES:
        raise UsageError(
            f"'ontology' must be one of {', '.join(ONTOLOGIES)}, got {shown(ontology)}",
            where=f"{where}: [task].ontology",
            fix='Set ontology = "true" (real categories), "false", "number" or "fictional".',
        )
    if ontology != "fictional" and hops_max > 5:
        raise UsageError(
            f"the {ontology} ontology has chains of at most 5 hops, got hops_max = {hops_max}",
            where=f"{where}: [task].hops_max",
            fix="Set hops_max = 5 or less.",
        )
    return GeneratorParams(
        n=n,
        hops_min=hops_min,
        hops_max=hops_max,
        distractors=(low, high),
        seed=task_int(table, "seed", 0, where, minimum=0),
        styles=tuple(styles),
        ontology=ontology,
    )


def from_config(table: Mapping[str, Any], *, config_dir: Path, where: str) -> ProntoQATask:
    """Build the task from the ``[task]`` table; ``UsageError`` naming ``[task].<key>``."""
    source = table.get("source")
    if source not in SOURCES:
        raise UsageError(
            "missing 'source'" if source is None else f"unknown source {shown(source)}",
            where=f"{where}: [task].source",
            fix=f"Use one of: {', '.join(SOURCES)}.",
        )
    allowed = _COMMON_KEYS | (_GENERATOR_KEYS if source == "generate" else _FILE_KEYS)
    files = ", ".join(s for s in SOURCES if s != "generate")
    task_keys(
        table,
        allowed,
        where,
        kind=f'source = "{source}"',
        elsewhere=(_FILE_KEYS, f"the file sources ({files})")
        if source == "generate"
        else (_GENERATOR_KEYS, 'source = "generate"'),
    )
    temperature = task_number(
        table,
        "sample_temperature",
        SELF_CONSISTENCY_TEMPERATURE,
        where,
        low=0.0,
        high=2.0,
        example=SELF_CONSISTENCY_TEMPERATURE,
    )
    template = table.get("template", "paper")
    if template not in TEMPLATES:
        raise UsageError(
            f"unknown template {shown(template)}",
            where=f"{where}: [task].template",
            fix=f"Use one of: {', '.join(TEMPLATES)}.",
        )
    limit = task_int(table, "limit", 1, where, minimum=1) if "limit" in table else None
    common: dict[str, Any] = {
        "limit": limit,
        "samples": task_int(table, "samples", SELF_CONSISTENCY_SAMPLES, where, minimum=0),
        "sample_temperature": temperature,
        "probe_repeats": task_int(table, "probe_repeats", 1, where, minimum=1),
        "template": template,
        "fresh_words": _fresh_words(table, config_dir, where),
    }
    if source == "generate":
        return ProntoQATask(source=source, generator=_generator(table, where), **common)
    path = task_path(table, "path", config_dir, where)
    problems = _load(source, path)
    if not problems:
        # An empty plan would "succeed" with nothing to audit: a run directory, or a plan
        # file, holding no request, which no evaluation can use.
        raise UsageError(
            f"no problems in {path}",
            where=f"{where}: [task].path",
            fix=f"Point path at a file with problems, e.g. {SOURCE_PATHS[source]}.",
        )
    ids = [p.problem_id for p in problems]
    if len(set(ids)) != len(ids):
        duplicate = next(i for i in ids if ids.count(i) > 1)
        raise UsageError(
            f"duplicate problem id {duplicate!r}",
            where=str(path),
            fix="Give problems distinct ids.",
        )
    unknown = sorted(set(table.get("fresh_words", {})) - set(ids))
    if unknown:
        # A mistyped id (p19 for p019) would otherwise leave its probes silently at zq + name.
        raise UsageError(
            f"fresh_words names {unknown[0]!r}, which is not a problem of {path}",
            where=f"{where}: [task].fresh_words",
            fix=f"Use the problems' ids (such as {ids[0]!r}).",
        )
    return ProntoQATask(source=source, loaded=tuple(problems), **common)
