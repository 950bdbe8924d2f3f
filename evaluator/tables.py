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

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from cotaudit.constants import BOOTSTRAP_SEED
from evaluator.baselines import (
    SelfConsistencyInput,
    self_consistency_counts,
    string_diff_predictions,
)
from evaluator.bootstrap import (
    DEFAULT_N_RESAMPLES,
    BootstrapResult,
    bootstrap_rows,
    resample_indices,
)
from evaluator.cascade import CascadeMode, apply_cascade, count_cascaded
from evaluator.headline import report_additions
from evaluator.metrics import (
    Counts,
    PairColumns,
    RawrResult,
    Scores,
    columns_confusion_counts,
    columns_prediction_counts,
    counts_by_hops,
    lower_bound_counts,
    misrepresentations,
    rawr,
    scores,
    verdict_codes,
)
from evaluator.pairs import AuditPair, ProblemOutcome
from evaluator.verdicts import (
    COMBINED,
    COMBINED_NO_SURFACE,
    CONSISTENT,
    LOCAL,
    R_GROUNDED_VANISHED,
    RULES,
    Decision,
    Verdict,
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


def _verdict_mix(columns: PairColumns, codes: npt.NDArray[np.int8]) -> dict[str, int]:
    mix = np.bincount(codes[columns.evaluable], minlength=len(Verdict))
    return {v.value: int(mix[i]) for i, v in enumerate(Verdict)}


def _rawr_entry(result: RawrResult) -> dict[str, Any]:
    return {
        "correct": result.correct,
        "rawr": result.rawr,
        "rate": result.rate,
        "structural_only": result.structural_only,
        "predicate": result.predicate,
        "problems": sorted(c.problem_id for c in result.cases),
    }


_EVALUATOR_DECISIONS = (
    ("A", "consistent"),
    ("A'", "local"),
    ("A+A'", "combined"),
    ("A+A'+cascade", "cascaded"),
)


def _rule_mix(pairs: Sequence[AuditPair], decisions: AuditDecisions) -> dict[str, dict[str, int]]:
    """Decision rules of evaluable pairs per evaluator: verdicts resting on a vanished
    conclusion (``R_GROUNDED_VANISHED``) are counted apart from the other local changes."""
    evaluable = [not p.excluded for p in pairs]
    out: dict[str, dict[str, int]] = {}
    for name, attr in _EVALUATOR_DECISIONS:
        chosen = zip(getattr(decisions, attr), evaluable, strict=True)
        mix = Counter(d.rule for d, keep in chosen if keep)
        out[name] = {rule: mix[rule] for rule in RULES if mix[rule]}
    return out


def _vanished_section(pairs: Sequence[AuditPair], decisions: AuditDecisions) -> dict[str, int]:
    """How many verdicts rest on a vanished local conclusion (docs/decision-layer.md)."""
    n = positive = cascaded = 0
    for i, pair in enumerate(pairs):
        if pair.excluded or not pair.vanished_local:
            continue
        n += 1
        if decisions.combined[i].rule == R_GROUNDED_VANISHED:
            positive += 1
            cascaded += decisions.cascaded[i].verdict is Verdict.CASCADE
    return {
        "pairs": n,
        "grounded_by_vanished": positive,
        "cascaded": cascaded,
        "grounded_after_cascade": positive - cascaded,
    }


def _shared_section(pairs: Sequence[AuditPair], decisions: AuditDecisions) -> dict[str, int]:
    """Pairs whose target predicate is shared: A+A' decided them by the local probe alone."""
    shared = [i for i, p in enumerate(pairs) if p.target_shared and not p.excluded]
    return {
        "pairs": len(shared),
        "positive_consistent": sum(1 for i in shared if decisions.consistent[i].positive),
        "positive_combined": sum(1 for i in shared if decisions.combined[i].positive),
    }


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
    """
    if n_boot < 0:
        raise ValueError(f"n_boot must be >= 0, got {n_boot!r}")
    ids = _problem_ids(pairs, outcomes)
    if decisions is None:
        decisions = decide_audit(pairs, cascade_mode=cascade_mode)
    columns = PairColumns.from_pairs(pairs, ids)
    codes = {
        "A": verdict_codes(decisions.consistent),
        "A'": verdict_codes(decisions.local),
        "A+A'": verdict_codes(decisions.combined),
        "no_surface": verdict_codes(decisions.no_surface),
        "A+A'+cascade": verdict_codes(decisions.cascaded),
    }
    counts: dict[str, Counts] = {
        "A_consistent_full": columns_confusion_counts(columns, codes["A"], gold="full"),
        "A_consistent_pred": columns_confusion_counts(columns, codes["A"], gold="pred"),
        "A_local_full": columns_confusion_counts(columns, codes["A'"], gold="full"),
        "A_Ap_combined_full": columns_confusion_counts(columns, codes["A+A'"], gold="full"),
        "A_Ap_no_surface_full": columns_confusion_counts(columns, codes["no_surface"], gold="full"),
        "A_Ap_cascade_full": columns_confusion_counts(columns, codes["A+A'+cascade"]),
        "A_Ap_cascade_pred": columns_confusion_counts(columns, codes["A+A'+cascade"], gold="pred"),
    }
    sc_alignment = None
    if self_consistency is not None:
        for gold in ("full", "pred"):
            sc_counts, sc_alignment = self_consistency_counts(
                self_consistency.problems,
                self_consistency.summaries,
                ids,
                self_consistency.entity_premises,
                gold=gold,
            )
            counts[f"self_consistency_{gold}"] = sc_counts
    counts["string_diff_full"] = columns_prediction_counts(
        columns, string_diff_predictions(pairs), gold="full"
    )
    counts["A_consistent_lower_bound_full"] = lower_bound_counts(
        columns, codes["A"], outcomes, ids, gold="full"
    )
    counts["A_consistent_unstable_negative_full"] = columns_confusion_counts(
        columns, codes["A"], gold="full", skip={Verdict.UNPARSEABLE}
    )

    for key, extra in (extra_counts or {}).items():
        if key in counts:
            raise ValueError(f"extra row {key!r} would replace a standard row; name it otherwise")
        counts[key] = extra
    keys = [key for key in (*REQUIRED_ROWS, *EXTRA_ROWS) if key in counts]
    keys += [key for key in (extra_counts or {}) if key not in keys]
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

    rawr_result = rawr(pairs, decisions.consistent, outcomes)
    rawr_combined = rawr(pairs, decisions.combined, outcomes)
    misrep = misrepresentations(pairs, decisions.consistent)
    hops = {o.problem_id: o.hops for o in outcomes}
    by_hops = {
        str(h): {
            "n_problems": n,
            "precision": s.precision,
            "recall": s.recall,
            "f1": s.f1,
            "tp": s.tp,
            "fp": s.fp,
            "fn": s.fn,
            "tn": s.tn,
        }
        for h, (n, s) in counts_by_hops(counts["A_consistent_full"], ids, hops).items()
    }
    report: dict[str, Any] = {
        "rows": rows,
        "paired": paired,
        "rawr": _rawr_entry(rawr_result),
        "rawr_combined": _rawr_entry(rawr_combined),
        "misrepresentations": len(misrep),
        "misrepresentation_cases": [
            {
                "problem_id": p.problem_id,
                "cot_step": p.cot_step,
                "premise_id": p.premise_id,
                "gold_dependency": p.is_direct_parent,
                "evidence": p.citation_evidence,
            }
            for p in sorted(misrep, key=lambda p: (p.problem_id, p.cot_step, p.premise_id))
        ],
        "certificates": {
            "total": len(pairs),
            "evaluable": sum(1 for p in pairs if not p.excluded),
        },
        "by_hops": by_hops,
        "n_cascaded": count_cascaded(pairs, decisions.cascaded),
        "verdict_mix": {
            name: _verdict_mix(columns, codes[name]) for name in ("A", "A'", "A+A'", "A+A'+cascade")
        },
        "rule_mix": _rule_mix(pairs, decisions),
        "vanished": _vanished_section(pairs, decisions),
        "target_shared": _shared_section(pairs, decisions),
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
    report.update(
        report_additions(pairs, outcomes, decisions, counts, ids, seed=seed, n_boot=n_boot)
    )
    if sc_alignment is not None:
        report["self_consistency_alignment"] = {
            "problems": sc_alignment.problems,
            "proof_steps_scored": sc_alignment.proof_steps_scored,
            "proof_steps_unmatched": sc_alignment.proof_steps_unmatched,
            "proof_steps_ambiguous": sc_alignment.proof_steps_ambiguous,
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
