"""Whether the records of a stream belong to a run's plan.

A resuming run asks it before it appends (a stream another config wrote, copied into the run
directory or joined to its own with ``cat``, is refused rather than mixed with this run's
records), and ``cotaudit verify`` asks it before it certifies a run as what its manifest says
(:func:`plan_of_run`). A record belongs to the plan when this config could have written it:

- a problem record is one of the task's problems, with the same content: its ``schema``
  aside, and its ``extra.plan`` (how many samples and probe repeats each endpoint is sent)
  where the record has none, as versions before it wrote them;
- a response is of one of the config's endpoints, answered by its provider and model (and,
  for a server other than the local one, its host), with its ``max_tokens``, ``top_p`` and
  ``stop``, of the config's task, in the run's shard, for a problem the stream declared
  before it; a per-endpoint record (``truth``, ``sample_summary``) is of one of the
  endpoints, for a problem declared before it;
- the responses of the first problem the stream declares are the requests the plan makes for
  it, with the same cache keys: what tells apart a config that differs only in its prompt, a
  temperature or an endpoint option (``revision``, reasoning settings).

Cost: a few dictionary lookups per record, while the stream is read anyway, and one walk of
the task's problems (not of their requests), which stops as soon as it has met every problem
the stream holds. A fresh run (an empty stream) walks nothing. Requests of later problems are
not rebuilt, so a stream that differs from the plan only in the prompts of its later problems
is not told apart here.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from cotaudit.caller_terms import option
from cotaudit.errors import UsageError
from cotaudit.schema import MANIFEST_NAME, JSONDict, canonical_json
from runner.config import SweepConfig, config_from_mapping
from runner.manifest import Shard, read_manifest
from runner.request_spec import EndpointIdentity
from runner.tasks.registry import Task

PROBLEM_DIGEST_BYTES = 16
# The endpoint's own parameters (a task sets the rest), in the order _watch_response reads them.
CHECKED_PARAMS = ("max_tokens", "top_p", "stop")
PER_ENDPOINT_KINDS = frozenset({"truth", "sample_summary"})


@dataclass(frozen=True, slots=True)
class ForeignRecord:
    """The first record of a stream that its plan would not have written."""

    line: int  # 1-based
    record: str  # what it is: "problem g4-00001", "response e/g4-00001/original/-/0"
    why: str  # how it differs from the plan

    def describe(self, stream: Path | str) -> str:
        return f"{stream}:{self.line}: {self.record} {self.why}"


def _has_plan(record: Mapping[str, Any]) -> bool:
    extra = record.get("extra")
    return isinstance(extra, Mapping) and "plan" in extra


def _problem_digest(record: Mapping[str, Any], *, with_plan: bool = True) -> bytes:
    content = {k: v for k, v in record.items() if k != "schema"}
    extra = content.get("extra")
    if not with_plan and isinstance(extra, Mapping):
        content["extra"] = {k: v for k, v in extra.items() if k != "plan"}
    return hashlib.blake2b(canonical_json(content), digest_size=PROBLEM_DIGEST_BYTES).digest()


def _shown(value: Any) -> str:
    if value is None:
        return "unset"
    if isinstance(value, str):
        return f"'{value}'"
    if isinstance(value, list | dict):
        return canonical_json(value).decode("utf-8")
    return str(value)


class _Expected(NamedTuple):
    """What every response of an endpoint says about it, as :meth:`_watch_response` tests."""

    name: str
    answered: tuple[str, str]  # provider, model
    host: str | None  # None for the local server: its host is its port, new each run
    params: tuple[Any, ...]  # CHECKED_PARAMS, in order

    @classmethod
    def of(cls, ident: EndpointIdentity) -> _Expected:
        return cls(
            ident.name,
            (ident.provider, ident.model),
            None if ident.provider == "local" else ident.host,
            tuple(ident.params.get(key) for key in CHECKED_PARAMS),
        )


@dataclass(slots=True)
class _Response:
    line: int
    request_id: str
    endpoint: str
    cache_key: str


@dataclass(slots=True)
class StreamPlanCheck:
    """Watches a stream's records (:meth:`watch`, one call per record, in stream order) and
    then says which is the first that ``task`` for ``identities`` would not have written
    (:meth:`finish`)."""

    task: Task
    task_kind: str
    identities: Sequence[EndpointIdentity]
    shard: Shard | None = None
    foreign: ForeignRecord | None = None  # the first one found while watching
    # problem id -> (digest of its first record, its line, whether it has an extra.plan)
    problems: dict[str, tuple[bytes, int, bool]] = field(default_factory=dict)
    foreign_problems: int = 0  # problems not in the plan, or other than the plan's (finish)
    _endpoints: dict[str, EndpointIdentity] = field(default_factory=dict)
    _expected: dict[str, _Expected] = field(default_factory=dict)
    _first_problem: str | None = None
    _first_responses: list[_Response] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._endpoints = {ident.name: ident for ident in self.identities}
        self._expected = {ident.name: _Expected.of(ident) for ident in self.identities}

    def _found(self, line: int, record: str, why: str) -> None:
        if self.foreign is None:
            self.foreign = ForeignRecord(line, record, why)

    def watch(self, line: int, record: JSONDict) -> None:
        """Look at one record (its 1-based ``line``)."""
        kind = record.get("kind")
        if kind == "problem":
            pid = str(record.get("problem_id"))
            digest = _problem_digest(record)
            seen = self.problems.setdefault(pid, (digest, line, _has_plan(record)))
            if seen[0] != digest:
                self._found(
                    line,
                    f"problem {pid}",
                    f"is declared again with other content than at line {seen[1]}: the stream "
                    "joins streams of different problem sets",
                )
            elif self._first_problem is None:
                self._first_problem = pid
        elif kind == "response":
            self._watch_response(line, record)
        elif kind in PER_ENDPOINT_KINDS:
            pid = str(record.get("problem_id"))
            what = f"{kind} record of {pid}"
            endpoint = record.get("endpoint")
            if endpoint is not None and str(endpoint) not in self._endpoints:
                self._found(line, what, self._unknown_endpoint(endpoint))
            elif pid not in self.problems:
                self._found(
                    line, what, "belongs to a problem the stream does not declare before it"
                )

    def _unknown_endpoint(self, endpoint: object) -> str:
        return (
            f"is of endpoint {_shown(endpoint)}, which this config does not have (it has "
            f"{', '.join(repr(name) for name in self._endpoints)})"
        )

    def _watch_response(self, line: int, record: JSONDict) -> None:
        # One test of everything in the usual case; the reason is worked out only for a record
        # that fails it (and only for the first such record).
        expected = self._expected.get(str(record.get("endpoint")))
        model, params = record.get("model"), record.get("params")
        pid = str(record.get("problem_id"))
        if (
            expected is not None
            and type(model) is dict
            and type(params) is dict
            and (model.get("provider"), model.get("model")) == expected.answered
            and (expected.host is None or model.get("host") == expected.host)
            and record.get("task") == self.task_kind
            and (params.get("max_tokens"), params.get("top_p"), params.get("stop"))
            == expected.params
            and pid in self.problems
            and (self.shard is None or self.shard.keeps(str(record.get("request_id"))))
        ):
            if pid == self._first_problem:
                rid, key = str(record.get("request_id")), str(record.get("cache_key"))
                self._first_responses.append(_Response(line, rid, expected.name, key))
            return
        if self.foreign is None:
            self._found(line, f"response {record.get('request_id')}", self._response_why(record))

    def _response_why(self, record: JSONDict) -> str:
        """How a response that :meth:`_watch_response` refused differs from the plan."""
        endpoint = record.get("endpoint")
        ident = self._endpoints.get(str(endpoint))
        if ident is None:
            return self._unknown_endpoint(endpoint)
        model = record.get("model")
        model = model if isinstance(model, Mapping) else {}
        answered = (model.get("provider"), model.get("model"))
        if answered != (ident.provider, ident.model):
            return (
                f"was answered by {answered[0]}/{answered[1]}; this config's endpoint "
                f"'{ident.name}' is {ident.provider}/{ident.model}"
            )
        if self._expected[ident.name].host is not None and model.get("host") != ident.host:
            return (
                f"was sent to {_shown(model.get('host'))}; endpoint '{ident.name}' is at "
                f"{_shown(ident.host)}"
            )
        if record.get("task") != self.task_kind:
            return f"is of task {_shown(record.get('task'))}; this run's task is '{self.task_kind}'"
        params = record.get("params")
        params = params if isinstance(params, Mapping) else {}
        for key in CHECKED_PARAMS:
            if params.get(key) != ident.params.get(key):
                return (
                    f"was sent with {key} {_shown(params.get(key))}; endpoint '{ident.name}' "
                    f"sends {_shown(ident.params.get(key))}"
                )
        if str(record.get("problem_id")) not in self.problems:
            return "belongs to a problem the stream does not declare before it"
        return f"is not in shard {self.shard}, this run directory's"

    def finish(self) -> ForeignRecord | None:
        """The first record (by line) the plan would not have written, or None.

        Walks the task's problems until it has met every problem the stream declares (all of
        them when one is not the plan's), and rebuilds the requests of the first one."""
        unmet = dict(self.problems)
        if unmet:
            for problem in self.task.problems():
                seen = unmet.pop(problem.problem_id, None)
                if seen is None:
                    continue
                planned = _problem_digest(problem.to_record(), with_plan=seen[2])
                if planned != seen[0]:
                    self.foreign_problems += 1
                    self._found_earlier(seen[1], f"problem {problem.problem_id}", _OTHER_PROBLEM)
                if problem.problem_id == self._first_problem:
                    self._check_first_requests(problem)
                if not unmet:
                    break
        for pid, (_, line, _) in unmet.items():
            self.foreign_problems += 1
            self._found_earlier(
                line, f"problem {pid}", "is not one of the problems this config plans"
            )
        return self.foreign

    def _found_earlier(self, line: int, record: str, why: str) -> None:
        if self.foreign is None or line < self.foreign.line:
            self.foreign = ForeignRecord(line, record, why)

    def _check_first_requests(self, problem: Any) -> None:
        planned: dict[str, dict[str, str]] = {}
        for name, ident in self._endpoints.items():
            planned[name] = {
                spec.request_id: spec.cache_key
                for spec in self.task.requests(problem, ident)
                if self.shard is None or self.shard.keeps(spec.request_id)
            }
        for response in self._first_responses:
            key = planned[response.endpoint].get(response.request_id)
            what = f"response {response.request_id}"
            if key is None:
                self._found_earlier(
                    response.line, what, "is not a request this config's plan makes"
                )
            elif key != response.cache_key:
                self._found_earlier(
                    response.line,
                    what,
                    "was sent as another request than this config's plan makes (its cache key "
                    "differs: another prompt, temperature or endpoint option, or another "
                    "cotaudit version's request)",
                )


_OTHER_PROBLEM = (
    "has other content than this config's problem of that id (another seed, source or "
    "generator setting, or other samples or probe_repeats)"
)


def plan_check(
    config: SweepConfig, shard: Shard | None, task: Task | None = None
) -> StreamPlanCheck:
    """The check of a stream against the plan of ``config`` (``task``: its task, if built)."""
    return StreamPlanCheck(
        task=task if task is not None else config.build_task(),
        task_kind=str(config.task.get("kind")),
        identities=[ep.identity() for ep in config.endpoints],
        shard=shard,
    )


def foreign_stream_error(stream: Path, foreign: ForeignRecord) -> UsageError:
    """What a resume says of a stream whose records are not all of its plan."""
    return UsageError(
        f"{foreign.record} {foreign.why}: this stream holds records of another config (copied "
        "here, or joined to this run's), and appending to it would mix two runs",
        where=f"{stream}:{foreign.line}",
        fix="Nothing was written. Run this config into another run directory "
        f"({option('run_dir', 'DIR')}: requests already answered come from the response cache), "
        "or put back the stream "
        "this run directory's manifest belongs to.",
        in_run_terms=True,
    )


@dataclass(frozen=True, slots=True)
class RunPlan:
    """What ``cotaudit verify`` can check a run's stream against: the plan its manifest
    records (``check``), or why it cannot (``note``), or how the manifest contradicts itself
    (``failure``)."""

    check: StreamPlanCheck | None = None
    note: str | None = None
    failure: str | None = None


def _config_dir(manifest: Mapping[str, Any], run_dir: Path) -> Path:
    """Where the task's relative paths were resolved from: the config file's directory when
    it is still where the manifest says (relative to the working directory), else the run's."""
    source = manifest.get("config_source")
    if isinstance(source, str) and Path(source).is_file():
        return Path(source).resolve().parent
    return run_dir


def plan_of_run(run_dir: Path) -> RunPlan:
    """The plan of the run whose manifest is in ``run_dir``, rebuilt from the manifest's
    config; an empty :class:`RunPlan` for a directory without a run manifest (a stream on its
    own, or one ``import-evidence`` wrote: it records no plan)."""
    where = run_dir / MANIFEST_NAME
    try:
        manifest = read_manifest(run_dir)
    except UsageError as exc:
        return RunPlan(note=f"{where}: {exc.what}: the stream is not checked against its plan")
    if manifest is None or "plan_hash" not in manifest:
        return RunPlan()
    config_table = manifest.get("config")
    output_config = manifest.get("output_config")
    edited = RunPlan(
        failure=f"{where}: its config plans another run than its output_config and plan_hash "
        "record (the manifest was edited)"
    )
    if not isinstance(config_table, Mapping) or not isinstance(output_config, Mapping):
        return edited
    if config_table.get("task") != output_config.get("task"):
        return edited
    try:
        config = config_from_mapping(
            config_table,
            config_dir=_config_dir(manifest, run_dir),
            where=f"{where}: config",
            recorded=True,
        )
        shard_text = manifest.get("shard")
        shard = Shard.parse(str(shard_text)) if shard_text else None
    except UsageError as exc:
        return RunPlan(failure=f"{where}: its config is not one this cotaudit reads ({exc})")
    if config.output_config() != output_config:
        return edited
    try:
        task = config.build_task()
    except UsageError as exc:
        # The table is the evaluated one; what it names (a problems file) is not at hand.
        return RunPlan(
            note=f"{where}: the run's plan cannot be rebuilt from it ({exc}); the stream is "
            "not checked against it"
        )
    return RunPlan(check=plan_check(config, shard, task))
