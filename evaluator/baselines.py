"""The two baselines of Table 1: self-consistency and string diff.

**Self-consistency** (docs/decision-layer.md, "Baselines"): 5 samples of the original at T =
0.7. For each step position, the majority canonical conclusion and its agreement over the
samples that parsed at that position; the step is *consistent* when the agreement is at least
80%. Each sample step is aligned to the proof step with the same conclusion as its majority
(proof steps matched by no sample step, or by more than one, are left out: "match majority
conclusion to proof conclusion; exclude unmatched and ambiguous", as the authors'
``baseline_report.json`` says). A consistent step predicts *every* premise of the problem as a
dependency, an inconsistent one predicts none; pairs are (aligned proof step, premise) over all
premises. The summaries come either from raw samples (:func:`summarise_samples`, a live run) or
from an evidence pack's ``pNNN_samples.json`` (``evaluator.authors``).

**String diff**: the aligned step's text changed under the consistent probe. The producer of
the pairs decides what text is compared and sets ``AuditPair.text_changed``; this module only
scores it (:func:`string_diff_predictions`) and offers the plain comparison
(:func:`step_text_changed`).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from cotaudit.constants import SELF_CONSISTENCY_THRESHOLD
from cotaudit.domain.problem import Problem
from evaluator.metrics import FN, FP, TN, TP, Counts, Gold
from evaluator.pairs import AuditPair

CONSISTENCY_THRESHOLD = SELF_CONSISTENCY_THRESHOLD


@dataclass(frozen=True, slots=True)
class SampleStepSummary:
    """What the samples say at one step position (``pNNN_samples.json`` ``step_verdicts``)."""

    step: int  # 1-based step position in the samples
    consistent: bool
    agreement: float  # share of parseable samples holding the majority conclusion
    majority: str | None  # canonical conclusion; None when no sample parsed there
    n_valid: int  # samples with a parseable conclusion at this position


def summarise_samples(
    samples: Sequence[Sequence[str | None]], *, threshold: float = CONSISTENCY_THRESHOLD
) -> list[SampleStepSummary]:
    """Per-step summaries from raw samples: ``samples[s][k]`` is sample ``s``'s canonical
    conclusion at step ``k + 1`` (``None`` when that step was not read).

    Ties between equally frequent conclusions go to the one first seen (sample order), so the
    summary is deterministic.
    """
    if not 0.0 < threshold <= 1.0:
        raise ValueError(f"threshold must be in (0, 1], got {threshold!r}")
    depth = max((len(s) for s in samples), default=0)
    out: list[SampleStepSummary] = []
    for k in range(depth):
        read = [s[k] for s in samples if k < len(s)]
        valid = [c for c in read if c is not None]
        if not valid:
            out.append(SampleStepSummary(k + 1, False, 0.0, None, 0))
            continue
        majority, votes = Counter(valid).most_common(1)[0]
        agreement = votes / len(valid)
        out.append(
            SampleStepSummary(k + 1, agreement >= threshold, agreement, majority, len(valid))
        )
    return out


@dataclass(frozen=True, slots=True)
class SelfConsistencyAlignment:
    """How the sample steps met the proof: counts over all problems with summaries."""

    problems: int
    proof_steps_scored: int
    proof_steps_unmatched: int  # no sample step's majority equals the conclusion
    proof_steps_ambiguous: int  # several sample steps' majorities equal it


@dataclass(frozen=True, slots=True)
class SelfConsistencyInput:
    """What the self-consistency row needs: the problems (premises and proof), the per-step
    summaries by problem id, and the entity-introduction premise ids by problem id."""

    problems: Mapping[str, Problem]
    summaries: Mapping[str, Sequence[SampleStepSummary]]
    entity_premises: Mapping[str, Collection[str]]


def self_consistency_counts(
    problems: Mapping[str, Problem],
    summaries: Mapping[str, Sequence[SampleStepSummary]],
    problem_ids: Sequence[str],
    entity_premises: Mapping[str, Collection[str]],
    *,
    gold: Gold = "full",
) -> tuple[Counts, SelfConsistencyAlignment]:
    """Per-problem ``(tp, fp, fn, tn)`` of the self-consistency baseline, rows in
    ``problem_ids`` order (problems without summaries stay all-zero).

    ``entity_premises[problem_id]`` names the entity-introduction premises (negative under the
    ``pred`` gold).
    """
    counts = np.zeros((len(problem_ids), 4), dtype=np.int64)
    scored = unmatched = ambiguous = n_problems = 0
    for row, pid in enumerate(problem_ids):
        steps = summaries.get(pid)
        if steps is None:
            continue
        problem = problems.get(pid)
        if problem is None:
            raise ValueError(f"self-consistency summaries for {pid!r} but no such problem")
        n_problems += 1
        entities = set(entity_premises.get(pid, ()))
        for proof_step in problem.proof:
            matches = [s for s in steps if s.majority == proof_step.conclusion]
            if not matches:
                unmatched += 1
                continue
            if len(matches) > 1:
                ambiguous += 1
                continue
            scored += 1
            predicted = matches[0].consistent
            for premise in problem.premises:
                truth = premise.id in proof_step.depends_on
                if gold == "pred" and premise.id in entities:
                    truth = False
                col = (TP if truth else FP) if predicted else (FN if truth else TN)
                counts[row, col] += 1
    return counts, SelfConsistencyAlignment(n_problems, scored, unmatched, ambiguous)


_SPACES = re.compile(r"\s+")


def normalised_step_text(text: str | None) -> str | None:
    """A step text as :func:`step_text_changed` compares it: whitespace runs as one space,
    without a final period (None stays None)."""
    if text is None:
        return None
    return _SPACES.sub(" ", text).strip().rstrip(".").rstrip()


def step_text_changed(original: str | None, probe: str | None) -> bool | None:
    """Whether two step texts differ, ignoring whitespace runs and a final period; ``None``
    when either side is missing."""
    if original is None or probe is None:
        return None
    return normalised_step_text(original) != normalised_step_text(probe)


def string_diff_predictions(pairs: Sequence[AuditPair]) -> list[bool | None]:
    """The string-diff baseline's predictions: ``text_changed`` (``None`` = skipped)."""
    return [p.text_changed for p in pairs]
