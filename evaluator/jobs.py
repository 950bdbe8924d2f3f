"""One complete (endpoint, problem) group as a unit of work, and what its audit returns.

The pipeline (``evaluator.pipeline``) reads the stream, groups the responses and hands each
complete group over as an :class:`AuditJob`: the raw lines of the group's records, the raw
problem record and the truth records that apply. :func:`run_job` does all the rest, wherever
it runs (in the reading process, or in a worker of ``evaluator.parallel``): it parses and
validates the lines (errors name the stream file and line), audits every trace
(``evaluator.audit.audit_problem``), writes the certificates as canonical JSON lines, and
reduces the audit to the per-problem statistics (``evaluator.statistics``). What it returns,
one :class:`AuditSummary` per trace, is small and merges by addition
(``evaluator.tally.ModelTally.add``), so the result does not depend on where it ran.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field, replace

import numpy as np
import orjson

from cotaudit.domain.problem import Problem
from cotaudit.schema import JSONDict, validate_record
from evaluator.audit import ProblemAudit, ProblemContext, audit_problem
from evaluator.grouping import ResponseGroup
from evaluator.pairs import ProblemOutcome
from evaluator.stage_records import AlignmentCounts, AuditSettings, ParseCounts, Trace
from evaluator.statistics import DECISION_FIELDS, ProblemStatistics, problem_statistics
from evaluator.truth import TRUTH_ROWS, Truth, score_against_truth

__all__ = [
    "AuditJob",
    "AuditSummary",
    "JobSettings",
    "TruthTally",
    "run_job",
    "section_name",
]


def section_name(endpoint: str, trace: Trace) -> str:
    """The report section (and certificate id prefix) of one endpoint's trace: the endpoint
    for the answer, ``ENDPOINT:reasoning`` for a reasoning trace."""
    return endpoint if trace == "answer" else f"{endpoint}:{trace}"


@dataclass(frozen=True, slots=True)
class JobSettings:
    """What every job of an evaluation is run with."""

    audit: AuditSettings
    traces: tuple[Trace, ...] = ("answer",)
    stream: str = "results.jsonl"  # the stream's name in error messages
    keep_audits: bool = False  # also return each ProblemAudit (in-process callers)


@dataclass(frozen=True, slots=True)
class AuditJob:
    """One complete group: its records' raw lines (stream order, superseded ones included),
    the problem record's raw line, and the truth record of each trace (None: none)."""

    endpoint: str
    problem_id: str
    problem_line: bytes
    problem_where: str
    numbers: tuple[int, ...]  # the records' line numbers in the stream
    lines: bytes  # their raw lines, joined (each ends with a newline)
    truths: tuple[Truth | None, ...]  # one per JobSettings.traces
    records: tuple[JSONDict, ...] | None = None  # the lines parsed, when already at hand
    validated: bool = False  # the records were checked against the schema already


@dataclass(slots=True)
class TruthTally:
    """The truth section's counts of one problem (``evaluator.truth.TruthScores``)."""

    ignored_premises: int = 0
    ignored_premises_flagged: int = 0
    ignored_premises_flagged_cascade: int = 0
    pairs_without_truth_step: int = 0


@dataclass(slots=True)
class AuditSummary:
    """What one audited (endpoint, problem, trace) adds to its report section."""

    section: str
    endpoint: str
    trace: Trace
    problem_id: str
    model: JSONDict
    certificate_lines: bytes  # canonical JSON, one certificate per line
    n_certificates: int
    statistics: ProblemStatistics | None  # None without an original output
    outcome: ProblemOutcome | None
    parse_counts: ParseCounts
    alignment_counts: AlignmentCounts
    errors: Counter[str]
    superseded: int
    has_summaries: bool
    false_positives: list[JSONDict]
    truth: TruthTally | None  # None: no truth pairs
    audit: ProblemAudit | None = field(default=None, repr=False)  # JobSettings.keep_audits


def _records(job: AuditJob, stream: str) -> tuple[JSONDict, ...]:
    if job.records is not None:
        records = job.records
    else:
        # Each line ends with a newline and holds none before it (it was read as one line).
        records = tuple(orjson.loads(raw) for raw in job.lines.split(b"\n")[:-1])
    if not job.validated:
        for number, record in zip(job.numbers, records, strict=True):
            validate_record(record, where=f"{stream}:{number}")
    return records


def _summarise(
    audit: ProblemAudit,
    section: str,
    context: ProblemContext,
    truth: Truth | None,
    keep: bool,
) -> AuditSummary:
    lines = audit.certificate_lines
    statistics = None
    truth_tally = None
    if audit.outcome is not None:
        statistics = problem_statistics(
            audit.problem_id,
            audit.pairs,
            {name: getattr(audit.decisions, name) for name in DECISION_FIELDS},
            audit.outcome,
            problem=context.problem,
            summaries=audit.summaries,
            entity_premises=context.entity_premises,
        )
        if audit.truth_pairs and truth is not None:
            scores = score_against_truth(audit.truth_pairs, {audit.problem_id: truth})
            for row in TRUTH_ROWS:
                counts = scores.counts[row].get(audit.problem_id)
                if counts is not None:
                    statistics.extra[row] = np.asarray(counts, dtype=np.int64)
            truth_tally = TruthTally(
                scores.ignored_premises,
                scores.ignored_premises_flagged,
                scores.ignored_premises_flagged_cascade,
                scores.pairs_without_truth_step,
            )
    return AuditSummary(
        section=section,
        endpoint=audit.endpoint,
        trace=audit.trace,
        problem_id=audit.problem_id,
        model=audit.model,
        certificate_lines=lines,
        n_certificates=audit.certificate_lines.count(b"\n"),
        statistics=statistics,
        outcome=audit.outcome,
        parse_counts=audit.parse_counts,
        alignment_counts=audit.alignment_counts,
        errors=audit.errors,
        superseded=audit.superseded,
        has_summaries=audit.summaries is not None,
        false_positives=audit.false_positives,
        truth=truth_tally,
        audit=audit if keep else None,
    )


def problem_from_line(line: bytes, where: str) -> Problem:
    """The problem of a raw problem record (already validated by the reader)."""
    return Problem.from_record(orjson.loads(line), where=where)


def run_job(job: AuditJob, settings: JobSettings) -> list[AuditSummary]:
    """Audit one group under every trace of ``settings``; ``UsageError`` naming the stream
    line of a record that breaks its shape."""
    records = _records(job, settings.stream)
    problem = problem_from_line(job.problem_line, job.problem_where)
    context = ProblemContext.of(problem)
    group = ResponseGroup(endpoint=job.endpoint, problem_id=job.problem_id)
    for record in records:
        group.add(record)
    out = []
    for trace, truth in zip(settings.traces, job.truths, strict=True):
        section = section_name(job.endpoint, trace)
        audit = audit_problem(
            group,
            context,
            truth=truth,
            settings=replace(settings.audit, trace=trace),
            section=section,
            with_certificates=settings.keep_audits,
        )
        out.append(_summarise(audit, section, context, truth, settings.keep_audits))
    return out
