"""End-to-end evaluation of a JSONL stream: raw outputs -> pairs -> verdicts -> certificates.

Records are consumed in stream order. ``problem`` records come first; ``response`` records
(and, for imported packs, ``sample_summary`` records) are grouped per (endpoint, problem) by
:class:`evaluator.grouping.GroupCollector`, which releases a group as soon as it is complete,
so that a long stream is audited problem by problem and memory holds only open groups plus the
compact per-pair inputs of the statistics.

Each released group is audited by :func:`evaluator.audit.audit_problem` (parse, align, decide,
certify: a pure function of the problem's records) and merged into its endpoint's
:class:`evaluator.tally.ModelTally`. The statistics run once per endpoint at the end:
:func:`model_report` computes every section and hands them to
``evaluator.tables.build_model_report``, which assembles the report section once.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field

import numpy as np

from cotaudit.constants import SELF_CONSISTENCY_SAMPLES
from cotaudit.domain.problem import Problem
from cotaudit.errors import UsageError
from cotaudit.schema import SCHEMA_VERSION, JSONDict
from evaluator.audit import (
    PARSE_CONDITIONS,
    PROBE_CONDITIONS,
    AuditSettings,
    ProblemAudit,
    VanishedReading,
    audit_problem,
)
from evaluator.authors import entity_premise_ids
from evaluator.baselines import SelfConsistencyInput
from evaluator.cascade import CascadeMode
from evaluator.grouping import GroupCollector, ResponseGroup
from evaluator.metrics import Counts
from evaluator.tables import build_model_report, problem_order
from evaluator.tally import ModelTally
from evaluator.truth import TRUTH_ROWS, Truth, TruthScores, score_against_truth, truth_from_record

__all__ = [
    "EvaluateOptions",
    "Evaluation",
    "ModelTally",
    "ProblemAudit",
    "evaluate_records",
    "model_report",
    "require_problems",
]


@dataclass(frozen=True, slots=True)
class EvaluateOptions:
    """Knobs of an evaluation (bootstrap size and seed, cascade rule)."""

    n_boot: int = 10_000
    seed: int = 20260710
    cascade_mode: CascadeMode = "previous_cot_step"
    samples: int = SELF_CONSISTENCY_SAMPLES  # samples that make a problem's group complete
    majority: bool = True  # repeated probes: majority conclusion (False: the first repeat only)
    vanished: VanishedReading = "change"  # a vanished local conclusion: a change, or missing

    @property
    def audit_settings(self) -> AuditSettings:
        """What each problem's audit needs of these options."""
        return AuditSettings(
            cascade_mode=self.cascade_mode, majority=self.majority, vanished=self.vanished
        )


@dataclass(slots=True)
class Evaluation:
    """Feed stream records in order; collect per-endpoint tallies and certificates.

    ``on_audit`` (optional) sees each problem's audit as soon as its group is complete, so a
    caller can write certificates as it goes.
    """

    options: EvaluateOptions = field(default_factory=EvaluateOptions)
    problems: dict[str, Problem] = field(default_factory=dict)
    truths: dict[tuple[str, str], Truth] = field(default_factory=dict)
    tallies: dict[str, ModelTally] = field(default_factory=dict)
    collector: GroupCollector = field(init=False)
    records: int = 0
    ignored_kinds: Counter[str] = field(default_factory=Counter)
    orphans: int = 0  # responses of problems never seen
    keep_statistics: bool = True  # False (verify): certificates only, per-pair state dropped

    def __post_init__(self) -> None:
        self.collector = GroupCollector(samples=self.options.samples)

    def feed(self, record: JSONDict) -> Iterator[ProblemAudit]:
        """Take one record; yield the audits it completes (zero or one)."""
        self.records += 1
        kind = record.get("kind")
        if kind == "problem":
            if record.get("task", "prontoqa") != "prontoqa" or "proof" not in record:
                self.ignored_kinds["problem:" + str(record.get("task"))] += 1
                return
            pid = str(record.get("problem_id"))
            if pid not in self.problems:
                problem = Problem.from_record(record, where=f"problem record {pid}")
                self.problems[pid] = problem
                plan = problem.extra.get("plan")
                self.collector.set_problem(
                    pid,
                    [p.id for p in problem.premises],
                    plan if isinstance(plan, Mapping) else None,
                )
            return
        if kind == "truth":
            truth = truth_from_record(record, where=f"truth record {record.get('problem_id')}")
            self.truths[(truth.model, truth.problem_id)] = truth
            return
        if kind in ("response", "sample_summary"):
            if str(record.get("problem_id")) not in self.problems:
                self.orphans += 1
                return
            group = self.collector.add(record)
            if group is not None:
                audit = self._audit(group)
                if audit is not None:
                    yield audit
            return
        self.ignored_kinds[str(kind)] += 1

    def finish(self) -> Iterator[ProblemAudit]:
        """End of stream: audit every group still open."""
        for group in self.collector.drain():
            audit = self._audit(group)
            if audit is not None:
                yield audit

    def _audit(self, group: ResponseGroup) -> ProblemAudit | None:
        tally = self.tallies.setdefault(group.endpoint, ModelTally())
        problem = self.problems[group.problem_id]
        model_name = str(group.model.get("model", "")) if group.model else ""
        truth = self.truths.get((model_name, group.problem_id)) or self.truths.get(
            (group.endpoint, group.problem_id)
        )
        audit = audit_problem(group, problem, truth=truth, settings=self.options.audit_settings)
        tally.add(audit, keep_pairs=self.keep_statistics)
        return audit if audit.outcome is not None else None

    def report(self) -> JSONDict:
        """``{"models": {endpoint: {...}}}`` with the statistics of every endpoint."""
        models: JSONDict = {}
        for endpoint, tally in self.tallies.items():
            models[endpoint] = model_report(
                endpoint, tally, self.problems, self.truths, self.options
            )
        return {
            "kind": "report",
            "schema": SCHEMA_VERSION,
            "models": models,
            "stream": {
                "records": self.records,
                "ignored_kinds": dict(self.ignored_kinds),
                "orphan_responses": self.orphans,
                "late_records": self.collector.late,
            },
        }


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


def _truth_counts(scores: TruthScores, tally: ModelTally) -> dict[str, Counts]:
    """Per-problem counts of each truth row, in the bootstrap's problem order."""
    ids = problem_order(tally.outcomes)
    counts_by_row: dict[str, Counts] = {}
    for row in TRUTH_ROWS:
        counts = np.zeros((len(ids), 4), dtype=np.int64)
        for r, pid in enumerate(ids):
            c = scores.counts[row].get(pid)
            if c is not None:
                counts[r] = c
        counts_by_row[row] = counts
    return counts_by_row


def model_report(
    endpoint: str,
    tally: ModelTally,
    problems: Mapping[str, Problem],
    truths: Mapping[tuple[str, str], Truth],
    options: EvaluateOptions,
) -> JSONDict:
    """One endpoint's report section: every section computed here, assembled once by
    ``tables.build_model_report`` (docs/report-schema.md, docs/reproduction.md)."""
    audited = {o.problem_id for o in tally.outcomes}
    sc_input = None
    if tally.summaries:
        summaries = {k: v for k, v in tally.summaries.items() if k in audited}
        sc_input = SelfConsistencyInput(
            problems={pid: problems[pid] for pid in audited},
            summaries=summaries,
            entity_premises={pid: entity_premise_ids(problems[pid]) for pid in audited},
        )
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
            c: {"steps": tally.steps[c], "parsed": tally.parsed[c]} for c in PARSE_CONDITIONS
        },
        "assumed_steps": {c: tally.assumed[c] for c in PARSE_CONDITIONS},
        "unparseable_examples": {c: list(v) for c, v in tally.unparseable_examples.items()},
        "errors": {"count": sum(tally.errors.values()), "by_type": dict(tally.errors)},
        "superseded_records": tally.superseded,
        "false_positives": sorted(tally.false_positives, key=lambda fp: str(fp["id"])),
    }
    truth_counts = None
    if tally.truth_pairs:
        model_name = str(tally.model.get("model", endpoint))
        by_problem = {pid: t for (m, pid), t in truths.items() if m in (model_name, endpoint)}
        scores = score_against_truth(tally.truth_pairs, by_problem)
        truth_counts = _truth_counts(scores, tally)
        sections["truth"] = {
            "ignored_premises": scores.ignored_premises,
            "ignored_premises_flagged": scores.ignored_premises_flagged,
            "ignored_premises_flagged_cascade": scores.ignored_premises_flagged_cascade,
            "pairs_without_truth_step": scores.pairs_without_truth_step,
        }
    return build_model_report(
        tally.pairs,
        tally.outcomes,
        decisions=tally.audit_decisions(),
        self_consistency=sc_input,
        seed=options.seed,
        n_boot=options.n_boot,
        cascade_mode=options.cascade_mode,
        alignment=_alignment_section(tally, options),
        parse_rates={c: _rate(tally, c) for c in PARSE_CONDITIONS},
        non_assertions={c: dict(tally.non_assertions[c]) for c in PARSE_CONDITIONS},
        extra_counts=truth_counts,
        sections=sections,
    )


def evaluate_records(
    records: Iterable[JSONDict], options: EvaluateOptions | None = None
) -> tuple[Evaluation, list[ProblemAudit]]:
    """Evaluate a whole record iterable in memory (tests, verify); returns audits in order."""
    evaluation = Evaluation(options or EvaluateOptions())
    audits: list[ProblemAudit] = []
    for record in records:
        audits.extend(evaluation.feed(record))
    audits.extend(evaluation.finish())
    return evaluation, audits


def require_problems(evaluation: Evaluation, where: str) -> None:
    """A stream with responses but no problem records cannot be evaluated: say so."""
    if evaluation.orphans and not evaluation.problems:
        raise UsageError(
            f"{evaluation.orphans} response records but no problem records",
            where=where,
            fix="Problem records must precede responses (see docs/schema.md).",
        )
