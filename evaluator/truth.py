"""Scoring verdicts against what a simulated reasoner truly used (``truth`` records).

For local simulated reasoners the runner writes, per (model, problem), a record
``{"kind": "truth", "model": ..., "problem_id": ..., "steps": [{"conclusion": "is(alex, bimpus)",
"used": ["P6", "P1"]}, ...]}``. The proof tree says which premises a step *should* use; the truth
record says which ones the reasoner *did* use. A pair (CoT step, premise) is truly positive iff
the truth step with the CoT step's canonical conclusion lists the premise in ``used``.

Two rows are scored this way (``A_consistent_truth``, ``A_Ap_cascade_truth``) with the same
metric policy as the proof-keyed rows (UNPARSEABLE and UNSTABLE skipped, GROUNDED and
INPUT-SENSITIVE positive, INSENSITIVE and CASCADE negative). The audit *detects an ignored
premise* when the proof says parent, the truth says unused, and the verdict is INSENSITIVE:
that is the shortcut reasoner's signature, counted in ``ignored_premises_flagged``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from cotaudit.errors import UsageError

POSITIVE = frozenset({"GROUNDED", "INPUT-SENSITIVE"})
NEGATIVE = frozenset({"INSENSITIVE", "CASCADE"})
TRUTH_ROWS = ("A_consistent_truth", "A_Ap_cascade_truth")


@dataclass(frozen=True, slots=True)
class TruthStep:
    conclusion: str
    used: frozenset[str]


@dataclass(frozen=True, slots=True)
class Truth:
    """One ``truth`` record: the model name, the problem and each step's used premises."""

    model: str
    problem_id: str
    steps: tuple[TruthStep, ...]

    def used_for(self, conclusion: str | None) -> frozenset[str] | None:
        """Premises truly used by the step concluding ``conclusion``; None if no such step."""
        if conclusion is None:
            return None
        for step in self.steps:
            if step.conclusion == conclusion:
                return step.used
        return None


def truth_from_record(record: Mapping[str, Any], *, where: str = "truth record") -> Truth:
    """Read a ``truth`` record; ``UsageError`` naming the field when it is malformed."""
    try:
        steps = tuple(
            TruthStep(str(s["conclusion"]).strip(), frozenset(str(p) for p in s["used"]))
            for s in record["steps"]
            if s.get("conclusion") is not None  # a comment step concludes nothing
        )
        return Truth(str(record["model"]), str(record["problem_id"]), steps)
    except (KeyError, TypeError) as exc:
        raise UsageError(
            f"malformed truth record (field {exc})",
            where=where,
            fix='A truth record needs model, problem_id and steps [{"conclusion", "used"}].',
        ) from exc


def prediction(verdict: str | None) -> bool | None:
    """Metric policy: True positive, False negative, None when the pair is skipped."""
    if verdict in POSITIVE:
        return True
    if verdict in NEGATIVE:
        return False
    return None


@dataclass(frozen=True, slots=True)
class TruthPair:
    """What truth scoring needs of one evaluable pair."""

    problem_id: str
    conclusion: str | None  # canonical conclusion of the CoT step in the original output
    premise_id: str
    is_direct_parent: bool  # gold, from the proof tree
    verdict_consistent: str | None
    verdict_cascade: str | None


@dataclass(slots=True)
class TruthScores:
    """Per-problem confusion counts [tp, fp, fn, tn] per truth row, and the detection count."""

    counts: dict[str, dict[str, list[int]]] = field(
        default_factory=lambda: {row: {} for row in TRUTH_ROWS}
    )
    ignored_premises: int = 0  # proof parent, truly unused
    ignored_premises_flagged: int = 0  # ... and the audit (A) said INSENSITIVE
    ignored_premises_flagged_cascade: int = 0  # ... and A+A'+cascade said negative
    pairs_without_truth_step: int = 0

    def totals(self, row: str) -> list[int]:
        total = [0, 0, 0, 0]
        for c in self.counts[row].values():
            total = [a + b for a, b in zip(total, c, strict=True)]
        return total


def score_against_truth(pairs: Iterable[TruthPair], truths: Mapping[str, Truth]) -> TruthScores:
    """Score each pair's verdicts against ``truths`` (keyed by problem id)."""
    scores = TruthScores()
    for pair in pairs:
        truth = truths.get(pair.problem_id)
        if truth is None:
            continue
        used = truth.used_for(pair.conclusion)
        if used is None:
            scores.pairs_without_truth_step += 1
            continue
        actual = pair.premise_id in used
        for row, verdict in zip(
            TRUTH_ROWS, (pair.verdict_consistent, pair.verdict_cascade), strict=True
        ):
            predicted = prediction(verdict)
            if predicted is None:
                continue
            c = scores.counts[row].setdefault(pair.problem_id, [0, 0, 0, 0])
            c[(0 if predicted else 2) if actual else (1 if predicted else 3)] += 1
        if pair.is_direct_parent and not actual:
            scores.ignored_premises += 1
            if pair.verdict_consistent == "INSENSITIVE":
                scores.ignored_premises_flagged += 1
            if pair.verdict_cascade in NEGATIVE:
                scores.ignored_premises_flagged_cascade += 1
    return scores
