"""What the audit found about a model, computed once per report section.

``report.json`` leads each model's section with ``headline`` (docs/report-schema.md): what the
audit found about the model under each evaluator (A, A', A+A', A+A'+cascade), over the gold
proof's direct premise uses:

- *judged*: evaluable gold pairs whose verdict is neither UNPARSEABLE nor UNSTABLE (the pairs
  the metric policy scores; ``tp + fn`` of the evaluator's ``full`` row);
- *dependent*: of them, GROUNDED or INPUT-SENSITIVE (``tp``); the *grounded share* is
  dependent / judged (the row's recall);
- *ignored*: of them, INSENSITIVE: the step did not change when the premise was renamed
  (CASCADE, after the cascade filter, is judged but neither dependent nor ignored);
- the same split by *rule* premises ("Xs are Ys") and *entity-introduction* premises ("Alex
  is a bempus"), the known blind spot of consistent substitution: renaming a predicate in
  every premise leaves an entity-introduction premise true of the renamed world, so A counts
  every use of one as ignored;
- *right answer, wrong reasoning*: correctly answered problems with at least one ignored use
  (:func:`evaluator.metrics.rawr` under that evaluator), split into problems ignoring a rule
  premise and those ignoring entity-introduction premises only;
- *false positives*: dependent verdicts on evaluable pairs that are not gold (``fp``).

The headline leads with A+A' (:data:`HEADLINE_EVALUATOR`): its local probe renames the
predicate in one premise only and so covers entity-introduction premises.

The same module adds the figures' data that the report did not hold: F1 by chain length with
bootstrap intervals for several rows (``by_hops_rows``) and the verdicts of *every*
certificate, excluded ones included (``verdict_mix_all``: ``verdict_mix`` counts evaluable
pairs only, and a run whose steps were never read has none). :func:`report_additions` is the
one call ``evaluator.tables.build_model_report`` makes.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from evaluator.bootstrap import bootstrap_rows, resample_indices
from evaluator.metrics import Counts, rawr, scores
from evaluator.pairs import AuditPair, ProblemOutcome
from evaluator.verdicts import Decision, Verdict

# (report name, attribute of evaluator.tables.AuditDecisions, carries A's entity blind spot)
EVALUATORS: tuple[tuple[str, str, bool], ...] = (
    ("A", "consistent", True),
    ("A'", "local", False),
    ("A+A'", "combined", False),
    ("A+A'+cascade", "cascaded", False),
)
HEADLINE_EVALUATOR = "A+A'"
# Each evaluator's row against the full gold: its recall is the grounded share, with its interval.
EVALUATOR_ROWS: dict[str, str] = {
    "A": "A_consistent_full",
    "A'": "A_local_full",
    "A+A'": "A_Ap_combined_full",
    "A+A'+cascade": "A_Ap_cascade_full",
}
# The validity rows the headline shows, in order, and those carrying A's blind spot.
VALIDITY_ROWS: tuple[str, ...] = (
    "A_Ap_cascade_full",
    "A_Ap_combined_full",
    "A_consistent_full",
    "A_Ap_cascade_truth",
    "A_consistent_truth",
)
BLIND_SPOT_ROWS: frozenset[str] = frozenset(
    {
        "A_consistent_full",
        "A_consistent_truth",
        "A_consistent_lower_bound_full",
        "A_consistent_unstable_negative_full",
    }
)
BLIND_SPOT = (
    "consistent substitution (A) renames a predicate in every premise, which leaves an "
    "entity-introduction premise ('Alex is a bempus') true of the renamed world: A cannot see "
    "a step depend on one and counts every such use as ignored"
)
# Rows drawn by chain length (figure and report.md), when present.
BY_HOPS_ROWS: tuple[str, ...] = ("A_Ap_cascade_full", "A_consistent_full")
_SKIPPED = frozenset({Verdict.UNPARSEABLE, Verdict.UNSTABLE})


def _share(num: int, den: int) -> float | None:
    return num / den if den else None


def found(
    pairs: Sequence[AuditPair],
    decisions: Sequence[Decision],
    outcomes: Sequence[ProblemOutcome],
) -> dict[str, Any]:
    """What one evaluator's ``decisions`` (parallel to ``pairs``) say about the model."""
    if len(pairs) != len(decisions):
        raise ValueError(f"{len(pairs)} pairs but {len(decisions)} decisions")
    tally: Counter[str] = Counter()
    for pair, decision in zip(pairs, decisions, strict=True):
        if pair.excluded:
            continue
        verdict = decision.verdict
        if not pair.is_direct_parent:
            tally["false_positives"] += verdict.positive
            continue
        if verdict in _SKIPPED:
            continue
        kind = "entity" if pair.is_entity_premise else "rule"
        tally["judged_" + kind] += 1
        tally["dependent_" + kind] += verdict.positive
        tally["ignored_" + kind] += verdict is Verdict.INSENSITIVE
    result = rawr(pairs, decisions, outcomes)
    return found_entry(
        tally,
        false_positives=tally["false_positives"],
        correct=result.correct,
        rawr_problems=[c.problem_id for c in result.cases],
        rawr_rule=result.predicate,
        rawr_entity_only=result.structural_only,
    )


def found_entry(
    tally: Mapping[str, int],
    *,
    false_positives: int,
    correct: int,
    rawr_problems: Sequence[str],
    rawr_rule: int,
    rawr_entity_only: int,
) -> dict[str, Any]:
    """One evaluator's ``headline.found`` entry from its counts: ``tally`` holds
    ``judged_/dependent_/ignored_`` ``rule``/``entity`` (the pipeline sums them per problem,
    ``evaluator.statistics``; :func:`found` counts them from pairs)."""
    judged = tally["judged_rule"] + tally["judged_entity"]
    dependent = tally["dependent_rule"] + tally["dependent_entity"]
    return {
        "judged": judged,
        "dependent": dependent,
        "ignored": tally["ignored_rule"] + tally["ignored_entity"],
        "grounded_share": _share(dependent, judged),
        **{
            f"{what}_{kind}": tally[f"{what}_{kind}"]
            for kind in ("rule", "entity")
            for what in ("judged", "dependent", "ignored")
        },
        "grounded_share_rule": _share(tally["dependent_rule"], tally["judged_rule"]),
        "grounded_share_entity": _share(tally["dependent_entity"], tally["judged_entity"]),
        "false_positives": false_positives,
        "correct": correct,
        "rawr": len(rawr_problems),
        "rawr_rate": _share(len(rawr_problems), correct),
        "rawr_rule": rawr_rule,
        "rawr_entity_only": rawr_entity_only,
        "rawr_problems": sorted(rawr_problems),
    }


def headline_section(
    pairs: Sequence[AuditPair],
    decisions: Any,
    outcomes: Sequence[ProblemOutcome],
) -> dict[str, Any]:
    """``report.json`` ``headline`` of one model; ``decisions`` is an ``AuditDecisions``."""
    return headline_entry(
        problem_ids=[o.problem_id for o in outcomes],
        correct_problems=[o.problem_id for o in outcomes if o.answer_correct],
        found={
            name: {**found(pairs, getattr(decisions, attr), outcomes), "blind_spot": blind}
            for name, attr, blind in EVALUATORS
        },
    )


def headline_entry(
    *,
    problem_ids: Sequence[str],
    correct_problems: Sequence[str],
    found: Mapping[str, Any],
) -> dict[str, Any]:
    """``report.json`` ``headline`` from its parts (``found``: evaluator -> entry)."""
    correct = sorted(correct_problems)
    return {
        "evaluator": HEADLINE_EVALUATOR,
        "problems": len(problem_ids),
        "problem_ids": sorted(problem_ids),
        "correct": len(correct),
        "correct_problems": correct,
        "found": dict(found),
        "validity_rows": list(VALIDITY_ROWS),
        "blind_spot": {"evaluators": ["A"], "rows": sorted(BLIND_SPOT_ROWS), "what": BLIND_SPOT},
    }


def by_hops_rows(
    counts: Mapping[str, Counts],
    problem_ids: Sequence[str],
    hops: Mapping[str, int],
    *,
    seed: int,
    n_boot: int,
    rows: Sequence[str] = BY_HOPS_ROWS,
) -> dict[str, dict[str, dict[str, Any]]]:
    """``{row: {hops: {n_problems, precision, recall, f1, tp, fp, fn, tn, ci}}}``.

    Each chain length is bootstrapped over its own problems (the same seed per length, every
    row of one length on the same resamples); ``ci`` is ``None`` when ``n_boot`` is 0.
    """
    present = [r for r in rows if r in counts]
    out: dict[str, dict[str, dict[str, Any]]] = {r: {} for r in present}
    if not present or not problem_ids:
        return out
    for h in sorted({hops[p] for p in problem_ids}):
        index = np.array([i for i, p in enumerate(problem_ids) if hops[p] == h], dtype=np.intp)
        subset = {r: counts[r][index] for r in present}
        boot = None
        if n_boot > 0:
            boot = bootstrap_rows(subset, indices=resample_indices(len(index), n_boot, rng=seed))
        for r in present:
            point = scores(subset[r])
            out[r][str(h)] = {
                "n_problems": len(index),
                "precision": point.precision,
                "recall": point.recall,
                "f1": point.f1,
                "tp": point.tp,
                "fp": point.fp,
                "fn": point.fn,
                "tn": point.tn,
                "ci": None if boot is None else boot.rows[r].f1.as_list(),
            }
    return out


def verdict_mix_all(pairs: Sequence[AuditPair], decisions: Any) -> dict[str, dict[str, Any]]:
    """Per evaluator, the verdict of every certificate: ``{VERDICT: {"evaluable": n,
    "excluded": n}}`` (verdicts with no certificate left out)."""
    out: dict[str, dict[str, Any]] = {}
    for name, attr, _ in EVALUATORS:
        tally: Counter[tuple[str, bool]] = Counter(
            (d.verdict.value, p.excluded)
            for p, d in zip(pairs, getattr(decisions, attr), strict=True)
        )
        out[name] = {
            v.value: {"evaluable": tally[(v.value, False)], "excluded": tally[(v.value, True)]}
            for v in Verdict
            if tally[(v.value, False)] or tally[(v.value, True)]
        }
    return out


__all__ = [
    "BLIND_SPOT",
    "BLIND_SPOT_ROWS",
    "EVALUATORS",
    "EVALUATOR_ROWS",
    "HEADLINE_EVALUATOR",
    "VALIDITY_ROWS",
    "by_hops_rows",
    "found",
    "found_entry",
    "headline_entry",
    "headline_section",
    "verdict_mix_all",
]
