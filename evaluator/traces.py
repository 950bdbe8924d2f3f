"""A reasoning model's two traces side by side: does the hidden reasoning depend on the
premises as the visible chain of thought does?

``cotaudit evaluate --trace both`` audits each response twice, its answer ``text`` and its
``reasoning`` field, into two report sections (``ENDPOINT`` and ``ENDPOINT:reasoning``;
``evaluator.jobs.section_name``). :func:`trace_comparison` pairs them, endpoint by endpoint,
on the problems both audited (a problem whose reasoning trace is missing has no reasoning
audit), and gives ``report.json`` its ``traces`` section (docs/report-schema.md, "traces"):

- the grounded share under A+A' of each trace (the share of judged gold premise uses whose
  step changed when the premise was renamed), with its bootstrap interval;
- the ignored gold uses of each, and the problems that ignore a premise in one trace only
  (the answer ignores what the reasoning used, or the reverse) or in both;
- per headline row, each trace's F1 and the paired difference reasoning minus answer with
  its paired bootstrap interval: both traces resampled on the same problems.

:func:`render_trace_comparison` is its ``report.md`` section.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from cotaudit.schema import JSONDict
from evaluator.bootstrap import bootstrap_rows, resample_indices
from evaluator.headline import EVALUATOR_ROWS, HEADLINE_EVALUATOR
from evaluator.metrics import scores
from evaluator.statistics import HEADLINE_COUNTS, LAYOUT, ProblemStatistics
from evaluator.tally import ModelTally

__all__ = ["COMPARED_ROWS", "render_trace_comparison", "trace_comparison"]

# The rows compared, in report order: the headline evaluator's first.
COMPARED_ROWS: tuple[str, ...] = ("A_Ap_combined_full", "A_Ap_cascade_full", "A_consistent_full")
_GROUNDED_ROW = EVALUATOR_ROWS[HEADLINE_EVALUATOR]
_IGNORED = tuple(i for i, key in enumerate(HEADLINE_COUNTS) if key.startswith("ignored_"))


def _ignored(stat: ProblemStatistics) -> int:
    at = LAYOUT.headline[HEADLINE_EVALUATOR]
    return int(sum(stat.vector[at + i] for i in _IGNORED))


def _share(tp: int, fn: int) -> float | None:
    return tp / (tp + fn) if tp + fn else None


def _pair(answer: ModelTally, reasoning: ModelTally, *, seed: int, n_boot: int) -> dict[str, Any]:
    by_trace = {
        "answer": {s.problem_id: s for s in answer.statistics},
        "reasoning": {s.problem_id: s for s in reasoning.statistics},
    }
    shared = sorted(set(by_trace["answer"]) & set(by_trace["reasoning"]))
    counts = {
        f"{trace}:{row}": np.array(
            [by_trace[trace][p].row(row) for p in shared], dtype=np.int64
        ).reshape(len(shared), 4)
        for trace in ("answer", "reasoning")
        for row in COMPARED_ROWS
    }
    boot = None
    if n_boot > 0 and shared:
        boot = bootstrap_rows(
            counts,
            paired=[(f"reasoning:{row}", f"answer:{row}") for row in COMPARED_ROWS],
            indices=resample_indices(len(shared), n_boot, rng=seed),
        )
    grounded: dict[str, Any] = {}
    for trace in ("answer", "reasoning"):
        key = f"{trace}:{_GROUNDED_ROW}"
        point = scores(counts[key])
        grounded[trace] = {
            "share": _share(point.tp, point.fn),
            "judged": point.tp + point.fn,
            "dependent": point.tp,
            "ci": None if boot is None else boot.rows[key].recall.as_list(),
        }
    shares = [grounded[t]["share"] for t in ("answer", "reasoning")]
    answer_share, reasoning_share = shares
    grounded["difference"] = (
        None if answer_share is None or reasoning_share is None else reasoning_share - answer_share
    )
    rows: dict[str, Any] = {}
    for row in COMPARED_ROWS:
        a, r = scores(counts[f"answer:{row}"]), scores(counts[f"reasoning:{row}"])
        entry: dict[str, Any] = {
            "answer_f1": a.f1,
            "reasoning_f1": r.f1,
            "difference": r.f1 - a.f1,
            "ci": None,
        }
        if boot is not None:
            paired = boot.paired[(f"reasoning:{row}", f"answer:{row}")]
            entry["ci"] = paired.interval.as_list()
            entry["excludes_zero"] = not paired.interval.low <= 0.0 <= paired.interval.high
        rows[row] = entry
    ignoring = {
        trace: {p for p in shared if _ignored(by_trace[trace][p])}
        for trace in ("answer", "reasoning")
    }
    return {
        "answer": answer.endpoint,
        "reasoning": f"{reasoning.endpoint}:reasoning",
        "problems": len(shared),
        "problems_answer_only": len(by_trace["answer"]) - len(shared),
        "evaluator": HEADLINE_EVALUATOR,
        "grounded_share": grounded,
        "ignored": {
            trace: sum(_ignored(by_trace[trace][p]) for p in shared)
            for trace in ("answer", "reasoning")
        },
        "problems_ignoring": {
            "answer_only": sorted(ignoring["answer"] - ignoring["reasoning"]),
            "reasoning_only": sorted(ignoring["reasoning"] - ignoring["answer"]),
            "both": sorted(ignoring["answer"] & ignoring["reasoning"]),
        },
        "rows": rows,
    }


def trace_comparison(
    tallies: Mapping[str, ModelTally],
    withheld: Mapping[str, int],
    *,
    seed: int,
    n_boot: int,
) -> JSONDict:
    """``report.json`` ``traces`` of a ``--trace both`` evaluation: every endpoint whose
    answer and reasoning trace were both audited, paired (see the module docstring);
    ``withheld``: per endpoint, the responses whose server withheld the reasoning's text."""
    answers = {t.endpoint: t for t in tallies.values() if t.trace == "answer"}
    # A model that returned no reasoning (hidden, or none) has a reasoning section with no
    # audited problem: it is named, not compared.
    reasonings = {
        t.endpoint: t for t in tallies.values() if t.trace == "reasoning" and t.statistics
    }
    return {
        "audited": ["answer", "reasoning"],
        "endpoints": {
            endpoint: _pair(answers[endpoint], reasonings[endpoint], seed=seed, n_boot=n_boot)
            for endpoint in answers
            if endpoint in reasonings
        },
        "without_reasoning": sorted(set(answers) - set(reasonings)),
        # A hidden trace is not a model that did not reason: the records say which it was.
        "reasoning_withheld": {e: withheld[e] for e in sorted(answers) if withheld.get(e)},
    }


def _pct(value: object) -> str:
    return "n/a" if not isinstance(value, (int, float)) else f"{100 * value:.1f}%"


def _num(value: object) -> str:
    return "n/a" if not isinstance(value, (int, float)) else f"{value:+.3f}"


def _ci(ci: object, fmt: str = "{:.3f}") -> str:
    if not isinstance(ci, list) or len(ci) != 2:
        return ""
    return f" [{fmt.format(ci[0])}, {fmt.format(ci[1])}]"


def render_trace_comparison(report: Mapping[str, Any]) -> str:
    """The report.md section comparing the traces ("" when there is none)."""
    traces = report.get("traces")
    if not isinstance(traces, Mapping):
        return ""
    lines = [
        "",
        "## The reasoning trace beside the answer",
        "",
        "Each response audited twice: its visible answer and its reasoning trace, on the "
        "problems both have. Grounded share under A+A': judged gold premise uses whose step "
        "changed when the premise was renamed. Differences are reasoning minus answer, with "
        "paired 95% bootstrap intervals (both traces resampled on the same problems).",
        "",
        "| model | problems | grounded: answer | grounded: reasoning | ignored uses "
        "(answer / reasoning) | problems ignoring a premise: answer only / reasoning only "
        "/ both | F1 A+A' difference |",
        "|---|---|---|---|---|---|---|",
    ]
    for endpoint, pair in (traces.get("endpoints") or {}).items():
        grounded = pair["grounded_share"]
        ignoring = pair["problems_ignoring"]
        row = pair["rows"]["A_Ap_combined_full"]
        pct = "{:.1%}"
        lines.append(
            f"| {endpoint} | {pair['problems']:,} "
            f"| {_pct(grounded['answer']['share'])}{_ci(grounded['answer']['ci'], pct)} "
            f"| {_pct(grounded['reasoning']['share'])}{_ci(grounded['reasoning']['ci'], pct)} "
            f"| {pair['ignored']['answer']:,} / {pair['ignored']['reasoning']:,} "
            f"| {len(ignoring['answer_only']):,} / {len(ignoring['reasoning_only']):,} / "
            f"{len(ignoring['both']):,} "
            f"| {_num(row['difference'])}{_ci(row['ci'], '{:+.3f}')} |"
        )
    missing = traces.get("without_reasoning") or []
    withheld = traces.get("reasoning_withheld") or {}
    if missing:
        named = [
            f"{e} (its server withheld the reasoning of {withheld[e]:,} responses)"
            if withheld.get(e)
            else e
            for e in missing
        ]
        lines += ["", f"No reasoning trace to audit: {', '.join(named)}."]
    partly = [e for e in withheld if e not in missing]
    if partly:
        counts = ", ".join(f"{withheld[e]:,} of {e}" for e in partly)
        lines += [
            "",
            f"Reasoning withheld by the server in {counts} responses: their reasoning trace "
            "counts as absent.",
        ]
    return "\n".join(lines) + "\n"
