"""Per-endpoint accumulation of problem audits: what the report's statistics are computed from.

:meth:`ModelTally.add` is the only place audits meet. It merges one
:class:`~evaluator.audit.ProblemAudit` (a pure per-problem result) into the endpoint's totals,
so the order in which problems are added does not change the report (every list the report
shows is sorted, and the bootstrap rows follow sorted problem ids).
"""

from __future__ import annotations

import bisect
from collections import Counter
from dataclasses import dataclass, field

from cotaudit.schema import JSONDict
from evaluator.audit import PARSE_CONDITIONS, PROBE_CONDITIONS, ProblemAudit
from evaluator.baselines import SampleStepSummary
from evaluator.pairs import AuditPair, ProblemOutcome
from evaluator.tables import AuditDecisions
from evaluator.truth import TruthPair
from evaluator.verdicts import Decision

UNPARSEABLE_EXAMPLES = 20  # unparseable step texts kept per condition for the report
DECISION_FIELDS = ("consistent", "local", "combined", "no_surface", "cascaded")
_DECISIONS: dict[Decision, Decision] = {}


def _interned(decision: Decision) -> Decision:
    """One shared instance per distinct decision: a few dozen exist, millions are held."""
    return _DECISIONS.setdefault(decision, decision)


@dataclass(slots=True)
class ModelTally:
    """One endpoint's accumulators for the report."""

    model: JSONDict = field(default_factory=dict)
    pairs: list[AuditPair] = field(default_factory=list)
    outcomes: list[ProblemOutcome] = field(default_factory=list)
    summaries: dict[str, list[SampleStepSummary]] = field(default_factory=dict)
    steps: Counter[str] = field(default_factory=Counter)
    parsed: Counter[str] = field(default_factory=Counter)
    assumed: Counter[str] = field(default_factory=Counter)
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
    truth_pairs: list[TruthPair] = field(default_factory=list)
    decisions: dict[str, list[Decision]] = field(
        default_factory=lambda: {name: [] for name in DECISION_FIELDS}
    )  # parallel to pairs
    false_positives: list[JSONDict] = field(default_factory=list)

    def add(self, audit: ProblemAudit, *, keep_pairs: bool = True) -> None:
        """Merge one problem's audit. ``keep_pairs`` False (verify) keeps the counts only."""
        if not self.model and audit.model:
            self.model = dict(audit.model)
        self.superseded += audit.superseded
        self.errors.update(audit.errors)
        counts = audit.parse_counts
        self.steps.update(counts.steps)
        self.parsed.update(counts.parsed)
        self.assumed.update(counts.assumed)
        for condition in PARSE_CONDITIONS:
            self.non_assertions[condition].update(counts.non_assertions[condition])
            self._keep_examples(condition, counts.unparseable[condition])
        if keep_pairs and audit.summaries is not None:
            self.summaries[audit.problem_id] = audit.summaries
        if audit.outcome is None:
            self.problems_without_original.append(audit.problem_id)
            return
        aligned = audit.alignment_counts
        self.cot_steps += aligned.cot_steps
        self.matched += aligned.matched
        self.unmatched += aligned.unmatched
        self.unmatched_by_reason.update(aligned.unmatched_by_reason)
        self.proof_steps += aligned.proof_steps
        self.unaudited += aligned.unaudited
        if aligned.ambiguous:
            self.ambiguous.append(audit.problem_id)
        for condition in PROBE_CONDITIONS:
            self.probe_rules[condition].update(aligned.probe_rules[condition])
        self.probe_outputs_absent.update(aligned.probe_outputs_absent)
        self.probe_repeats.update(aligned.probe_repeats)
        if not keep_pairs:
            return
        self.pairs.extend(audit.pairs)
        for name in DECISION_FIELDS:
            self.decisions[name].extend(_interned(d) for d in getattr(audit.decisions, name))
        self.outcomes.append(audit.outcome)
        self.truth_pairs.extend(audit.truth_pairs)
        self.false_positives.extend(audit.false_positives)

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

    def audit_decisions(self) -> AuditDecisions | None:
        """Every pair's decisions, as :class:`AuditDecisions` (None if any list is short)."""
        if not all(len(self.decisions[n]) == len(self.pairs) for n in DECISION_FIELDS):
            return None
        return AuditDecisions(
            consistent=tuple(self.decisions["consistent"]),
            local=tuple(self.decisions["local"]),
            combined=tuple(self.decisions["combined"]),
            no_surface=tuple(self.decisions["no_surface"]),
            cascaded=tuple(self.decisions["cascaded"]),
        )
