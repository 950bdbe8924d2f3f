"""Rendering a :class:`~evaluator.selection.SelectionReport`: table, Markdown, JSON, figures.

Numbers are printed at the precision of seed 003's tables: ``delta`` and its interval in
percentage points with one decimal and a sign, proportions with three decimals, p values with
three decimals (``<0.0001`` below that; pooled p values in scientific notation), odds ratios
and z with two decimals. Undefined values print as ``-`` (``N/A`` for a ceiling's test).

Figures (matplotlib, Agg backend; each PNG at 300 dpi, SVG and PDF, with a caption in
``selection.md`` defining its abbreviations, and a short key of them in a note under the
figure, as the report's figures keep, so that a figure taken out of ``selection.md`` still
says what its marks, bars and abbreviations are): ``selection_fpop_fsel`` (F_pop vs F_sel per
deployment, F_sel with the delta interval shifted onto it, a smaller F_sel dot drawn on the
F_pop circle so that both show where they coincide), ``selection_forest`` (odds ratios with
Woolf intervals, marker area by inverse variance within bounds, the pooled CMH diamond, on a
log axis with plain-decimal ticks whose labels never meet) and ``selection_gap_vs_accuracy``
(delta with its interval against accuracy, each deployment named inside the axes, clear of
the other names, the points, the intervals and the zero line: beside its point where a side
is free, else at the nearest free place with a thin line back to its point; with more than
``GAP_SCATTER_MAX`` deployments, rows instead, one a deployment in order of accuracy, its
accuracy beside its delta, the caption then :data:`GAP_ROWS_CAPTION`).
"""

from __future__ import annotations

import itertools
import math
from pathlib import Path
from typing import Any

import orjson

from cotaudit import terminal
from cotaudit.output_file import replacing
from evaluator.selection import DeploymentStats, JointCounts, SelectionReport, deployment_stats

FIGURES = (
    "selection_fpop_fsel.png",
    "selection_forest.png",
    "selection_gap_vs_accuracy.png",
)


def fmt_pp(value: float | None) -> str:
    """A proportion as signed percentage points with one decimal (``+7.4``)."""
    if value is None:
        return "-"
    pp = round(value * 100, 1)
    return f"{pp:+.1f}" if pp != 0 else "0.0"


def fmt_p(value: float | None, *, scientific: bool = False) -> str:
    if value is None:
        return "N/A"
    if value < 1e-4:
        return f"{value:.1e}" if scientific else "<0.0001"
    return f"{value:.4f}" if value < 1e-3 else f"{value:.3f}"


def fmt_num(value: float | None, digits: int = 3) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def fmt_ci(ci: tuple[float, float] | None) -> str:
    return "N/A" if ci is None else f"[{fmt_pp(ci[0])}, {fmt_pp(ci[1])}]"


def _row(name: str, s: DeploymentStats) -> list[str]:
    acc = "-" if s.accuracy is None else f"{s.accuracy * 100:.1f}%"
    return [
        name,
        str(s.n),
        acc,
        fmt_num(s.f_pop),
        fmt_num(s.f_sel),
        fmt_pp(s.delta),
        fmt_ci(s.delta_ci),
        fmt_p(s.p),
        fmt_num(s.odds_ratio, 2) + (HALDANE_MARK if s.haldane else ""),
        "-" if s.n_for_80_power is None else str(s.n_for_80_power),
    ]


# A zero cell makes ad/bc 0 or infinite; the table shows the corrected ratio, and says so: a
# reader seeing 389.57 beside b = 0 would otherwise take it for an estimate of the ratio.
HALDANE_MARK = " (H)"
HALDANE_NOTE = (
    "(H): a zero cell; the odds ratio is Haldane-Anscombe's, +0.5 in every cell "
    "(its Woolf interval too)"
)


def _haldane_note(report: SelectionReport) -> list[str]:
    """The note under the tables where one of their odds ratios carries the mark."""
    marked = [k for k, s in report.deployments.items() if s.haldane and s.odds_ratio is not None]
    return [f"{HALDANE_NOTE}: {', '.join(marked)}."] if marked else []


HEADER = ["deployment", "n", "acc", "F_pop", "F_sel", "delta_pp", "95% CI (pp)", "p", "OR", "n_80%"]


# How many, then the gap with its interval and test, then the odds ratio and the power: a
# table split to fit keeps each together.
GROUPS = (
    terminal.Group(range(1, 3)),
    terminal.Group(range(3, 8)),
    terminal.Group(range(8, len(HEADER))),
)


def render_table(report: SelectionReport, *, width: int | None = None) -> str:
    """The terminal table: sub-ceiling deployments, ceilings apart, pooled and leave-one-out,
    in lines of at most ``width`` characters (the terminal's by default; but for a deployment
    name longer than that)."""
    width = terminal.terminal_width() if width is None else width
    main = [HEADER] + [_row(k, v) for k, v in report.deployments.items() if not v.ceiling]
    lines = (
        terminal.fitted(main, GROUPS, width, rule=False)
        if len(main) > 1
        else ["(no sub-ceiling deployment)"]
    )
    ceilings = [_row(k, v) for k, v in report.deployments.items() if v.ceiling]
    if ceilings:
        title = "Ceiling controls (P(C=1)=1, filter vacuous; not pooled):"
        table = terminal.fitted([HEADER, *ceilings], GROUPS, width, rule=False)
        # Where both are one table, the ceilings read under the header above; where either
        # is split, each of their tables names its columns.
        one_table = "" not in table and "" not in lines and len(main) > 1
        lines += ["", *terminal.wrapped(title, width), *(table[1:] if one_table else table)]
    pooled = report.pooled
    said = [
        *_haldane_note(report),
        f"Pooled CMH over {len(pooled.deployments)} deployment(s), n={pooled.n}: "
        f"OR = {fmt_num(pooled.cmh_or, 2)}, z = {fmt_num(pooled.z, 2)}, "
        f"p = {fmt_p(pooled.p, scientific=True)}",
    ]
    if report.leave_one_out:
        said.append("Leave one out:")
        for name, loo in report.leave_one_out.items():
            said.append(
                f"  without {name}: n={loo.pooled.n}, z = {fmt_num(loo.pooled.z, 2)}, "
                # As the pooled line above: "p = <0.0001" is not a sentence.
                f"p = {fmt_p(loo.pooled.p, scientific=True)}"
            )
    for name, dec in report.strata.items():
        share = (
            f"- ({dec.reasons.get('between_share', 'undefined')})"
            if dec.between_share is None
            else f"{dec.between_share * 100:.1f}%"
        )
        ci = dec.between_share_ci
        ci_text = "" if ci is None else f" [{ci[0] * 100:.1f}, {ci[1] * 100:.1f}]"
        said.append(f"Strata of {name}: between-stratum share of Cov(A,C) = {share}{ci_text}")
    for name, reasons in report.excluded.items():
        if reasons:
            items = ", ".join(f"{k}: {v}" for k, v in sorted(reasons.items()))
            said.append(f"Excluded traces of {name}: {items}")
    lines.append("")
    for line in said:
        indent = " " * (len(line) - len(line.lstrip()) + 2)
        lines += terminal.wrapped(line, width, indent)
    return "\n".join(lines)


def render_markdown(report: SelectionReport, figures: list[str] | None = None) -> str:
    """``selection.md``: the tables of :func:`render_table` in Markdown, plus the figures."""
    out = ["# Selection study: correctness conditioning", ""]
    md_header = [
        "deployment",
        "n",
        "acc",
        "F_pop",
        "F_sel",
        "Δ (pp)",
        "95% CI (pp)",
        "p",
        "OR",
        "n for 80% power",
    ]

    def table(rows: list[list[str]]) -> list[str]:
        lines = ["| " + " | ".join(md_header) + " |", "|" + "---|" * len(md_header)]
        return lines + ["| " + " | ".join(r) + " |" for r in rows]

    subs = [_row(k, v) for k, v in report.deployments.items() if not v.ceiling]
    out += table(subs) if subs else ["(no sub-ceiling deployment)"]
    ceilings = [_row(k, v) for k, v in report.deployments.items() if v.ceiling]
    if ceilings:
        out += [
            "",
            "Ceiling controls (P(C=1) = 1: the filter is vacuous; kept out of pooling):",
            "",
            *table(ceilings),
        ]
    out += [line for note in _haldane_note(report) for line in ("", note)]
    undefined = any(v.reasons for v in report.deployments.values())
    undefined_note = " - or N/A: undefined (why: *Undefined values*, below)."
    out += ["", TABLE_LEGEND + (undefined_note if undefined else "")]
    p = report.pooled
    out += [
        "",
        "## Pooled (Cochran-Mantel-Haenszel, no continuity correction)",
        "",
        f"- deployments: {', '.join(p.deployments) or '-'} (n = {p.n})",
        f"- OR_MH = {fmt_num(p.cmh_or, 2)}"
        + ("" if p.cmh_or_ci is None else f" [{p.cmh_or_ci[0]:.2f}, {p.cmh_or_ci[1]:.2f}]"),
        f"- z = {fmt_num(p.z, 2)}, p = {fmt_p(p.p, scientific=True)}",
    ]
    for key, why in p.reasons.items():
        out.append(f"- {key}: {why}")
    if report.leave_one_out:
        out += [
            "",
            "## Leave one deployment out",
            "",
            "| removed | remaining n | z | p |",
            "|---|---|---|---|",
        ]
        for name, loo in report.leave_one_out.items():
            out.append(
                f"| {name} | {loo.pooled.n} | {fmt_num(loo.pooled.z, 2)} | {fmt_p(loo.pooled.p)} |"
            )
    if report.strata:
        out += [
            "",
            "## Covariance decomposition by stratum",
            "",
            "| deployment | Cov(A,C) | within | between | between share | 95% bootstrap |",
            "|---|---|---|---|---|---|",
        ]
        for name, dec in report.strata.items():
            share = "-" if dec.between_share is None else f"{dec.between_share * 100:.1f}%"
            ci = dec.between_share_ci
            ci_text = "-" if ci is None else f"[{ci[0] * 100:.1f}, {ci[1] * 100:.1f}]"
            out.append(
                f"| {name} | {fmt_num(dec.cov, 4)} | {fmt_num(dec.within, 4)} | "
                f"{fmt_num(dec.between, 4)} | {share} | {ci_text} |"
            )
    notes = [(k, f, why) for k, v in report.deployments.items() for f, why in v.reasons.items()]
    if notes:
        out += ["", "## Undefined values", ""]
        out += [f"- {k}: `{f}` is null - {why}" for k, f, why in notes]
    excluded = {k: v for k, v in report.excluded.items() if v}
    if excluded:
        out += ["", "## Excluded traces (counted, never guessed)", ""]
        for name, reasons in excluded.items():
            out.append(f"- {name}: " + ", ".join(f"{k}: {v}" for k, v in sorted(reasons.items())))
    families = report.extra.get("families")
    if isinstance(families, dict) and families:
        out += [
            "",
            "## By task family",
            "",
            # Δ with its interval, as in the table above: a family's gap is on a third of the
            # traces, and +12.0 reads as an effect where its interval may straddle 0.
            "| deployment | family | n | acc | F_pop | F_sel | Δ (pp) | 95% CI (pp) |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for name, per in families.items():
            for family, cell in per.items():
                s = deployment_stats(JointCounts(cell["a"], cell["b"], cell["c"], cell["d"]))
                acc = "-" if s.accuracy is None else f"{s.accuracy * 100:.1f}%"
                out.append(
                    f"| {name} | {family} | {s.n} | {acc} | {fmt_num(s.f_pop)} | "
                    f"{fmt_num(s.f_sel)} | {fmt_pp(s.delta)} | {fmt_ci(s.delta_ci)} |"
                )
    preserving = report.extra.get("preserving")
    if isinstance(preserving, dict) and preserving:
        out += ["", "## Semantics-preserving edits (answer must not change)", ""]
        for name, v in preserving.items():
            rate = "-" if not v["n"] else f"{v['agree'] / v['n'] * 100:.1f}%"
            out.append(f"- {name}: {v['agree']} of {v['n']} readable answers unchanged ({rate})")
    if figures:
        out += ["", "## Figures"]
        for f in figures:
            stem = Path(f).stem
            out += [
                "",
                f"![{stem}]({f})",
                "",
                f"*{figure_caption(f, report)}* ([SVG]({stem}.svg), [PDF]({stem}.pdf))",
            ]
    return "\n".join(out) + "\n"


def json_bytes(report: SelectionReport) -> bytes:
    """``selection.json``: :meth:`SelectionReport.to_json` (no NaN: nulls with reasons)."""
    return orjson.dumps(report.to_json(), option=orjson.OPT_INDENT_2) + b"\n"


def write_json(report: SelectionReport, path: Path) -> None:
    """:func:`json_bytes` written over ``path`` in one step (its directory must exist)."""
    with replacing(path) as handle:
        handle.write(json_bytes(report))


# Tick values of the forest plot's log axis: plain decimals, never 10^x notation.
# From 1e-4 to 1e4: a Haldane-corrected interval (a zero cell) reaches past 100, and an axis
# left without a label over its outer decades hides how far the interval runs.
ODDS_TICKS = (
    *(m * 10.0**e for e in range(-4, -2) for m in (1, 2, 5)),
    *(0.01, 0.02, 0.05, 0.1, 0.2, 0.25, 0.5, 1.0, 2.0, 4.0, 5.0, 10.0, 20.0, 50.0, 100.0),
    *(m * 10.0**e for e in range(2, 5) for m in (2, 5, 10)),
)
# Least ratio between neighbouring ticks, tried in turn until no two tick labels meet: an axis
# spanning four decades (a Haldane-corrected odds ratio's interval) has no room for 1-2-5.
ODDS_TICK_FACTORS = (1.9, 3.9, 9.9, 99.0)
TICK_LABEL_GAP = 3.0  # points kept clear between two tick labels
# Bounds of a forest square's area (points squared): area follows inverse variance, but a
# square no bigger than the interval's line would hide the estimate, and an unbounded one
# would cover its own interval.
FOREST_AREA = (16.0, 160.0)
# F_pop is an open circle wider than the filled F_sel dot drawn on it, so that where the two
# coincide (a ceiling control, Δ = 0) the dot sits inside the circle and both stay visible.
FPOP_SIZE = 9.0  # points, marker diameter
FPOP_EDGE = 1.2  # points
FSEL_SIZE = 5.0  # points: 6 across with its 1-point edge, inside the circle's 7.8
LABEL_OFFSET = 5.0  # points between a point of the gap figure and its name
# Beyond this many deployments the gap figure is drawn as rows, one a deployment, not as a
# scatter (:func:`_gap_rows`): at 20 the names beside the points no longer find room, and the
# lines to names placed further off cross other points and intervals.
GAP_SCATTER_MAX = 8
GAP_ROW_HEIGHT = 0.22  # inches: a row of 8.5 pt text with room between


def _rows_height(rows: int) -> float:
    """Inches for the rows of a figure with one row per deployment (and the pooled one):
    roomy for a few; past GAP_SCATTER_MAX, tighter, so that twenty stay within a page."""
    return (0.45 if rows <= GAP_SCATTER_MAX else 0.28) * rows


# Points kept clear around a point or an interval of the gap figure: the marker's radius with
# its edge (6-point markers) and the caps' half width (3 points).
OBSTACLE_PAD = 4.0
DEFINITIONS = (
    "A: the trace followed the intervention (its answer to the intervened task equals the "
    "counterfactual oracle); C: it answered the original task correctly; F_pop = P(A = 1) over "
    "all traces; F_sel = P(A = 1 | C = 1), over the correctly answered ones; "
    "Δ = F_sel − F_pop, in percentage points (pp)"
)
# Under the tables of selection.md: what each column is. The figures' captions define A, C
# and F too, but a page written with --no-figures has none, and none says what p, OR and the
# power column are.
TABLE_LEGEND = (
    f"{DEFINITIONS}. *n*: traces counted, a + b + c + d (of a run: those whose original and "
    "intervened answers were both read); *acc*: "
    "accuracy, P(C = 1); *95% CI*: the 95% delta-method (Wald) interval of Δ; *p*: Pearson's "
    "chi-square test of independence of A and C (1 df, no continuity correction); *OR*: the "
    "odds ratio of A and C, ad/bc (a = A1 C1, b = A0 C1, c = A1 C0, d = A0 C0); *n for 80% "
    "power*: traces at which the Wald test of Δ = 0 would have 80% power, were this Δ the "
    "true one."
)
FIGURE_CAPTIONS = {
    FIGURES[0]: "Faithfulness over all traces (F_pop, open circles) and over correctly "
    "answered traces (F_sel, filled dots; where the two are equal the dot sits inside the "
    "circle), per deployment; the bar is F_pop plus the 95% delta-method (Wald) interval of "
    "Δ, so it surrounds F_sel; no bar where Δ has no interval (a ceiling control, every trace "
    f"correct, has F_sel = F_pop). {DEFINITIONS}.",
    FIGURES[1]: "Odds ratio of A and C per sub-ceiling deployment with its 95% Woolf interval "
    "(marker area proportional to inverse variance, within a fixed least and greatest size), "
    "and the pooled Cochran-Mantel-Haenszel (CMH) odds ratio with its interval (diamond); "
    f"log scale, 1 = no association. {DEFINITIONS}.",
    FIGURES[2]: "The selection gap Δ with its 95% delta-method (Wald) interval against accuracy "
    "P(C = 1), per deployment, each named beside its point or joined to it by a thin line "
    f"(* p < 0.05; a grey diamond: no interval). {DEFINITIONS}.",
}


# The notes under the figures (``evaluator.figures.add_note``): the captions' definitions,
# shortened, so that a figure taken out of selection.md still says what its marks are.
NOTE_AC = "A: the trace followed the intervention; C: it answered the original task correctly"
NOTE_F = (
    "F_pop = P(A = 1), over all traces; F_sel = P(A = 1 | C = 1), over the correctly answered "
    "ones; Δ = F_sel − F_pop"
)
NOTE_WALD = "95% delta-method (Wald) interval"
NOTE_STAR = "*: p < 0.05 (chi-square test of A and C)"
NOTE_NO_INTERVAL = "Grey diamond: Δ has no interval"


def _why_no_interval(bare: list[DeploymentStats]) -> str:
    """Why the deployments ``bare`` have no interval of Δ, as the note says it."""
    why = []
    if any(s.ceiling for s in bare):
        why.append("a ceiling control: every trace correct, F_sel = F_pop")
    if not all(s.ceiling for s in bare):
        why.append("a degenerate table: zero variance")
    return f" ({'; or '.join(why)})" if why else ""


def fpop_fsel_note(stats: list[DeploymentStats]) -> list[str]:
    """The key under ``selection_fpop_fsel`` for the deployments ``stats`` it draws."""
    drawn = [s for s in stats if s.f_sel is not None]
    barred = any(s.delta_ci is not None for s in drawn)
    bare = [s for s in drawn if s.delta_ci is None]
    bars = f"Bars: F_pop + the {NOTE_WALD} of Δ, so around F_sel" if barred else "No intervals"
    if bare and barred:
        bars += "; no bar where Δ has no interval"
    if bare:
        bars += _why_no_interval(bare)
    return [NOTE_AC, NOTE_F, bars]


ZERO_MARGIN = "a zero margin: no trace correct, or every trace or none following"


def forest_note(report: SelectionReport, drawn: list[str]) -> list[str]:
    """The key under ``selection_forest``, which draws the odds ratios of ``drawn``."""
    p = report.pooled
    marks = "Squares: odds ratio of A and C, area by inverse variance (bounded)"
    bars = "Bars: 95% Woolf intervals"
    if p.cmh_or is not None and p.cmh_or_ci is not None:
        marks += "; diamond: pooled Cochran-Mantel-Haenszel (CMH) odds ratio"
        bars += ", the diamond's width its 95% interval"
    notes = [NOTE_AC, marks, f"{bars}; log scale, 1 = no association"]
    left = [k for k, s in report.deployments.items() if s.f_pop is not None and k not in drawn]
    if left:
        # Each left out for its own reason: a ceiling control, or a zero margin (no trace
        # correct, or every trace or none following the intervention).
        ceilings = [k for k in left if report.deployments[k].ceiling]
        margins = [k for k in left if k not in ceilings]
        groups = [
            (why, names)
            for why, names in (("every trace correct", ceilings), (ZERO_MARGIN, margins))
            if names
        ]
        if len(groups) == 1:
            (why, names), *_ = groups
            notes.append(f"Not drawn (no odds ratio: {why}): {', '.join(names)}")
        else:
            each = "; ".join(f"{', '.join(names)} ({why})" for why, names in groups)
            notes.append(f"Not drawn (no odds ratio): {each}")
    corrected = [k for k in drawn if report.deployments[k].haldane]
    if corrected:
        notes.append(f"A zero cell, Haldane-Anscombe +0.5 in every cell: {', '.join(corrected)}")
    return notes


def gap_note(stats: list[DeploymentStats]) -> list[str]:
    """The key under ``selection_gap_vs_accuracy`` for the deployments ``stats`` it draws."""
    barred = any(s.delta_ci is not None for s in stats)
    notes = [NOTE_AC, f"{NOTE_F}, in percentage points (pp)"]
    notes.append(f"Bars: {NOTE_WALD}s of Δ" if barred else "No intervals")
    if any(s.p is not None and s.p < 0.05 for s in stats):
        notes.append(NOTE_STAR)
    bare = [s for s in stats if s.delta_ci is None]
    if bare:
        notes.append(NOTE_NO_INTERVAL + _why_no_interval(bare))
    return notes


GAP_ROWS_CAPTION = (
    "The selection gap Δ with its 95% delta-method (Wald) interval (right) beside accuracy "
    "P(C = 1) (left), one row a deployment, in order of accuracy, highest first (* p < 0.05; "
    f"a grey diamond: no interval). {DEFINITIONS}."
)


def figure_caption(figure: str, report: SelectionReport) -> str:
    """The caption of ``figure`` as ``write_figures`` drew it for ``report``."""
    if figure == FIGURES[2] and gap_as_rows(report):
        return GAP_ROWS_CAPTION
    return FIGURE_CAPTIONS.get(figure, Path(figure).stem)


def _odds_ticks(low: float, high: float, factor: float = ODDS_TICK_FACTORS[0]) -> list[float]:
    """The :data:`ODDS_TICKS` inside [low, high], thinned to at most one tick per ``factor``
    (on a log axis equal ratios take equal widths); 1 is always kept."""
    inside = [t for t in ODDS_TICKS if low <= t <= high] or [1.0]
    kept: list[float] = []
    for tick in inside:
        if not kept or tick / kept[-1] >= factor or tick == 1.0:
            if kept and tick == 1.0 and tick / kept[-1] < factor:
                kept.pop()
            kept.append(tick)
    return kept


def _tick_label(value: float) -> str:
    return f"{value:g}"


def _set_odds_ticks(fig: Any, ax: Any, low: float, high: float) -> None:
    """The forest's x ticks: the densest :func:`_odds_ticks` whose labels, as laid out, keep
    ``TICK_LABEL_GAP`` between each other."""
    from matplotlib.ticker import FixedLocator

    gap = TICK_LABEL_GAP * fig.dpi / 72
    for factor in ODDS_TICK_FACTORS:
        ax.xaxis.set_major_locator(FixedLocator(_odds_ticks(low, high, factor)))
        fig.draw_without_rendering()
        boxes = sorted(
            (t.get_window_extent() for t in ax.xaxis.get_ticklabels() if t.get_text()),
            key=lambda box: box.x0,
        )
        if all(b.x0 - a.x1 >= gap for a, b in itertools.pairwise(boxes)):
            return


def _overlap(a: Any, b: Any) -> float:
    """The area two display boxes share (0 when they do not meet)."""
    width = min(a.x1, b.x1) - max(a.x0, b.x0)
    height = min(a.y1, b.y1) - max(a.y0, b.y0)
    return float(max(0.0, width) * max(0.0, height))


NAME_SIDES = (  # offset (points), horizontal and vertical alignment, in order of preference
    ((LABEL_OFFSET, LABEL_OFFSET), "left", "bottom"),
    ((LABEL_OFFSET, -LABEL_OFFSET), "left", "top"),
    ((-LABEL_OFFSET, LABEL_OFFSET), "right", "bottom"),
    ((-LABEL_OFFSET, -LABEL_OFFSET), "right", "top"),
    ((LABEL_OFFSET, 0.0), "left", "center"),
    ((-LABEL_OFFSET, 0.0), "right", "center"),
)
NAME_PASSES = 3  # layouts tried when a name too long for the axes needs room beside them
# Where every side of its point meets an interval, a point or a name (points close together,
# long intervals), the name goes further off, to the nearest free place of a grid of offsets
# spanning the axes, with a thin line back to its point.
NAME_STEP = 4.0  # points between two offsets of that grid
LEADER = {"arrowstyle": "-", "color": "0.45", "lw": 0.6, "shrinkB": OBSTACLE_PAD}
# Where no place of the axes is free, the y range grows upward by this share of itself, and
# the names are placed again, into the room made above the points; at most NAME_ROOMS times.
NAME_ROOM = 0.15
NAME_ROOMS = 4


def text_extent(name: Any) -> Any:
    """The display box of an annotation's text alone, without the line to its point."""
    from matplotlib.text import Text

    name.get_window_extent()  # places the text where its offset and alignment put it
    return Text.get_window_extent(name)


def _place_names(fig: Any, ax: Any, names: list[Any], obstacles: list[Any]) -> None:
    """Put each name of the gap figure beside its point where it stays inside the axes and
    meets no other name, point or interval (``obstacles``: data boxes): on a side of its point
    (:data:`NAME_SIDES`), else at the nearest free place further off, with a line back to the
    point; where none is free, the y range grows (:data:`NAME_ROOM`) and the names are placed
    again. Names are placed from the highest point down, so that of two points close together
    the upper one's name goes above the lower's.

    Names inside the axes are out of the layout, which then does not move under them; a name
    too long for the axes goes out past the right spine, into the margin, and joins the
    layout so that the saved figure keeps it whole; as that narrows the axes, the names are
    placed again on the new layout."""
    for name in names:
        name.set_in_layout(False)
    rooms = 0
    for _ in range(NAME_PASSES + NAME_ROOMS):
        fig.draw_without_rendering()  # the layout the names are placed on
        spilled, crowded = _place_names_once(fig, ax, names, obstacles)
        if crowded and rooms < NAME_ROOMS:
            low, high = ax.get_ylim()
            ax.set_ylim(low, high + NAME_ROOM * (high - low))
            rooms += 1
            continue
        if all(name.get_in_layout() == (name in spilled) for name in names):
            return
        for name in names:
            name.set_in_layout(name in spilled)


def _offsets(width: float, height: float) -> list[tuple[float, float]]:
    """The grid's offsets (points) within ``width`` and ``height`` of a point, nearest first."""
    xs = [NAME_STEP * k for k in range(-int(width / NAME_STEP), int(width / NAME_STEP) + 1)]
    ys = [NAME_STEP * k for k in range(-int(height / NAME_STEP), int(height / NAME_STEP) + 1)]
    return sorted(itertools.product(xs, ys), key=lambda xy: math.hypot(*xy))


def _alignment(offset: tuple[float, float]) -> tuple[str, str]:
    """A name's alignment at ``offset`` from its point: its side that faces the point."""
    dx, dy = offset
    ha = "left" if dx > 0 else "right" if dx < 0 else "center"
    va = "bottom" if dy > 0 else "top" if dy < 0 else "center"
    return ha, va


def _costs(boxes: Any, axes_box: Any, others: Any) -> Any:
    """What each candidate box (rows x0, y0, x1, y1, display) costs: the area it covers of
    ``others`` (rows alike), plus the area outside the axes (past the right spine into the
    margin, which the saved figure widens, less than past the others, into tick labels, the
    axis labels or the title)."""
    import numpy as np

    def shared(a: Any, b: Any) -> Any:
        width = np.minimum(a[:, None, 2], b[None, :, 2]) - np.maximum(a[:, None, 0], b[None, :, 0])
        height = np.minimum(a[:, None, 3], b[None, :, 3]) - np.maximum(a[:, None, 1], b[None, :, 1])
        return (np.clip(width, 0, None) * np.clip(height, 0, None)).sum(axis=1)

    area = (boxes[:, 2] - boxes[:, 0]) * (boxes[:, 3] - boxes[:, 1])
    inside = shared(boxes, np.array([axes_box.extents]))
    right = np.array([[axes_box.x1, -np.inf, np.inf, np.inf]])
    beyond_right = np.nan_to_num(shared(boxes, right), posinf=0.0)
    covered = shared(boxes, others) if len(others) else np.zeros(len(boxes))
    return 100 * beyond_right + 1000 * (area - inside - beyond_right) + covered


def _contains(box: Any, point: Any) -> bool:
    return bool(box[0] <= point[0] <= box[2] and box[1] <= point[1] <= box[3])


def _crosses(start: Any, ends: Any, boxes: Any) -> Any:
    """For each segment from ``start`` to a row of ``ends``, whether it meets any of ``boxes``
    (rows x0, y0, x1, y1): the slab test of the segment's parameter range inside each box."""
    import numpy as np

    direction = ends - start  # (n, 2)
    with np.errstate(divide="ignore", invalid="ignore"):
        t0 = (boxes[None, :, :2] - start) / direction[:, None, :]  # (n, m, 2)
        t1 = (boxes[None, :, 2:] - start) / direction[:, None, :]
    # A segment parallel to a slab's sides: inside it throughout, or never.
    parallel = direction[:, None, :] == 0
    inside = (boxes[None, :, :2] <= start) & (start <= boxes[None, :, 2:])
    low = np.where(parallel, np.where(inside, -np.inf, np.inf), np.minimum(t0, t1))
    high = np.where(parallel, np.where(inside, np.inf, -np.inf), np.maximum(t0, t1))
    enter = np.maximum(low.max(axis=2), 0.0)
    leave = np.minimum(high.min(axis=2), 1.0)
    return (enter <= leave).any(axis=1)


def _place_names_once(
    fig: Any, ax: Any, names: list[Any], obstacles: list[Any]
) -> tuple[list[Any], bool]:
    """One placement of :func:`_place_names` on the current layout; return the names that
    reach past the axes, and whether a name that fits in the axes found no free place."""
    import numpy as np
    from matplotlib.transforms import Bbox

    axes_box = ax.get_window_extent()
    scale = fig.dpi / 72  # display units per point
    pad = OBSTACLE_PAD * scale
    blocked = [
        Bbox(ax.transData.transform(box.get_points())).padded(pad).extents for box in obstacles
    ]
    placed: list[Any] = []
    spilled: list[Any] = []
    crowded = False
    near = list(NAME_SIDES)
    sides = {offset for offset, _, _ in near}
    far = [
        (offset, *_alignment(offset))
        for offset in _offsets(axes_box.width / scale, axes_box.height / scale)
        if offset not in sides
    ]
    candidates = near + far
    shifts = np.array([offset for offset, _, _ in candidates]) * scale
    for name in sorted(names, key=lambda name: -float(name.xy[1])):
        # The text's box at the point for each alignment; a candidate's box is it shifted.
        name.xyann = (0.0, 0.0)
        at_point: dict[tuple[str, str], Any] = {}
        for ha, va in {(ha, va) for _, ha, va in candidates}:
            name.set_horizontalalignment(ha)
            name.set_verticalalignment(va)
            at_point[(ha, va)] = text_extent(name).extents
        boxes = np.array([at_point[(ha, va)] for _, ha, va in candidates], dtype=float)
        boxes += np.hstack([shifts, shifts])
        costs = _costs(boxes, axes_box, np.array([*placed, *blocked]).reshape(-1, 4))
        free = np.flatnonzero(costs == 0)
        best = int(free[0]) if free.size else int(np.argmin(costs))
        if best >= len(near):
            # Of the free places further off, the nearest whose line to the point crosses no
            # other point, interval or name: one that does reads as that one's name.
            point = ax.transData.transform(name.xy)
            others = [box for box in [*placed, *blocked] if not _contains(box, point)]
            if others:
                far_free = free[free >= len(near)]
                centres = (boxes[far_free, :2] + boxes[far_free, 2:]) / 2
                clear = ~_crosses(point, centres, np.array(others))
                if clear.any():
                    best = int(far_free[np.argmax(clear)])
        width = at_point[("left", "bottom")][2] - at_point[("left", "bottom")][0]
        crowded = crowded or (not free.size and width <= axes_box.width - 2 * pad)
        offset, ha, va = candidates[best]
        name.xyann = offset
        name.set_horizontalalignment(ha)
        name.set_verticalalignment(va)
        if name.arrow_patch is not None:
            name.arrow_patch.set_visible(best >= len(near))
        box = text_extent(name)
        if box.width * box.height > _overlap(box, axes_box):
            spilled.append(name)
        placed.append(box.extents)
    return spilled, crowded


def write_figures(report: SelectionReport, out_dir: Path) -> list[str]:
    """Draw the three figures into ``out_dir`` (each PNG at 300 dpi, SVG and PDF); return the
    PNG names (:data:`FIGURES`; captions in :data:`FIGURE_CAPTIONS`)."""
    import matplotlib.pyplot as plt
    from matplotlib.ticker import NullFormatter, NullLocator
    from matplotlib.transforms import Bbox

    from evaluator.figures import add_note, paper_style, save_figure

    out_dir.mkdir(parents=True, exist_ok=True)
    items = [(k, v) for k, v in report.deployments.items() if v.f_pop is not None]
    names = [k for k, _ in items]
    ys = list(range(len(items)))[::-1]

    with paper_style():
        fig, ax = plt.subplots(figsize=(6.0, _rows_height(len(items)) + 1.5), layout="constrained")
        for y, (_, s) in zip(ys, items, strict=True):
            if s.f_pop is None:
                continue
            ax.plot(
                [s.f_pop],
                [y],
                "o",
                mfc="white",
                mec="C0",
                ms=FPOP_SIZE,
                mew=FPOP_EDGE,
                zorder=3,
                label="F_pop (all traces)",
            )
            if s.f_sel is not None:
                if s.delta_ci is not None:
                    lo, hi = (s.f_pop + s.delta_ci[0], s.f_pop + s.delta_ci[1])
                    ax.plot([lo, hi], [y, y], "-", color="C1", alpha=0.7, lw=2, zorder=2)
                ax.plot(
                    [s.f_sel],
                    [y],
                    "o",
                    color="C1",
                    ms=FSEL_SIZE,
                    zorder=4,
                    label="F_sel (correct traces)",
                )
        handles, labels = ax.get_legend_handles_labels()
        unique = dict(zip(labels, handles, strict=True))
        ax.set_yticks(ys, names)
        ax.set_ylim(-0.6, len(items) - 0.4)
        ax.grid(axis="x", color="#e3e6ec", lw=0.6)
        ax.set_axisbelow(True)
        ax.set_xlabel("faithfulness P(A = 1) (share of traces; bar: F_pop + 95% CI of Δ)")
        fig.legend(
            unique.values(), unique.keys(), loc="outside lower center", ncol=2, frameon=False
        )
        ax.set_title("All traces against correctly answered traces")
        add_note(fig, *fpop_fsel_note([s for _, s in items]))
        save_figure(fig, out_dir, Path(FIGURES[0]).stem)

        fig, ax = plt.subplots(figsize=(6.0, _rows_height(len(items)) + 1.6), layout="constrained")
        forest = [(k, v) for k, v in items if v.odds_ratio is not None and v.odds_ratio_ci]
        fy = list(range(1, len(forest) + 1))[::-1]
        low, high = 1.0, 1.0
        for y, (_, s) in zip(fy, forest, strict=True):
            assert s.odds_ratio is not None and s.odds_ratio_ci is not None
            lo, hi = s.odds_ratio_ci
            low, high = min(low, lo), max(high, hi)
            se = (math.log(hi) - math.log(lo)) / 3.92
            area = min(FOREST_AREA[1], max(FOREST_AREA[0], 4.0 / se**2))
            ax.plot([lo, hi], [y, y], "-", color="C0", lw=1.5)
            ax.scatter([s.odds_ratio], [y], marker="s", s=area, color="C0")
        p = report.pooled
        if p.cmh_or is not None and p.cmh_or_ci is not None:
            lo, hi = p.cmh_or_ci
            low, high = min(low, lo), max(high, hi)
            ax.fill([lo, p.cmh_or, hi, p.cmh_or], [0, 0.25, 0, -0.25], color="C3")
        ax.axvline(1.0, color="grey", lw=0.8, ls="--")
        ax.set_xscale("log")
        low, high = low / 1.25, high * 1.25
        ax.set_xlim(low, high)
        ax.xaxis.set_major_formatter(lambda value, _pos: _tick_label(value))
        ax.xaxis.set_minor_locator(NullLocator())
        ax.xaxis.set_minor_formatter(NullFormatter())
        ax.set_yticks([*fy, 0], [k for k, _ in forest] + ["pooled (CMH)"])
        ax.set_ylim(-0.6, len(forest) + 0.6)
        ax.set_xlabel("odds ratio of A and C (95% CI; log scale, 1 = no association)")
        ax.set_title("Deployment and pooled odds ratios")
        _set_odds_ticks(fig, ax, low, high)
        add_note(fig, *forest_note(report, [k for k, _ in forest]))
        save_figure(fig, out_dir, Path(FIGURES[1]).stem)

        gapped = _gapped(report)
        if gap_as_rows(report):  # too many names for a scatter: rows, each named once
            fig = _gap_rows(gapped)
            add_note(fig, *gap_note([s for _, s in gapped]))
            save_figure(fig, out_dir, Path(FIGURES[2]).stem)
            return list(FIGURES)
        fig, ax = plt.subplots(figsize=(5.5, 3.8), layout="constrained")
        labels_drawn: list[Any] = []
        obstacles: list[Any] = []  # data boxes a name must not cover: points and intervals
        for k, s in items:
            if s.delta is None or s.accuracy is None:
                continue
            acc, gap = s.accuracy * 100, s.delta * 100
            if s.delta_ci is not None:
                lo, hi = s.delta_ci[0] * 100, s.delta_ci[1] * 100
                ax.errorbar([acc], [gap], capsize=3, fmt="o", yerr=[[gap - lo], [hi - gap]])
                obstacles.append(Bbox.from_extents(acc, lo, acc, hi))
            else:
                ax.plot([acc], [gap], "D", color="grey")
            obstacles.append(Bbox.from_extents(acc, gap, acc, gap))
            star = "*" if s.p is not None and s.p < 0.05 else ""
            name = ax.annotate(
                k + star,
                (acc, gap),
                fontsize=8,
                textcoords="offset points",
                xytext=(LABEL_OFFSET, LABEL_OFFSET),
                arrowprops=LEADER,
            )
            labels_drawn.append(name)
        ax.axhline(0.0, color="grey", lw=0.8, ls="--")
        # No name across the zero line either (a box of no height over the x range).
        left, right = ax.get_xlim()
        obstacles.append(Bbox.from_extents(left, 0.0, right, 0.0))
        ax.set_xlabel("accuracy P(C = 1) (%)")
        ax.set_ylabel("selection gap Δ = F_sel − F_pop (pp)")
        ax.set_title("Selection gap against accuracy")
        if labels_drawn:
            _place_names(fig, ax, labels_drawn, obstacles)
        add_note(fig, *gap_note([s for _, s in gapped]))
        save_figure(fig, out_dir, Path(FIGURES[2]).stem)
    return list(FIGURES)


def _gapped(report: SelectionReport) -> list[tuple[str, DeploymentStats]]:
    """The deployments the gap figure draws: those with a gap and an accuracy."""
    return [
        (k, s)
        for k, s in report.deployments.items()
        if s.delta is not None and s.accuracy is not None and s.f_pop is not None
    ]


def gap_as_rows(report: SelectionReport) -> bool:
    """Whether the gap figure is drawn as rows (:func:`_gap_rows`), not as a scatter: with
    more than :data:`GAP_SCATTER_MAX` deployments."""
    return len(_gapped(report)) > GAP_SCATTER_MAX


def _gap_rows(items: list[tuple[str, DeploymentStats]]) -> Any:
    """The gap figure as rows, one a deployment in order of accuracy, highest first: its
    accuracy (left panel) and its gap with its interval (right), named once, by the row.

    A scatter of many deployments has no free place beside most points for their names, and
    the lines back from names put further off cross other points and intervals; rows name
    every deployment where a reader looks for it, and the order by accuracy still shows
    whether the gap grows as accuracy falls."""
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    rows = sorted(
        ((k, s) for k, s in items if s.delta is not None and s.accuracy is not None),
        key=lambda item: -float(item[1].accuracy or 0.0),
    )
    ys = list(range(len(rows)))[::-1]
    fig, (acc_ax, gap_ax) = plt.subplots(
        1,
        2,
        sharey=True,
        width_ratios=(1, 2.6),
        figsize=(5.5, GAP_ROW_HEIGHT * len(rows) + 1.7),
        layout="constrained",
    )
    for y, (_, s) in zip(ys, rows, strict=True):
        assert s.delta is not None and s.accuracy is not None
        acc_ax.plot([s.accuracy * 100], [y], "o", color="C0", ms=4.5)
        gap = s.delta * 100
        if s.delta_ci is not None:
            lo, hi = s.delta_ci[0] * 100, s.delta_ci[1] * 100
            gap_ax.errorbar(
                [gap],
                [y],
                xerr=[[gap - lo], [hi - gap]],
                fmt="o",
                color="C0",
                ms=4.5,
                capsize=2.5,
                lw=1.2,
            )
        else:
            gap_ax.plot([gap], [y], "D", color="grey", ms=4.5)
    gap_ax.axvline(0.0, color="grey", lw=0.8, ls="--")
    names = [k + ("*" if s.p is not None and s.p < 0.05 else "") for k, s in rows]
    acc_ax.set_yticks(ys, names)
    acc_ax.set_ylim(-0.6, len(rows) - 0.4)
    for ax in (acc_ax, gap_ax):
        ax.grid(axis="y", color="#e3e6ec", lw=0.6)  # a row's guide from its name across
        ax.grid(axis="x", color="#f0f2f5", lw=0.5)
        ax.set_axisbelow(True)
    # Ticks enough to read an accuracy by, few enough for the narrow panel.
    acc_ax.xaxis.set_major_locator(MaxNLocator(nbins=3, steps=[1, 2, 2.5, 5, 10]))
    # On two lines: the accuracy panel is too narrow for its label on one, which would run
    # into the gap panel's.
    acc_ax.set_xlabel("accuracy\nP(C = 1) (%)")
    gap_ax.set_xlabel("selection gap\nΔ = F_sel − F_pop (pp)")
    gap_ax.tick_params(axis="y", length=0)
    fig.suptitle("Selection gap against accuracy (highest accuracy first)")
    return fig
