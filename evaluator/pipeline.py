"""End-to-end evaluation of a JSONL stream: raw outputs -> pairs -> verdicts -> certificates.

Records are consumed in stream order by :class:`Evaluation`. ``problem`` and ``truth`` records
are read as they come; ``response`` records (and, for imported packs, ``sample_summary``
records) are grouped per (endpoint, problem) by :class:`evaluator.grouping.GroupCollector`,
which releases a group as soon as it is complete. A released group becomes an
:class:`~evaluator.jobs.AuditJob`, audited by :func:`evaluator.jobs.run_job` (parse, align,
decide, certify, and the per-problem statistics: a pure function of the problem's records),
here or in a worker process (``evaluator.parallel``); its summaries are merged, in the order
the groups completed, into their section's :class:`evaluator.tally.ModelTally`. So a long
stream is audited problem by problem, memory holds only the open groups and per-problem
statistics, and the result is the same however many processes audited it.

The statistics run once per section at the end: :func:`model_report` computes every section
and hands them to ``evaluator.tables.report_from_statistics``, which assembles it once.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from itertools import chain
from pathlib import Path
from typing import Any

from cotaudit.constants import SELF_CONSISTENCY_SAMPLES
from cotaudit.domain.problem import Problem
from cotaudit.errors import UsageError
from cotaudit.schema import SCHEMA_VERSION, JSONDict, validate_record
from evaluator.align import proof_conclusions
from evaluator.audit import (
    PARSE_CONDITIONS,
    PROBE_CONDITIONS,
    AuditSettings,
    ProblemAudit,
    Trace,
    VanishedReading,
)
from evaluator.cascade import EVALUATE_CASCADE_MODE, CascadeMode
from evaluator.grouping import GroupCollector, ResponseGroup
from evaluator.jobs import AuditJob, AuditSummary, JobSettings, run_job
from evaluator.progress import EvaluationProgress
from evaluator.source import STDIN, iter_raw_records
from evaluator.stream_check import StreamCheck
from evaluator.stream_digest import StreamDigest
from evaluator.tables import report_from_statistics
from evaluator.tally import ModelTally
from evaluator.truth import TRUTH_ROWS, Truth, truth_from_record

__all__ = [
    "EvaluateOptions",
    "Evaluation",
    "ModelTally",
    "ProblemAudit",
    "evaluate_records",
    "model_report",
    "require_problems",
]

TraceChoice = str  # "answer", "reasoning" or "both"
TRACE_CHOICES: tuple[str, ...] = ("answer", "reasoning", "both")


@dataclass(frozen=True, slots=True)
class EvaluateOptions:
    """Knobs of an evaluation (bootstrap size and seed, cascade rule, trace)."""

    n_boot: int = 10_000
    seed: int = 20260710
    cascade_mode: CascadeMode = EVALUATE_CASCADE_MODE
    samples: int = SELF_CONSISTENCY_SAMPLES  # samples that make a problem's group complete
    majority: bool = True  # repeated probes: majority conclusion (False: the first repeat only)
    vanished: VanishedReading = "change"  # a vanished local conclusion: a change, or missing
    trace: TraceChoice = "answer"  # which text is audited: answer, reasoning, or both

    @property
    def audit_settings(self) -> AuditSettings:
        """What each problem's audit needs of these options (the trace is set per audit)."""
        return AuditSettings(
            cascade_mode=self.cascade_mode, majority=self.majority, vanished=self.vanished
        )

    @property
    def traces(self) -> tuple[Trace, ...]:
        """The traces audited, in report order."""
        if self.trace == "both":
            return ("answer", "reasoning")
        if self.trace == "reasoning":
            return ("reasoning",)
        return ("answer",)

    def as_json(self) -> JSONDict:
        """The options a report records (``report.json`` ``options``; verify reads them)."""
        return {
            "seed": self.seed,
            "n_boot": self.n_boot,
            "cascade_mode": self.cascade_mode,
            "majority": self.majority,
            "vanished": self.vanished,
            "trace": self.trace,
        }


@dataclass(slots=True)
class _GroupLines:
    """The raw lines of one open group, kept beside the collector's parsed records."""

    numbers: list[int] = field(default_factory=list)
    lines: list[bytes] = field(default_factory=list)
    records: list[JSONDict] = field(default_factory=list)


def _plan_error(where: str, key: str, value: object) -> UsageError:
    return UsageError(
        f"'extra.plan.{key}' must be a whole number, not {value!r}",
        where=where,
        fix="The plan says how many samples and probe repeats a problem has (docs/schema.md); "
        "fix or remove it.",
    )


def _checked_plan(plan: object, where: str) -> Mapping[str, Any] | None:
    """A problem's ``extra.plan`` with its counts checked (a clear error, not a traceback)."""
    if not isinstance(plan, Mapping):
        return None
    for key in ("samples", "probe_repeats"):
        value = plan.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
            raise _plan_error(where, key, value)
    return plan


# Response fields the grouping reads, and their JSON types: checked on every record before it
# is grouped (the full check of every field runs where the group is audited).
_ROUTING_STR = ("endpoint", "problem_id", "request_id", "condition")


def _routable(record: JSONDict) -> bool:
    for key in _ROUTING_STR:
        if not isinstance(record.get(key), str):
            return False
    target = record.get("target_premise")
    index = record.get("sample_index")
    schema = record.get("schema")
    return (
        (target is None or isinstance(target, str))
        and type(index) is int
        and type(schema) is int
        and 1 <= schema <= SCHEMA_VERSION
        and (record.get("error") is None or isinstance(record.get("error"), dict))
        and (record.get("model") is None or isinstance(record.get("model"), dict))
    )


@dataclass(slots=True)
class Evaluation:
    """Feed stream records in order; get the audit jobs of the groups they complete, and
    merge the jobs' summaries (in that order) into per-section tallies.

    ``validated``: the records fed were read by a reader that validates them already (the
    jobs then skip the check); records from a file are validated where they are audited.
    """

    options: EvaluateOptions = field(default_factory=EvaluateOptions)
    stream: str = "results.jsonl"
    validated: bool = False
    problems: dict[str, tuple[bytes, str]] = field(default_factory=dict)  # raw line, where
    truths: dict[tuple[str, str, str], Truth] = field(default_factory=dict)
    tallies: dict[str, ModelTally] = field(default_factory=dict)
    collector: GroupCollector = field(init=False)
    records: int = 0
    ignored_kinds: Counter[str] = field(default_factory=Counter)
    # Per endpoint: responses whose server withheld the reasoning's text (``reasoning_withheld``),
    # so that a reasoning section with nothing to audit says why.
    withheld: Counter[str] = field(default_factory=Counter)
    # Per endpoint: the requests the run's plan holds (its manifest's ``planned_requests``,
    # empty if unknown), and the distinct responses the stream holds of the audited problems.
    planned: dict[str, int] = field(default_factory=dict)
    responses: Counter[str] = field(default_factory=Counter)
    # Where the stream came from (its manifest's ``source``, e.g. ``import-evidence``; None
    # for a run's own stream or one without a manifest): what an incomplete audit means
    # depends on it (``evaluator.report.short_of_plan_note``).
    run_source: str | None = None
    _lines: dict[tuple[str, str], _GroupLines] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.collector = GroupCollector(samples=self.options.samples)

    @property
    def job_settings(self) -> JobSettings:
        return JobSettings(self.options.audit_settings, self.options.traces, self.stream)

    def feed(self, record: JSONDict, *, line: int = 0, raw: bytes = b"") -> Iterator[AuditJob]:
        """Take one record (its 1-based ``line`` in the stream and its ``raw`` bytes); yield
        the job of the group it completes, if any."""
        self.records += 1
        where = f"{self.stream}:{line}" if line else f"record {self.records}"
        kind = record.get("kind")
        if kind in ("response", "sample_summary"):
            if (kind == "sample_summary" and not self.validated) or not _routable(record):
                validate_record(record, where=where)  # says which field is wrong, if one is
            pid = record.get("problem_id")
            if pid not in self.problems:
                if record.get("task", "prontoqa") != "prontoqa":
                    self.ignored_kinds[f"{kind}:{record.get('task')}"] += 1
                    return
                raise UsageError(
                    f"{kind} {record.get('request_id') or ''} of problem {pid!r} comes before "
                    "its problem record".replace("  ", " "),
                    where=where,
                    fix="Problem records must precede their responses (docs/schema.md): "
                    "move the problem record up, or evaluate the stream `cotaudit run` wrote.",
                    in_run_terms=True,
                )
            key = (str(record.get("endpoint")), str(pid))
            if key in self.collector.released:
                self.collector.late += 1
                return
            if record.get("reasoning_withheld") is True:
                self.withheld[key[0]] += 1
            held = self._lines.setdefault(key, _GroupLines())
            held.numbers.append(line)
            # A record fed without its line (an evidence pack's summary) travels as JSON too.
            line_bytes = raw or _canonical(record)
            held.lines.append(line_bytes if line_bytes.endswith(b"\n") else line_bytes + b"\n")
            held.records.append(record)
            group = self.collector.add(record)
            if group is not None:
                yield self._job(group)
            return
        if not self.validated:
            validate_record(record, where=where)
        if kind == "problem":
            self._problem(record, raw, where)
        elif kind == "truth":
            truth = truth_from_record(record, where=where)
            trace = str(record.get("trace") or "answer")
            self.truths[(truth.model, truth.problem_id, trace)] = truth
        else:
            self.ignored_kinds[str(kind)] += 1

    def _problem(self, record: JSONDict, raw: bytes, where: str) -> None:
        if record.get("task", "prontoqa") != "prontoqa" or "proof" not in record:
            self.ignored_kinds["problem:" + str(record.get("task"))] += 1
            return
        pid = str(record.get("problem_id"))
        if pid in self.problems:
            return
        problem = Problem.from_record(record, where=where)
        try:
            proof_conclusions(problem.proof)  # a proof conclusion that is not canonical
        except ValueError as exc:
            raise UsageError(
                str(exc), where=where, fix="See docs/schema.md for the problem record."
            ) from None
        plan = _checked_plan(problem.extra.get("plan"), where)
        self.problems[pid] = (raw or _canonical(record), where)
        self.collector.set_problem(pid, [p.id for p in problem.premises], plan)

    def _job(self, group: ResponseGroup) -> AuditJob:
        key = (group.endpoint, group.problem_id)
        held = self._lines.pop(key)
        self.responses[group.endpoint] += len(group.responses)
        problem_line, problem_where = self.problems[group.problem_id]
        model_name = str(group.model.get("model", "")) if group.model else ""
        truths = tuple(
            self.truths.get((model_name, group.problem_id, trace))
            or self.truths.get((group.endpoint, group.problem_id, trace))
            for trace in self.options.traces
        )
        return AuditJob(
            group.endpoint,
            group.problem_id,
            problem_line,
            problem_where,
            tuple(held.numbers),
            b"".join(held.lines),
            truths,
            tuple(held.records),
            validated=self.validated,
        )

    def finish(self) -> Iterator[AuditJob]:
        """End of stream: the jobs of every group still open."""
        for group in self.collector.drain():
            yield self._job(group)

    def merge(self, summaries: Iterable[AuditSummary]) -> None:
        """Add one job's summaries (call in the order the jobs were made)."""
        for summary in summaries:
            tally = self.tallies.get(summary.section)
            if tally is None:
                tally = self.tallies[summary.section] = ModelTally()
            tally.add(summary)

    def merge_tallies(self, tallies: Iterable[tuple[str, ModelTally]]) -> None:
        """Add a batch's tallies, section by section (call in the order of the batches)."""
        for section, partial in tallies:
            tally = self.tallies.get(section)
            if tally is None:
                self.tallies[section] = partial
            else:
                tally.merge(partial)

    @property
    def late(self) -> int:
        return self.collector.late

    def report(self) -> JSONDict:
        """``{"models": {section: {...}}}`` with the statistics of every section."""
        models: JSONDict = {}
        for name, tally in self.tallies.items():
            models[name] = model_report(name, tally, self.options)
            if tally.trace == "reasoning":
                models[name]["reasoning_withheld"] = self.withheld[tally.endpoint]
        report: JSONDict = {
            "kind": "report",
            "schema": SCHEMA_VERSION,
            "models": models,
            "stream": {
                "records": self.records,
                "ignored_kinds": dict(self.ignored_kinds),
                "orphan_responses": 0,
                "late_records": self.collector.late,
                "incomplete_groups": self.collector.short,
            },
        }
        if self.run_source is not None:
            report["stream"]["run_source"] = self.run_source
        if self.planned:
            report["stream"]["planned_requests"] = dict(self.planned)
            report["stream"]["responses"] = {name: self.responses[name] for name in self.planned}
        if self.options.trace == "both":
            from evaluator.traces import trace_comparison

            report["traces"] = trace_comparison(
                self.tallies, self.withheld, seed=self.options.seed, n_boot=self.options.n_boot
            )
        return report


def _canonical(record: JSONDict) -> bytes:
    from cotaudit.schema import canonical_json

    return canonical_json(record)


def _rate(tally: ModelTally, condition: str) -> float | None:
    n = tally.steps[condition]
    return tally.parsed[condition] / n if n else None


def _alignment_section(tally: ModelTally, options: EvaluateOptions) -> JSONDict:
    return {
        "cot_steps": tally.cot_steps,
        "matched": tally.matched,
        "unmatched": tally.unmatched,
        "unmatched_by_reason": dict(tally.unmatched_by_reason),
        "proof_steps": tally.proof_steps,
        "proof_steps_unaudited": tally.unaudited,
        "ambiguous_problems": len(tally.ambiguous),
        "ambiguous_problem_ids": sorted(tally.ambiguous),
        "probe_steps_missing": {c: tally.probe_rules[c]["missing"] for c in PROBE_CONDITIONS},
        "probe_rules": {c: dict(tally.probe_rules[c]) for c in PROBE_CONDITIONS},
        "probe_outputs_absent": {c: tally.probe_outputs_absent[c] for c in PROBE_CONDITIONS},
        "probe_repeats": {str(k): v for k, v in sorted(tally.probe_repeats.items())},
        "probe_vote": "majority" if options.majority else "first repeat",
        "problems_without_original": sorted(tally.problems_without_original),
    }


def model_report(section: str, tally: ModelTally, options: EvaluateOptions) -> JSONDict:
    """One section's report: every part computed here, assembled once by
    ``tables.report_from_statistics`` (docs/report-schema.md, docs/reproduction.md)."""
    answered = [o for o in tally.outcomes if o.answer_model is not None]
    correct = sum(1 for o in answered if o.answer_model == o.answer_gold)
    sections: JSONDict = {
        "model": tally.model,
        "accuracy": {
            "problems": len(tally.outcomes),
            "answered": len(answered),
            "correct": correct,
            # Unread answers count as wrong: accuracy is over every audited problem.
            "rate": correct / len(tally.outcomes) if tally.outcomes else None,
        },
        "problems_audited": len(tally.outcomes),
        "steps_read": {
            c: {
                "steps": tally.steps[c],
                "parsed": tally.parsed[c],
                "outputs_capped": tally.capped[c],
            }
            for c in PARSE_CONDITIONS
        },
        "assumed_steps": {c: tally.assumed[c] for c in PARSE_CONDITIONS},
        "unparseable_examples": {c: list(v) for c, v in tally.unparseable_examples.items()},
        "errors": {"count": sum(tally.errors.values()), "by_type": dict(tally.errors)},
        "superseded_records": tally.superseded,
        "false_positives": sorted(tally.false_positives, key=lambda fp: str(fp["id"])),
    }
    if options.trace != "answer":
        sections["trace"] = tally.trace
        sections["endpoint"] = tally.endpoint
    if tally.truth is not None:
        sections["truth"] = {
            "ignored_premises": tally.truth.ignored_premises,
            "ignored_premises_flagged": tally.truth.ignored_premises_flagged,
            "ignored_premises_flagged_cascade": tally.truth.ignored_premises_flagged_cascade,
            "pairs_without_truth_step": tally.truth.pairs_without_truth_step,
        }
    return report_from_statistics(
        tally.statistics,
        self_consistency=tally.has_summaries,
        extra_rows=TRUTH_ROWS if tally.truth is not None else (),
        seed=options.seed,
        n_boot=options.n_boot,
        cascade_mode=options.cascade_mode,
        alignment=_alignment_section(tally, options),
        parse_rates={c: _rate(tally, c) for c in PARSE_CONDITIONS},
        non_assertions={c: dict(tally.non_assertions[c]) for c in PARSE_CONDITIONS},
        sections=sections,
    )


def evaluate_records(
    records: Iterable[JSONDict], options: EvaluateOptions | None = None
) -> tuple[Evaluation, list[ProblemAudit]]:
    """Evaluate a whole record iterable in memory (tests, the Python API), in this process;
    returns the evaluation and every audit in the order the groups completed."""
    evaluation = Evaluation(options or EvaluateOptions(), validated=True)
    settings = JobSettings(
        evaluation.options.audit_settings, evaluation.options.traces, keep_audits=True
    )
    audits: list[ProblemAudit] = []

    def run(jobs: Iterable[AuditJob]) -> None:
        for job in jobs:
            summaries = run_job(job, settings)
            evaluation.merge(summaries)
            audits.extend(s.audit for s in summaries if s.audit is not None and s.outcome)

    for record in records:
        run(evaluation.feed(record))
    run(evaluation.finish())
    return evaluation, audits


def require_problems(evaluation: Evaluation, where: str) -> None:
    """A stream with no evaluable problem records cannot be evaluated: say so."""
    if not evaluation.problems:
        raise UsageError(
            "the stream holds no problem records of the grounding audit",
            where=where,
            fix="Problem records must precede responses (see docs/schema.md).",
        )


@dataclass(slots=True)
class StreamEvaluation:
    """What :func:`evaluate_stream` read and computed."""

    evaluation: Evaluation
    digest: StreamDigest
    workers: int
    audits: int  # groups audited (one model on one problem each)


def evaluate_stream(
    source: str | Path,
    options: EvaluateOptions,
    *,
    workers: int | None = None,
    extra_records: Iterable[JSONDict] = (),
    on_certificates: Callable[[bytes], None] | None = None,
    check: StreamCheck | None = None,
    progress: EvaluationProgress | None = None,
    endpoints: int = 0,
    spool_dir: Path | None = None,
    watch: Callable[[int, JSONDict], None] | None = None,
) -> StreamEvaluation:
    """Read a stream once and audit every group, with ``workers`` processes (None: by the
    stream's size, ``evaluator.parallel.default_workers``; 0: in this process).

    The certificates go to ``on_certificates`` as canonical JSON lines, in the order the
    groups completed, whichever process audited them. ``extra_records`` (e.g. an evidence
    pack's ``sample_summary`` records for a run that replayed the pack) are fed right after
    the problem record they refer to; those of problems the stream lacks are fed at its end.
    Every complete line of the stream goes into the returned digest.

    ``check`` watches every record as it is read (it may refuse the stream at once) and
    judges the whole stream at its end (``evaluator.stream_check``); ``watch``, if given, sees
    every record with its line number as it is read (``cotaudit verify``: the run's plan);
    ``progress`` counts the audits as their results come back, out of problems times
    ``endpoints`` (the run's, or those met so far). Worker processes hand their certificates
    back through spool files in a directory made under ``spool_dir`` (None: the system's
    temporary directory) and removed before this returns or raises
    (``evaluator.parallel.PoolAuditor``).
    """
    from evaluator.parallel import BatchResult, auditor, default_workers
    from evaluator.source import run_planned_requests, run_source

    size = None if str(source) == STDIN else Path(source).stat().st_size
    if workers is None:
        workers = default_workers(size)
    evaluation = Evaluation(
        options,
        stream=str(source),
        planned=run_planned_requests(source),
        run_source=run_source(source),
    )
    digest = StreamDigest()
    pending: dict[str, list[JSONDict]] = {}
    for extra in extra_records:
        pending.setdefault(str(extra.get("problem_id")), []).append(extra)
    audited = 0

    def merge(result: BatchResult) -> None:
        nonlocal audited
        evaluation.merge_tallies(result.tallies)
        if on_certificates is not None:
            on_certificates(result.certificate_lines)
        audited += result.audits
        if progress is not None:
            seen = len(check.answered) if check is not None else 0
            problems = len(evaluation.problems)
            if size and digest.size:
                # Problems are declared as the stream goes: those still to come, estimated
                # from the share of the file read, so that the time left is not "1 s".
                problems = max(problems, round(problems * size / digest.size))
            progress.set_total(problems * max(endpoints, seen, 1))
            progress.audited(result.audits)

    with auditor(evaluation.job_settings, workers, spool_dir) as audits:

        def take(jobs: Iterable[AuditJob]) -> None:
            for job in jobs:
                audits.submit(job)
            for result in audits.ready():
                merge(result)

        for number, raw, record in iter_raw_records(source):
            digest.add(raw)
            if record is None:
                continue
            if check is not None:
                check.watch(number, record)
            if watch is not None:
                watch(number, record)
            take(evaluation.feed(record, line=number, raw=raw))
            if pending and record.get("kind") == "problem":
                for extra in pending.pop(str(record.get("problem_id")), ()):
                    take(evaluation.feed(extra))
        for extra in chain.from_iterable(pending.values()):
            take(evaluation.feed(extra))
        take(evaluation.finish())
        for result in audits.drain():
            merge(result)
    if check is not None:
        check.finish(late_records=evaluation.late, audited=audited)
    return StreamEvaluation(evaluation, digest, workers, audited)
