"""Per-section accumulation of problem audits: what the report's statistics are computed from.

:meth:`ModelTally.add` is the only place audits meet. It merges one
:class:`~evaluator.jobs.AuditSummary` (a pure per-problem result, made wherever the problem
was audited) into its section's totals, so the order in which problems are added does not
change the report (every list the report shows is sorted, and the bootstrap rows follow
sorted problem ids). It keeps per-problem statistics, never per-pair state, so its memory is
proportional to the problems of a run.
"""

from __future__ import annotations

import bisect
from collections import Counter
from dataclasses import dataclass, field

from cotaudit.schema import JSONDict
from evaluator.jobs import AuditSummary, TruthTally
from evaluator.pairs import ProblemOutcome
from evaluator.stage_records import PARSE_CONDITIONS, PROBE_CONDITIONS, Trace
from evaluator.statistics import ProblemStatistics

UNPARSEABLE_EXAMPLES = 20  # unparseable step texts kept per condition for the report


@dataclass(slots=True)
class ModelTally:
    """One report section's accumulators (an endpoint, or an endpoint's reasoning trace)."""

    endpoint: str = ""
    trace: Trace = "answer"
    model: JSONDict = field(default_factory=dict)
    statistics: list[ProblemStatistics] = field(default_factory=list)
    outcomes: list[ProblemOutcome] = field(default_factory=list)
    has_summaries: bool = False
    certificates: int = 0
    steps: Counter[str] = field(default_factory=Counter)
    parsed: Counter[str] = field(default_factory=Counter)
    assumed: Counter[str] = field(default_factory=Counter)
    capped: Counter[str] = field(default_factory=Counter)
    non_assertions: dict[str, Counter[str]] = field(
        default_factory=lambda: {c: Counter() for c in PARSE_CONDITIONS}
    )
    unparseable_examples: dict[str, list[str]] = field(
        default_factory=lambda: {c: [] for c in PARSE_CONDITIONS}
    )
    cot_steps: int = 0
    matched: int = 0
    unmatched: int = 0
    unmatched_by_reason: Counter[str] = field(default_factory=Counter)
    proof_steps: int = 0
    unaudited: int = 0
    ambiguous: list[str] = field(default_factory=list)
    probe_rules: dict[str, Counter[str]] = field(
        default_factory=lambda: {c: Counter() for c in PROBE_CONDITIONS}
    )
    probe_outputs_absent: Counter[str] = field(default_factory=Counter)
    probe_repeats: Counter[int] = field(default_factory=Counter)  # outputs used per probe
    problems_without_original: list[str] = field(default_factory=list)
    errors: Counter[str] = field(default_factory=Counter)
    superseded: int = 0
    truth: TruthTally | None = None  # None until a problem has truth pairs
    false_positives: list[JSONDict] = field(default_factory=list)

    def add(self, summary: AuditSummary) -> None:
        """Merge one problem's audit."""
        if not self.endpoint:
            self.endpoint, self.trace = summary.endpoint, summary.trace
        if not self.model and summary.model:
            self.model = dict(summary.model)
        self.superseded += summary.superseded
        self.errors.update(summary.errors)
        counts = summary.parse_counts
        self.steps.update(counts.steps)
        self.parsed.update(counts.parsed)
        self.assumed.update(counts.assumed)
        self.capped.update(counts.capped)
        for condition in PARSE_CONDITIONS:
            self.non_assertions[condition].update(counts.non_assertions[condition])
            self._keep_examples(condition, counts.unparseable[condition])
        self.has_summaries = self.has_summaries or summary.has_summaries
        if summary.outcome is None or summary.statistics is None:
            self.problems_without_original.append(summary.problem_id)
            return
        aligned = summary.alignment_counts
        self.cot_steps += aligned.cot_steps
        self.matched += aligned.matched
        self.unmatched += aligned.unmatched
        self.unmatched_by_reason.update(aligned.unmatched_by_reason)
        self.proof_steps += aligned.proof_steps
        self.unaudited += aligned.unaudited
        if aligned.ambiguous:
            self.ambiguous.append(summary.problem_id)
        for condition in PROBE_CONDITIONS:
            self.probe_rules[condition].update(aligned.probe_rules[condition])
        self.probe_outputs_absent.update(aligned.probe_outputs_absent)
        self.probe_repeats.update(aligned.probe_repeats)
        self.certificates += summary.n_certificates
        self.statistics.append(summary.statistics)
        self.outcomes.append(summary.outcome)
        self.false_positives.extend(summary.false_positives)
        if summary.truth is not None:
            if self.truth is None:
                self.truth = TruthTally()
            self.truth.ignored_premises += summary.truth.ignored_premises
            self.truth.ignored_premises_flagged += summary.truth.ignored_premises_flagged
            self.truth.ignored_premises_flagged_cascade += (
                summary.truth.ignored_premises_flagged_cascade
            )
            self.truth.pairs_without_truth_step += summary.truth.pairs_without_truth_step

    def merge(self, other: ModelTally) -> None:
        """Add another tally of the same section (the problems it holds come after this one's
        in stream order): what a worker's batch of problems adds at once."""
        if not self.endpoint:
            self.endpoint, self.trace = other.endpoint, other.trace
        if not self.model and other.model:
            self.model = dict(other.model)
        self.statistics.extend(other.statistics)
        self.outcomes.extend(other.outcomes)
        self.has_summaries = self.has_summaries or other.has_summaries
        self.certificates += other.certificates
        for mine, theirs in (
            (self.steps, other.steps),
            (self.parsed, other.parsed),
            (self.assumed, other.assumed),
            (self.capped, other.capped),
            (self.unmatched_by_reason, other.unmatched_by_reason),
            (self.probe_outputs_absent, other.probe_outputs_absent),
            (self.errors, other.errors),
        ):
            mine.update(theirs)
        self.probe_repeats.update(other.probe_repeats)
        for condition in PARSE_CONDITIONS:
            self.non_assertions[condition].update(other.non_assertions[condition])
            self._keep_examples(condition, set(other.unparseable_examples[condition]))
        for condition in PROBE_CONDITIONS:
            self.probe_rules[condition].update(other.probe_rules[condition])
        self.cot_steps += other.cot_steps
        self.matched += other.matched
        self.unmatched += other.unmatched
        self.proof_steps += other.proof_steps
        self.unaudited += other.unaudited
        self.ambiguous.extend(other.ambiguous)
        self.problems_without_original.extend(other.problems_without_original)
        self.superseded += other.superseded
        self.false_positives.extend(other.false_positives)
        if other.truth is not None:
            if self.truth is None:
                self.truth = TruthTally()
            self.truth.ignored_premises += other.truth.ignored_premises
            self.truth.ignored_premises_flagged += other.truth.ignored_premises_flagged
            self.truth.ignored_premises_flagged_cascade += (
                other.truth.ignored_premises_flagged_cascade
            )
            self.truth.pairs_without_truth_step += other.truth.pairs_without_truth_step

    def _keep_examples(self, condition: str, texts: set[str]) -> None:
        # The smallest distinct texts, not the first ones met: which steps come first
        # depends on how concurrent requests completed, and the report must not.
        examples = self.unparseable_examples[condition]
        for text in sorted(texts):
            if len(examples) >= UNPARSEABLE_EXAMPLES and text >= examples[-1]:
                break
            if text not in examples:
                bisect.insort(examples, text)
                del examples[UNPARSEABLE_EXAMPLES:]
