"""One model's section of ``report.json``: every row, analysis and bootstrap interval.

:func:`build_model_report` is shared by ``cotaudit rescore`` (pairs from the authors'
certificates) and ``cotaudit evaluate`` (pairs from our parser and alignment); the shape is
documented in docs/report-schema.md. :func:`decide_audit` gives the per-pair decisions of every
evaluator, which the pipeline also writes into the certificates.

Every row is bootstrapped on the same resamples drawn from ``seed`` (one pass of
``bootstrap.bootstrap_rows`` over chunks of the ``(B, n_problems)`` index matrix, never stored
whole), so the intervals of different rows, and the paired difference, come from the same
resamples.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from cotaudit.constants import BOOTSTRAP_SEED
from evaluator.baselines import SelfConsistencyInput
from evaluator.bootstrap import (
    DEFAULT_N_RESAMPLES,
    BootstrapResult,
    bootstrap_rows,
    resample_indices,
)
from evaluator.cascade import CascadeMode, apply_cascade
from evaluator.headline import (
    EVALUATOR_ROWS,
    EVALUATORS,
    by_hops_rows,
    found_entry,
    headline_entry,
)
from evaluator.metrics import Counts, Scores, counts_by_hops, scores
from evaluator.pairs import AuditPair, ProblemOutcome
from evaluator.statistics import (
    DECISION_FIELDS,
    HEADLINE_COUNTS,
    LAYOUT,
    MIX_EVALUATORS,
    PAIR_ROWS,
    SELF_CONSISTENCY_ROWS,
    VERDICTS,
    ProblemStatistics,
    problem_statistics,
)
from evaluator.verdicts import (
    COMBINED,
    COMBINED_NO_SURFACE,
    CONSISTENT,
    LOCAL,
    RULES,
    Decision,
    decide_each,
)

DEFAULT_SEED = BOOTSTRAP_SEED  # seed of the bootstrap index matrix when the caller gives none

# The rows every report has, in report order (docs/report-schema.md).
REQUIRED_ROWS: tuple[str, ...] = (
    "A_consistent_full",
    "A_consistent_pred",
    "A_local_full",
    "A_Ap_combined_full",
    "A_Ap_no_surface_full",
    "A_Ap_cascade_full",
    "A_Ap_cascade_pred",
    "self_consistency_full",
    "string_diff_full",
    "A_consistent_lower_bound_full",
)
# Further rows that the published tables also have (see docs/decision-layer.md).
EXTRA_ROWS: tuple[str, ...] = (
    "self_consistency_pred",
    "A_consistent_unstable_negative_full",
)
PAIRED_KEY = "A_consistent_full_minus_self_consistency_full"
METRIC_POLICY = (
    "aligned CoT step keyed gold; excluded pairs out; skip UNPARSEABLE and UNSTABLE; "
    "GROUNDED and INPUT-SENSITIVE positive; INSENSITIVE and CASCADE negative"
)


@dataclass(frozen=True, slots=True)
class AuditDecisions:
    """Per-pair decisions of every evaluator, parallel to the pairs."""

    consistent: tuple[Decision, ...]  # A: consistent + surface
    local: tuple[Decision, ...]  # A': local + surface
    combined: tuple[Decision, ...]  # A+A'
    no_surface: tuple[Decision, ...]  # A+A' without the surface control
    cascaded: tuple[Decision, ...]  # A+A' after the cascade filter


def decide_audit(
    pairs: Sequence[AuditPair], *, cascade_mode: CascadeMode = "previous_cot_step"
) -> AuditDecisions:
    """Decisions of A, A', A+A', A+A' without surface control, and A+A' + cascade."""
    consistent, local, combined, no_surface = decide_each(
        pairs, (CONSISTENT, LOCAL, COMBINED, COMBINED_NO_SURFACE)
    )
    return AuditDecisions(
        consistent=tuple(consistent),
        local=tuple(local),
        combined=tuple(combined),
        no_surface=tuple(no_surface),
        cascaded=tuple(apply_cascade(pairs, combined, mode=cascade_mode)),
    )


def row_entry(point: Scores, boot: BootstrapResult | None) -> dict[str, Any]:
    """One ``rows[KEY]`` entry of report.json: point scores, counts and bootstrap CIs."""
    row: dict[str, Any] = {
        "precision": point.precision,
        "recall": point.recall,
        "f1": point.f1,
        "tp": point.tp,
        "fp": point.fp,
        "fn": point.fn,
        "tn": point.tn,
        "ci": None,
    }
    if boot is not None:
        row["ci"] = boot.f1.as_list()
        row["ci_precision"] = boot.precision.as_list()
        row["ci_recall"] = boot.recall.as_list()
    return row


def problem_order(outcomes: Iterable[ProblemOutcome]) -> list[str]:
    """The audited problems in the canonical order of every bootstrap row: sorted ids.

    The resamples index problems by row, so the intervals must not depend on the order in
    which problems happened to complete in the stream.
    """
    return sorted(o.problem_id for o in outcomes)


def _problem_ids(pairs: Sequence[AuditPair], outcomes: Sequence[ProblemOutcome]) -> list[str]:
    ids = problem_order(outcomes)
    if len(set(ids)) != len(ids):
        raise ValueError("outcomes: one ProblemOutcome per problem, please")
    known = set(ids)
    missing = sorted({p.problem_id for p in pairs} - known)
    if missing:
        raise ValueError(
            f"pairs of problems without a ProblemOutcome: {missing[:5]}; "
            "pass an outcome for every audited problem"
        )
    return ids


def problems_statistics(
    pairs: Sequence[AuditPair],
    outcomes: Sequence[ProblemOutcome],
    decisions: AuditDecisions,
    self_consistency: SelfConsistencyInput | None = None,
) -> list[ProblemStatistics]:
    """:func:`evaluator.statistics.problem_statistics` of every problem of ``outcomes``
    (pairs of one problem need not be adjacent; their order within the problem is kept)."""
    _problem_ids(pairs, outcomes)
    members: dict[str, list[int]] = {o.problem_id: [] for o in outcomes}
    for i, pair in enumerate(pairs):
        members[pair.problem_id].append(i)
    columns = {name: getattr(decisions, name) for name in DECISION_FIELDS}
    out = []
    for outcome in outcomes:
        index = members[outcome.problem_id]
        pid = outcome.problem_id
        summaries = problem = None
        entities: Collection[str] = ()
        if self_consistency is not None and pid in self_consistency.summaries:
            summaries = self_consistency.summaries[pid]
            problem = self_consistency.problems.get(pid)
            if problem is None:
                raise ValueError(f"self-consistency summaries for {pid!r} but no such problem")
            entities = self_consistency.entity_premises.get(pid, ())
        out.append(
            problem_statistics(
                pid,
                [pairs[i] for i in index],
                {name: [column[i] for i in index] for name, column in columns.items()},
                outcome,
                problem=problem,
                summaries=summaries,
                entity_premises=entities,
            )
        )
    return out


def build_model_report(
    pairs: Sequence[AuditPair],
    outcomes: Sequence[ProblemOutcome],
    *,
    self_consistency: SelfConsistencyInput | None = None,
    seed: int = DEFAULT_SEED,
    n_boot: int = DEFAULT_N_RESAMPLES,
    cascade_mode: CascadeMode = "previous_cot_step",
    decisions: AuditDecisions | None = None,
    alignment: Mapping[str, Any] | None = None,
    parse_rates: Mapping[str, Any] | None = None,
    non_assertions: Mapping[str, Any] | None = None,
    extra_counts: Mapping[str, Counts] | None = None,
    sections: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The ``report.json`` section of one model (docs/report-schema.md), assembled once.

    ``n_boot = 0`` skips the bootstrap (every ``ci`` is ``None``). ``alignment``,
    ``parse_rates`` and ``non_assertions`` are the pipeline's and are copied in as given; the
    self-consistency rows are absent when ``self_consistency`` is ``None``. ``extra_counts``
    are further rows (per-problem counts in :func:`problem_order`, e.g. the truth rows),
    bootstrapped on the same resamples and placed after the standard rows; ``sections`` are
    further top-level keys of the section, added as given after the standard ones.

    The pairs are reduced to per-problem statistics first (:func:`problems_statistics`) and
    the report is :func:`report_from_statistics` of those, as the pipeline's is.
    """
    if n_boot < 0:
        raise ValueError(f"n_boot must be >= 0, got {n_boot!r}")
    if decisions is None:
        decisions = decide_audit(pairs, cascade_mode=cascade_mode)
    stats = problems_statistics(pairs, outcomes, decisions, self_consistency)
    if extra_counts:
        by_id = {s.problem_id: s for s in stats}
        for key, extra in extra_counts.items():
            for r, pid in enumerate(problem_order(outcomes)):
                by_id[pid].extra[key] = np.asarray(extra[r], dtype=np.int64)
    return report_from_statistics(
        stats,
        self_consistency=self_consistency is not None,
        extra_rows=tuple(extra_counts or ()),
        seed=seed,
        n_boot=n_boot,
        cascade_mode=cascade_mode,
        alignment=alignment,
        parse_rates=parse_rates,
        non_assertions=non_assertions,
        sections=sections,
    )


def _segment(matrix: npt.NDArray[np.int64], at: int, n: int) -> npt.NDArray[np.int64]:
    return np.ascontiguousarray(matrix[:, at : at + n])


def report_from_statistics(
    statistics: Iterable[ProblemStatistics],
    *,
    self_consistency: bool = False,
    extra_rows: Sequence[str] = (),
    seed: int = DEFAULT_SEED,
    n_boot: int = DEFAULT_N_RESAMPLES,
    cascade_mode: CascadeMode = "previous_cot_step",
    alignment: Mapping[str, Any] | None = None,
    parse_rates: Mapping[str, Any] | None = None,
    non_assertions: Mapping[str, Any] | None = None,
    sections: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The ``report.json`` section of one model from its problems' statistics (any order:
    they are put in :func:`problem_order`). ``self_consistency``: the run had sample
    summaries, so the self-consistency rows are reported (zero for problems without them);
    ``extra_rows``: names of further per-problem rows in each statistics' ``extra``."""
    if n_boot < 0:
        raise ValueError(f"n_boot must be >= 0, got {n_boot!r}")
    stats = sorted(statistics, key=lambda s: s.problem_id)
    ids = [s.problem_id for s in stats]
    if len(set(ids)) != len(ids):
        raise ValueError("statistics: one per problem, please")
    n = len(stats)
    matrix = (
        np.stack([s.vector for s in stats]) if stats else np.zeros((0, LAYOUT.size), dtype=np.int64)
    )
    totals = matrix.sum(axis=0)
    counts: dict[str, Counts] = {row: _segment(matrix, LAYOUT.rows[row], 4) for row in PAIR_ROWS}
    if self_consistency:
        sc = np.zeros((n, 2, 4), dtype=np.int64)
        for r, s in enumerate(stats):
            if s.self_consistency is not None:
                sc[r] = s.self_consistency
        for k, row in enumerate(SELF_CONSISTENCY_ROWS):
            counts[row] = np.ascontiguousarray(sc[:, k, :])
    for key in extra_rows:
        if key in counts:
            raise ValueError(f"extra row {key!r} would replace a standard row; name it otherwise")
        extra = np.zeros((n, 4), dtype=np.int64)
        for r, s in enumerate(stats):
            if key in s.extra:
                extra[r] = s.extra[key]
        counts[key] = extra
    keys = [key for key in (*REQUIRED_ROWS, *EXTRA_ROWS) if key in counts]
    keys += [key for key in extra_rows if key not in keys]
    pair = ("A_consistent_full", "self_consistency_full")
    has_pair = all(key in counts for key in pair)
    boot = None
    if n_boot > 0 and ids:
        # Every row and the paired difference in one pass over the same resamples.
        boot = bootstrap_rows(
            {key: counts[key] for key in dict.fromkeys((*keys, *(pair if has_pair else ())))},
            paired=[pair] if has_pair else [],
            indices=resample_indices(len(ids), n_boot, rng=seed),
        )
    rows: dict[str, Any] = {
        key: row_entry(scores(counts[key]), boot.rows[key] if boot is not None else None)
        for key in keys
    }

    paired: dict[str, Any] = {}
    if has_pair:
        a, b = counts[pair[0]], counts[pair[1]]
        diff = scores(a).f1 - scores(b).f1
        entry: dict[str, Any] = {"diff": diff, "ci": None}
        if boot is not None:
            result = boot.paired[pair]
            entry["ci"] = result.interval.as_list()
            entry["excludes_zero"] = not result.interval.low <= 0.0 <= result.interval.high
        paired[PAIRED_KEY] = entry

    hops = {s.problem_id: s.hops for s in stats}
    by_hops = {
        str(h): {
            "n_problems": k,
            "precision": sc_.precision,
            "recall": sc_.recall,
            "f1": sc_.f1,
            "tp": sc_.tp,
            "fp": sc_.fp,
            "fn": sc_.fn,
            "tn": sc_.tn,
        }
        for h, (k, sc_) in counts_by_hops(counts["A_consistent_full"], ids, hops).items()
    }
    cases = [c for s in stats for c in s.misrepresentation_cases]
    cases.sort(key=lambda c: (c["problem_id"], c["cot_step"], c["premise_id"]))
    report: dict[str, Any] = {
        "rows": rows,
        "paired": paired,
        "rawr": _rawr_entry(stats, "A"),
        "rawr_combined": _rawr_entry(stats, "A+A'"),
        "misrepresentations": int(totals[LAYOUT.misrepresentations]),
        "misrepresentation_cases": cases,
        "certificates": {
            "total": int(totals[LAYOUT.certificates]),
            "evaluable": int(totals[LAYOUT.certificates + 1]),
        },
        "by_hops": by_hops,
        "n_cascaded": int(totals[LAYOUT.n_cascaded]),
        "verdict_mix": {
            name: {
                v.value: int(totals[LAYOUT.verdict_mix[name] + i]) for i, v in enumerate(VERDICTS)
            }
            for name, _ in MIX_EVALUATORS
        },
        "rule_mix": {
            name: {
                rule: int(totals[LAYOUT.rule_mix[name] + i])
                for i, rule in enumerate(RULES)
                if totals[LAYOUT.rule_mix[name] + i]
            }
            for name, _ in MIX_EVALUATORS
        },
        "vanished": _vanished_section(totals),
        "target_shared": {
            "pairs": int(totals[LAYOUT.target_shared]),
            "positive_consistent": int(totals[LAYOUT.target_shared + 1]),
            "positive_combined": int(totals[LAYOUT.target_shared + 2]),
        },
        "bootstrap": {
            "n_boot": n_boot,
            "seed": seed,
            "confidence_level": 0.95,
            "unit": "problem",
            "n_problems": len(ids),
        },
        "metric_policy": METRIC_POLICY,
        "cascade_mode": cascade_mode,
    }
    report.update(_headline_additions(stats, totals, counts, ids, seed=seed, n_boot=n_boot))
    if self_consistency:
        met = [s.self_consistency_alignment for s in stats]
        done = [m for m in met if m is not None]
        report["self_consistency_alignment"] = {
            "problems": len(done),
            "proof_steps_scored": sum(m[0] for m in done),
            "proof_steps_unmatched": sum(m[1] for m in done),
            "proof_steps_ambiguous": sum(m[2] for m in done),
        }
    for key, value in (
        ("alignment", alignment),
        ("parse_rates", parse_rates),
        ("non_assertions", non_assertions),
    ):
        if value is not None:
            report[key] = dict(value)
    report.update(sections or {})
    return report


def _headline_additions(
    stats: Sequence[ProblemStatistics],
    totals: npt.NDArray[np.int64],
    counts: Mapping[str, Counts],
    ids: Sequence[str],
    *,
    seed: int,
    n_boot: int,
) -> dict[str, Any]:
    """``headline``, ``by_hops_rows`` and ``verdict_mix_all`` (``evaluator.headline``) from the
    problems' statistics: the same figures the pair-level functions there compute."""
    found: dict[str, Any] = {}
    for name, _, blind in EVALUATORS:
        at = LAYOUT.headline[name]
        tally = {key: int(totals[at + i]) for i, key in enumerate(HEADLINE_COUNTS)}
        rawr = _rawr_entry(stats, name)
        found[name] = {
            **found_entry(
                tally,
                false_positives=int(totals[LAYOUT.rows[EVALUATOR_ROWS[name]] + 1]),
                correct=rawr["correct"],
                rawr_problems=rawr["problems"],
                rawr_rule=rawr["predicate"],
                rawr_entity_only=rawr["structural_only"],
            ),
            "blind_spot": blind,
        }
    mix_all: dict[str, dict[str, Any]] = {}
    for name, _ in MIX_EVALUATORS:
        evaluable, excluded = LAYOUT.verdict_mix[name], LAYOUT.verdict_mix_excluded[name]
        mix_all[name] = {
            v.value: {
                "evaluable": int(totals[evaluable + i]),
                "excluded": int(totals[excluded + i]),
            }
            for i, v in enumerate(VERDICTS)
            if totals[evaluable + i] or totals[excluded + i]
        }
    return {
        "headline": headline_entry(
            problem_ids=ids,
            correct_problems=[s.problem_id for s in stats if s.answer_correct],
            found=found,
        ),
        "by_hops_rows": by_hops_rows(
            counts, ids, {s.problem_id: s.hops for s in stats}, seed=seed, n_boot=n_boot
        ),
        "verdict_mix_all": mix_all,
    }


def _rawr_entry(stats: Sequence[ProblemStatistics], evaluator: str) -> dict[str, Any]:
    """Right answer, wrong reasoning under ``evaluator`` (docs/decision-layer.md)."""
    at = LAYOUT.rawr[evaluator]
    correct = structural_only = predicate = 0
    problems = []
    for s in stats:
        if not s.answer_correct:
            continue
        correct += 1
        entity, rule = int(s.vector[at]), int(s.vector[at + 1])
        if entity + rule == 0:
            continue
        problems.append(s.problem_id)
        structural_only += rule == 0
        predicate += rule > 0
    return {
        "correct": correct,
        "rawr": len(problems),
        # Of no correct answer there is no share to give: null, as the headline's rawr_rate.
        "rate": len(problems) / correct if correct else None,
        "structural_only": structural_only,
        "predicate": predicate,
        "problems": sorted(problems),
    }


def _vanished_section(totals: npt.NDArray[np.int64]) -> dict[str, int]:
    """How many verdicts rest on a vanished local conclusion (docs/decision-layer.md)."""
    at = LAYOUT.vanished
    positive, cascaded = int(totals[at + 1]), int(totals[at + 2])
    return {
        "pairs": int(totals[at]),
        "grounded_by_vanished": positive,
        "cascaded": cascaded,
        "grounded_after_cascade": positive - cascaded,
    }
