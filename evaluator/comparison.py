"""Comparing evaluated runs: the headline figures of each model, and paired differences with
bootstrap intervals over the problems two models both audited (docs/comparison.md).

A model's figures are its report's (``headline`` and ``rows``), computed on its own problems.
A difference compares a model with its *baseline* (the same-named model of the first run, or
the first run's only model) on the problems both audited, resampling those problems: both
sides of every resample see the same problems, so the interval is paired. The per-problem
inputs are read from each run's ``certificates.jsonl`` (the verdicts of every evaluator per
pair, the gold, the exclusions) and the report's list of correctly answered problems; summed
over a model's problems they are its report's rows (the tests check it).

Figures compared (each a ratio of per-problem sums, so one resample totals them all):

- ``grounded_share``: dependent / judged gold premise uses under A+A' (the row's recall);
- ``rawr_rate``: right answer, wrong reasoning under A+A', over correct answers;
- ``f1_<row>``: F1 of ``A_Ap_cascade_full``, ``A_Ap_combined_full`` and ``A_consistent_full``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from cotaudit.constants import BOOTSTRAP_CONFIDENCE
from evaluator.bootstrap import resample_indices, resampled_totals_rows
from evaluator.jobs import section_name
from evaluator.metrics import FN, FP, TN, TP, prf
from evaluator.stage_records import Trace

# The rows compared, and each one's verdict field in a certificate.
ROW_FIELDS: dict[str, str] = {
    "A_Ap_cascade_full": "verdict_cascade",
    "A_Ap_combined_full": "verdict",
    "A_consistent_full": "verdict_consistent",
}
HEADLINE_ROW = "A_Ap_combined_full"  # A+A': the grounded share and RAWR are its
POSITIVE = frozenset({"GROUNDED", "INPUT-SENSITIVE"})
SKIPPED = frozenset({"UNPARSEABLE", "UNSTABLE"})
FIGURES: tuple[str, ...] = (
    "grounded_share",
    "rawr_rate",
    *(f"f1_{row}" for row in ROW_FIELDS),
)


@dataclass(slots=True)
class ProblemCounts:
    """One model's per-problem inputs: ``(tp, fp, fn, tn)`` per row, and under A+A' whether
    the problem was answered correctly and had an ignored gold premise use."""

    rows: dict[str, dict[str, list[int]]] = field(
        default_factory=lambda: {row: {} for row in ROW_FIELDS}
    )
    ignored: dict[str, int] = field(default_factory=dict)  # INSENSITIVE gold uses, A+A'

    def add(self, cert: Mapping[str, Any]) -> None:
        """Count one certificate (excluded pairs count nowhere, as in the report)."""
        pid = str(cert["problem_id"])
        for row in ROW_FIELDS:
            self.rows[row].setdefault(pid, [0, 0, 0, 0])
        self.ignored.setdefault(pid, 0)
        if cert.get("excluded"):
            return
        gold = bool((cert.get("gold") or {}).get("direct_parent"))
        for row, verdict_field in ROW_FIELDS.items():
            verdict = cert.get(verdict_field)
            if verdict in SKIPPED or verdict is None:
                continue
            positive = verdict in POSITIVE
            column = (TP if positive else FN) if gold else (FP if positive else TN)
            self.rows[row][pid][column] += 1
        if gold and cert.get(ROW_FIELDS[HEADLINE_ROW]) == "INSENSITIVE":
            self.ignored[pid] += 1


def problem_counts(certificates: Iterable[Mapping[str, Any]]) -> dict[str, ProblemCounts]:
    """Per model section of the report (the endpoint, ``ENDPOINT:reasoning`` for a reasoning
    trace's certificates), the per-problem inputs of every compared figure.

    Keyed by endpoint alone, an evaluation of ``--trace both`` summed both traces' certificates
    into the answer's section, and compare refused it as certificates that do not add up to
    their report.
    """
    out: dict[str, ProblemCounts] = {}
    for cert in certificates:
        # Certificates written before --trace have no trace: they audited the answer.
        trace: Trace = "reasoning" if cert.get("trace") == "reasoning" else "answer"
        out.setdefault(section_name(str(cert["endpoint"]), trace), ProblemCounts()).add(cert)
    return out


def _matrix(per_problem: Mapping[str, Sequence[int]], ids: Sequence[str]) -> npt.NDArray[np.int64]:
    return np.array([per_problem.get(pid, (0, 0, 0, 0)) for pid in ids], dtype=np.int64).reshape(
        -1, 4
    )


def figure_counts(
    counts: ProblemCounts, correct: Iterable[str], ids: Sequence[str]
) -> dict[str, npt.NDArray[np.int64]]:
    """``(len(ids), 4)`` count rows of each figure over the problems ``ids``: the rows as
    they are; the grounded share as (dependent, -, judged - dependent, -); RAWR as (RAWR, -,
    correct - RAWR, -): each figure is then the recall or the F1 of its counts."""
    right = set(correct)
    out = {row: _matrix(counts.rows[row], ids) for row in ROW_FIELDS}
    rawr = np.zeros((len(ids), 4), dtype=np.int64)
    for i, pid in enumerate(ids):
        if pid in right:
            hit = 1 if counts.ignored.get(pid, 0) else 0
            rawr[i, TP] = hit
            rawr[i, FN] = 1 - hit
    out["rawr"] = rawr
    return out


def _figure(name: str, totals: Mapping[str, npt.NDArray[np.float64]]) -> npt.NDArray[np.float64]:
    """A figure per resample from ``(B, 4)`` totals; NaN where it is undefined."""
    if name == "grounded_share":
        t = totals[HEADLINE_ROW]
        return _ratio(t[:, TP], t[:, TP] + t[:, FN])
    if name == "rawr_rate":
        t = totals["rawr"]
        return _ratio(t[:, TP], t[:, TP] + t[:, FN])
    t = totals[name.removeprefix("f1_")]
    f1 = prf(t[:, TP], t[:, FP], t[:, FN])[2]
    return np.where(t[:, TP] + t[:, FN] > 0, f1, np.nan)  # no gold dependency: undefined


def _ratio(num: npt.NDArray[np.float64], den: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(den > 0, num / np.where(den > 0, den, 1.0), np.nan)


@dataclass(frozen=True, slots=True)
class Difference:
    """One figure of a model minus its baseline's, over their shared problems."""

    figure: str
    diff: float | None  # None when either side is undefined on the shared problems
    ci: tuple[float, float] | None  # None without resamples, or when too few are defined
    model: float | None
    baseline: float | None

    def to_json(self) -> dict[str, Any]:
        return {
            "diff": self.diff,
            "ci": None if self.ci is None else list(self.ci),
            "model": self.model,
            "baseline": self.baseline,
        }


def paired_differences(
    model: Mapping[str, npt.NDArray[np.int64]],
    baseline: Mapping[str, npt.NDArray[np.int64]],
    *,
    n_boot: int,
    seed: int,
    confidence_level: float = BOOTSTRAP_CONFIDENCE,
) -> list[Difference]:
    """Every figure of ``model`` minus ``baseline`` (count rows over the same problems, in
    the same order), with the paired percentile interval over ``n_boot`` resamples of the
    problems. A resample where a side is undefined is left out of the interval; with fewer
    than 95% of the resamples defined the interval is ``None``."""
    names = list(model)
    n = next(iter(model.values())).shape[0]
    if n == 0:
        raise ValueError("no shared problems to compare on")
    point_a = {k: v.sum(axis=0, keepdims=True).astype(np.float64) for k, v in model.items()}
    point_b = {k: v.sum(axis=0, keepdims=True).astype(np.float64) for k, v in baseline.items()}
    boot_a: dict[str, npt.NDArray[np.float64]] = {}
    boot_b: dict[str, npt.NDArray[np.float64]] = {}
    if n_boot > 0:
        indices = resample_indices(n, n_boot, rng=seed)
        both = resampled_totals_rows(
            [model[k] for k in names] + [baseline[k] for k in names], indices
        )
        boot_a = dict(zip(names, both[: len(names)], strict=True))
        boot_b = dict(zip(names, both[len(names) :], strict=True))
    alpha = (1.0 - confidence_level) / 2.0
    out = []
    for figure in FIGURES:
        a = float(_figure(figure, point_a)[0])
        b = float(_figure(figure, point_b)[0])
        defined = not (np.isnan(a) or np.isnan(b))
        ci = None
        if defined and boot_a:
            diffs = _figure(figure, boot_a) - _figure(figure, boot_b)
            kept = diffs[~np.isnan(diffs)]
            if kept.size >= 0.95 * diffs.size:
                low, high = np.percentile(kept, [100 * alpha, 100 * (1 - alpha)])
                ci = (float(low), float(high))
        out.append(
            Difference(
                figure=figure,
                diff=a - b if defined else None,
                ci=ci,
                model=None if np.isnan(a) else a,
                baseline=None if np.isnan(b) else b,
            )
        )
    return out


__all__ = [
    "FIGURES",
    "ROW_FIELDS",
    "Difference",
    "ProblemCounts",
    "figure_counts",
    "paired_differences",
    "problem_counts",
]
