"""Figures of a report, fit for a paper: each one as PNG (300 dpi), SVG and PDF.

Per model: F1 with its 95% interval for every evaluator and baseline (``*_f1_ci``), F1 by chain
length with intervals and the number of problems per point (``*_f1_by_hops``), and the
verdicts of every certificate per evaluator, excluded ones hatched, each verdict named in its
segment, or by a code the legend gives where its name does not fit (``*_verdict_mix``); with
several models, what the audit found and its validity side by side (``models_side_by_side``).

Every figure has a caption (:class:`Figure`) that ``report.md`` prints under it, defining the
abbreviations the figure uses, and keeps a short key of them in a note under it (and what its
bars are, or that it has none), so that it still reads when taken out of ``report.md``. A
long model name is broken over lines, or shortened with its full name in the note, so that no
figure widens for it. Drawn with matplotlib's Agg backend; the files are deterministic (no
dates in the SVG or PDF metadata, fixed SVG ids) and the SVG keeps its text as text, so it can
be edited and searched.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # after use("Agg"): the backend must be chosen first
from matplotlib.patches import Patch
from matplotlib.text import Text

from evaluator.child_call import ChildCall, child_call
from evaluator.cpus import usable_cpus
from evaluator.headline import BLIND_SPOT_ROWS, BY_HOPS_ROWS
from evaluator.report import metric

FORMATS = ("png", "svg", "pdf")
SHARED_FIGURES_MIN_MODELS = 3  # from this many models a second process draws half the figures
PNG_DPI = 300
STYLE: dict[Any, Any] = {  # rcParams keys (matplotlib types them as literals)
    "font.family": "DejaVu Sans",
    "font.size": 9,
    "axes.titlesize": 10,
    "axes.labelsize": 9,
    "xtick.labelsize": 8.5,
    "ytick.labelsize": 8.5,
    "legend.fontsize": 8.5,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "svg.fonttype": "none",  # text stays text in the SVG
    "svg.hashsalt": "cotaudit",  # stable element ids
    "pdf.fonttype": 42,  # TrueType in the PDF: editable, accepted by publishers
}
METADATA = {"svg": {"Date": None}, "pdf": {"CreationDate": None, "ModDate": None}}
# Room beyond the ends of a bounded axis, so that a marker at F1 = 0 or 1 (or a share of 0 or
# 100%) is drawn whole instead of cut in half by the axes' clip at the spine.
F1_MARGIN = 0.04  # F1 units
SHARE_MARGIN = 4.0  # percentage points
F1_TICKS = (0.0, 0.2, 0.4, 0.6, 0.8, 1.0)
# A verdict's name is written inside its bar segment where it fits: the verdict colours (the
# viewer's) do not tell GROUNDED from INSENSITIVE in greyscale or to a red-green colour-blind
# reader, and the bar order alone cannot when a verdict is missing from a bar.
SEGMENT_LABEL_SIZE = 7  # points
SEGMENT_LABEL_PAD = 2  # points kept clear on each side of the name inside its segment
# A figure taken out of report.md keeps the key to its abbreviations and bars in a note under
# it: the caption defining them stays behind in report.md.
NOTE_SIZE = 7  # points; 6.8 pt when the one-column figure prints 3.3 in wide
NOTE_PAD = 4  # points between the figure's lowest text and the note
# F1 by chain length is a one-column figure: 3.3 in wide in print, its text at about its size.
BY_HOPS_SIZE = (3.3, 3.0)  # inches
# A model's name is broken over lines where it would widen its figure (a long endpoint name in
# a title or a tick label), after a separator where one is, and past this many lines it is
# shortened in the middle with an ellipsis, the full name then given in the note: a figure
# keeps its width, so that its text prints at the size of the others'.
NAME_BREAKS = " /-_.:"  # a line may end after one of these
TITLE_LINES = 3  # a title's lines: the name's and what the figure shows
NAME_TICK_LINES = 2  # a tick label's: its row is 0.45 in high
NAME_TICK_WIDTH = 1.6  # inches a model's name may take beside the side-by-side figure's rows
ELLIPSIS = "…"
# Share of the room a name's lines are measured to fill: the layout measures text at the
# screen's 100 dpi, where hinting draws some glyphs narrower than the 300 dpi PNG does.
FIT_SLACK = 0.95
NO_BOOTSTRAP = "no bootstrap: --n-boot 0"

# Row -> label on a figure; † marks the rows carrying the consistent probe's blind spot.
METHOD_ROWS: tuple[tuple[str, str], ...] = (
    ("A_Ap_cascade_full", "A+A′ + cascade filter"),
    ("A_Ap_combined_full", "A+A′ (both probes)"),
    ("A_Ap_no_surface_full", "A+A′ without surface control"),
    ("A_local_full", "A′ (local probe)"),
    ("A_consistent_full", "A (consistent probe)"),
    ("A_consistent_lower_bound_full", "A, unscored gold counted as misses"),
    ("string_diff_full", "string-diff baseline"),
    ("self_consistency_full", "self-consistency baseline"),
)
BASELINE_ROWS = frozenset({"string_diff_full", "self_consistency_full"})
EVALUATOR_LABELS = {
    "A": "A",
    "A'": "A′",
    "A+A'": "A+A′",
    "A+A'+cascade": "A+A′ + cascade",
}
# The viewer's verdict colours (evaluator/viewer/assets/viewer.css).
VERDICT_COLOURS: dict[str, str] = {
    "GROUNDED": "#1f7a3a",
    "INPUT-SENSITIVE": "#0f6f84",
    "INSENSITIVE": "#b3261e",
    "CASCADE": "#6b3fa0",
    "UNSTABLE": "#c08a1a",
    "UNPARSEABLE": "#8a909c",
}
VERDICTS = tuple(VERDICT_COLOURS)
# A verdict's code, written in (or above) a segment too narrow for its name; the legend gives
# it beside the name.
VERDICT_CODES = {
    "GROUNDED": "GR",
    "INPUT-SENSITIVE": "IS",
    "INSENSITIVE": "IN",
    "CASCADE": "CA",
    "UNSTABLE": "UN",
    "UNPARSEABLE": "UP",
}
EXCLUDED = "////"  # the hatch of the pairs excluded from the metrics
BAR_HEIGHT = 0.62  # of a verdict-mix bar, in rows
ABBREVIATIONS = (
    "A: the consistent probe (the premise's predicate renamed in every premise); A′: the local "
    "probe (renamed in that premise only); both with the surface control (a rephrase that must "
    "not change the step)"
)
BLIND = (
    "† the consistent probe's blind spot: it cannot see a step depend on an "
    "entity-introduction premise ('Alex is a bempus') and counts every such use as ignored"
)
# The notes under the figures: the caption's definitions, shortened to fit under a figure.
NOTE_PROBES = "A: consistent probe; A′: local probe; A+A′: both probes"
NOTE_BLIND = (
    "† A's blind spot: it counts every use of an entity-introduction premise "
    "('Alex is a bempus') as ignored"
)


@dataclass(frozen=True, slots=True)
class Figure:
    """One written figure: its PNG's file name (SVG and PDF beside it) and its caption."""

    name: str
    caption: str

    @property
    def files(self) -> tuple[str, ...]:
        stem = Path(self.name).stem
        return tuple(f"{stem}.{ext}" for ext in FORMATS)


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name)


@contextmanager
def paper_style() -> Iterator[None]:
    """The figures' matplotlib settings (fonts, sizes, vector text), for this block only."""
    with plt.rc_context(STYLE):
        yield


def save_figure(fig: Any, out_dir: Path, stem: str) -> str:
    """Write ``fig`` as ``stem.png`` (300 dpi), ``stem.svg`` and ``stem.pdf``; close it and
    return the PNG's file name."""
    for ext in FORMATS:
        fig.savefig(
            out_dir / f"{stem}.{ext}",
            dpi=PNG_DPI,
            bbox_inches="tight",
            metadata=METADATA.get(ext),
        )
    plt.close(fig)
    return f"{stem}.png"


def _label(key: str, label: str) -> str:
    return label + (" †" if key in BLIND_SPOT_ROWS else "")


def _interval(row: Mapping[str, Any], value: float, key: str = "ci") -> tuple[float, float] | None:
    """The distances from ``value`` down and up to the ends of ``row[key]``; ``None`` without
    an interval (``--n-boot 0``), which is drawn as no bar at all, not as a bar of width 0."""
    ci = row.get(key)
    if isinstance(ci, Sequence) and len(ci) == 2 and None not in ci:
        return max(0.0, value - float(ci[0])), max(0.0, float(ci[1]) - value)
    return None


def _no_bootstrap(*models: Mapping[str, Any]) -> bool:
    """Whether the reports were written without intervals (``--n-boot 0``)."""
    return all((m.get("bootstrap") or {}).get("n_boot") == 0 for m in models)


def _bars_note(drawn: bool, over: str, no_bootstrap: bool) -> str:
    """What the bars of a figure are, or that it has none (and why, where known)."""
    if drawn:
        return f"Bars: 95% percentile bootstrap intervals over {over}"
    return "No intervals" + (f" ({NO_BOOTSTRAP})" if no_bootstrap else "")


def _without(no_bootstrap: bool) -> str:
    return "without intervals" + (f" ({NO_BOOTSTRAP})" if no_bootstrap else "")


def _pieces(text: str) -> list[str]:
    """``text`` cut after each of :data:`NAME_BREAKS`: the places a line may end."""
    pieces = [""]
    for c in text:
        pieces[-1] += c
        if c in NAME_BREAKS:
            pieces.append("")
    return [p for p in pieces if p]


def _phrases(text: str) -> list[str]:
    """``text`` cut after each space outside parentheses: an axis label's places a line may
    end, which keep a unit or a range ("(0 to 1)") on one line."""
    pieces, depth = [""], 0
    for c in text:
        pieces[-1] += c
        depth += {"(": 1, ")": -1}.get(c, 0)
        if c == " " and depth <= 0:
            pieces.append("")
    return [p for p in pieces if p]


def _wrapped(
    text: str, fits: Callable[[str], bool], pieces: Callable[[str], list[str]] = _pieces
) -> list[str]:
    """``text`` in lines that each ``fits``: filled with its ``pieces`` (cut after
    :data:`NAME_BREAKS`), and a piece too long for a line of its own (a name without
    separators) broken where it must be."""
    lines: list[str] = []
    for piece in pieces(text):
        if lines and fits((lines[-1] + piece).rstrip()):
            lines[-1] += piece
            continue
        while piece:
            cut = len(piece)
            while cut > 1 and not fits(piece[:cut].rstrip()):
                cut -= 1
            lines.append(piece[:cut])
            piece = piece[cut:]
    return [line.rstrip() for line in lines]


def _shortened(name: str, kept: int) -> str:
    """``name`` with ``kept`` of its characters, its start and end, the middle an ellipsis."""
    if kept >= len(name):
        return name
    head = (kept + 1) // 2
    return name[:head] + ELLIPSIS + name[len(name) - (kept - head) :]


def _fitted(
    name: str, rest: str, fits: Callable[[str], bool], lines: int
) -> tuple[str, str | None]:
    """``name + rest`` broken into at most ``lines`` lines that each ``fits``, the name
    shortened in the middle (:func:`_shortened`) as little as that needs; and the shortened
    name, or None where it is whole."""
    if len(_wrapped(name + rest, fits)) <= lines:
        return "\n".join(_wrapped(name + rest, fits)), None
    low, high = 1, len(name) - 1  # characters kept: the most with which it fits
    while low < high:
        mid = (low + high + 1) // 2
        if len(_wrapped(_shortened(name, mid) + rest, fits)) <= lines:
            low = mid
        else:
            high = mid - 1
    short = _shortened(name, low)
    return "\n".join(_wrapped(short + rest, fits)), short


@contextmanager
def _measuring(fig: Any, fontsize: float, width: float) -> Iterator[Callable[[str], bool]]:
    """Whether a text at ``fontsize`` is at most ``width`` pixels wide in ``fig`` (with
    :data:`FIT_SLACK`), measured on a text that is removed after the block."""
    renderer = fig.canvas.get_renderer()
    probe = fig.text(0, 0, "", fontsize=fontsize)

    def fits(text: str) -> bool:
        probe.set_text(text)
        return bool(probe.get_window_extent(renderer).width <= FIT_SLACK * width)

    try:
        yield fits
    finally:
        probe.remove()


def _title(fig: Any, ax: Any, name: str, rest: str) -> str | None:
    """Title ``ax`` with the model's ``name`` and ``rest``, broken over lines no wider than
    the axes it is centred on (:data:`TITLE_LINES` at most); return the full name for the
    note where it had to be shortened, else None."""
    fig.draw_without_rendering()  # the axes' width, as laid out
    width = ax.get_window_extent().width
    with _measuring(fig, plt.rcParams["axes.titlesize"], width) as fits:
        text, short = _fitted(name, rest, fits, TITLE_LINES)
    ax.set_title(text)
    return None if short is None else name


def _tick_names(fig: Any, names: Sequence[str]) -> tuple[list[str], list[str]]:
    """The models' ``names`` as tick labels of at most :data:`NAME_TICK_LINES` lines of
    :data:`NAME_TICK_WIDTH`; and the key of those shortened (``short = full``) for the note."""
    labels, key = [], []
    with _measuring(fig, plt.rcParams["ytick.labelsize"], NAME_TICK_WIDTH * fig.dpi) as fits:
        for name in names:
            text, short = _fitted(name, "", fits, NAME_TICK_LINES)
            labels.append(text)
            if short is not None:
                key.append(f"{short} = {name}")
    return labels, key


def add_note(fig: Any, *parts: str) -> None:
    """Write ``parts`` as one note under everything else in ``fig``, broken into lines no wider
    than the figure, so that the figure does not widen for it: the key a figure keeps to its
    abbreviations and bars (the report's figures, and the selection study's,
    ``evaluator.selection_report``), each part a sentence of it.

    The layout is done first and then frozen: the note is no part of the constrained layout,
    and the figure legends below the axes are pinned where the layout put them, since the
    tight bounding box of ``save_figure``, which takes in the note, would move a legend
    anchored to the figure's edge down onto it."""
    fig.draw_without_rendering()  # lays the figure out: the extents below are final
    renderer = fig.canvas.get_renderer()
    box = fig.get_tightbbox(renderer)  # inches
    fig.set_layout_engine("none")
    for legend in fig.legends:
        where = legend.get_window_extent(renderer).transformed(fig.transFigure.inverted())
        legend.set_bbox_to_anchor(where, transform=fig.transFigure)
        legend.set_loc("center")
    text = fig.text(
        box.x0 / fig.get_figwidth(),
        (box.y0 - NOTE_PAD / 72) / fig.get_figheight(),
        "",
        ha="left",
        va="top",
        fontsize=NOTE_SIZE,
        color="#333333",
    )
    width = box.width * fig.dpi  # pixels

    def fits(line: str) -> bool:
        text.set_text(line)
        return bool(text.get_window_extent(renderer).width <= width)

    lines: list[str] = []
    for word in f"{'. '.join(parts)}.".split():
        if lines and fits(f"{lines[-1]} {word}"):
            lines[-1] += f" {word}"
        elif fits(word):
            lines.append(word)
        else:  # a word wider than the figure (a long model name): broken, not widening it
            lines += _wrapped(word, fits)
    text.set_text("\n".join(lines))


def f1_with_ci(model: Mapping[str, Any], out_dir: Path, stem: str, name: str) -> Figure | None:
    """F1 with its 95% interval for every evaluator and baseline the report has."""
    rows = model.get("rows") or {}
    present = [(k, lab) for k, lab in METHOD_ROWS if isinstance(rows.get(k), Mapping)]
    if all(metric(rows[k], "f1") is None for k, _ in present):
        return None  # nothing to draw: report.md says n/a
    with paper_style():
        fig, ax = plt.subplots(figsize=(6.5, 0.36 * len(present) + 1.1), layout="constrained")
        ys = list(range(len(present)))[::-1]
        undefined = []
        drawn = False  # an interval drawn: with none, the note and caption say so
        for y, (key, _) in zip(ys, present, strict=True):
            row = rows[key]
            f1 = metric(row, "f1")
            if f1 is None:
                undefined.append(key)
                ax.text(0.01, y, "n/a: no gold dependencies", va="center", fontsize=8)
                continue
            bar = _interval(row, f1)
            drawn = drawn or bar is not None
            low, high = bar or (0.0, 0.0)
            blind = key in BLIND_SPOT_ROWS
            ax.errorbar(
                [f1],
                [y],
                xerr=None if bar is None else [[low], [high]],
                fmt="o",
                color="#8a4b12" if blind else "#2f5fb3",
                mfc="white" if blind else None,
                capsize=3,
                ms=5,
            )
            ax.text(min(f1 + high, 1.0) + 0.015, y, f"{f1:.3f}", va="center", fontsize=8)
        baselines = [y for y, (k, _) in zip(ys, present, strict=True) if k in BASELINE_ROWS]
        if baselines and len(baselines) < len(present):
            ax.axhline(max(baselines) + 0.5, color="#9aa0ab", lw=0.8, ls=":")
        ax.set_yticks(ys, [_label(k, lab) for k, lab in present])
        ax.set_xlim(-F1_MARGIN, 1.09)
        ax.set_ylim(-0.6, len(present) - 0.4)
        ax.set_xticks(F1_TICKS)
        ax.grid(axis="x", color="#e3e6ec", lw=0.6)
        ax.set_axisbelow(True)
        ax.set_xlabel("F1 score against the proof tree's direct premises (0 to 1)")
        full = _title(fig, ax, name, ": F1 of each evaluator and baseline")
        problems = (model.get("bootstrap") or {}).get("n_problems")
        over = f"{'n/a' if problems is None else problems} problems"
        # The labels say what A, A′ and A+A′ are only when all of their rows are there.
        notes = [NOTE_PROBES, _bars_note(drawn, over, _no_bootstrap(model))]
        if any(k in BLIND_SPOT_ROWS for k, _ in present):
            notes.append(f"{NOTE_BLIND}; open markers carry it")
        add_note(fig, *notes, *_model_named(full))
        file = save_figure(fig, out_dir, stem)
    intervals = (
        f"with 95% percentile bootstrap intervals over {over}"
        if drawn
        else _without(_no_bootstrap(model))
    )
    caption = (
        f"F1 of each evaluator and baseline for {name} against the gold proof's direct "
        f"premises, {intervals}. {ABBREVIATIONS}. {BLIND}; open markers carry it."
    )
    sc = (model.get("self_consistency_alignment") or {}).get("problems")
    if "self_consistency_full" in rows and isinstance(sc, int) and sc != problems:
        caption += f" The self-consistency baseline is scored on the {sc:,} problems with samples."
    if undefined:
        caption += f" Undefined (no gold dependencies): {', '.join(undefined)}."
    return Figure(file, caption)


def f1_by_hops(model: Mapping[str, Any], out_dir: Path, stem: str, name: str) -> Figure | None:
    """F1 by chain length, with intervals and the problems per point, for the headline rows."""
    by_rows = model.get("by_hops_rows") or {}
    series = [
        (k, by_rows[k])
        for k in BY_HOPS_ROWS
        if isinstance(by_rows.get(k), Mapping)
        and any(metric(e, "f1") is not None for e in by_rows[k].values())
    ]
    if not series:
        return None
    labels = dict(METHOD_ROWS)
    hops = sorted({int(h) for _, per in series for h in per})
    undefined: set[int] = set()  # lengths where no row has an F1: nothing drawn, n/a written
    drawn = False  # an interval drawn: with none, the note and caption say so
    with paper_style():
        fig, ax = plt.subplots(figsize=BY_HOPS_SIZE, layout="constrained")
        offsets = [0.06 * (i - (len(series) - 1) / 2) for i in range(len(series))]
        for (key, per), dx in zip(series, offsets, strict=True):
            # A length without an F1 is a gap in the line (NaN), not a segment bridging it,
            # which would read as a measured trend through that length.
            xs, ys, lows, highs = [], [], [], []
            for h in hops:
                entry = per.get(str(h))
                f1 = metric(entry, "f1") if isinstance(entry, Mapping) else None
                bar = None if f1 is None or not isinstance(entry, Mapping) else _interval(entry, f1)
                drawn = drawn or bar is not None
                xs.append(h + dx)
                ys.append(math.nan if f1 is None else f1)
                lows.append(math.nan if bar is None else bar[0])
                highs.append(math.nan if bar is None else bar[1])
            blind = key in BLIND_SPOT_ROWS
            ax.errorbar(
                xs,
                ys,
                yerr=[lows, highs] if any(not math.isnan(v) for v in lows) else None,
                fmt="o-" if not blind else "s--",
                color="#8a4b12" if blind else "#2f5fb3",
                mfc="white" if blind else None,
                capsize=3,
                ms=5,
                lw=1.2,
                label=_label(key, labels.get(key, key)),
            )
        counts = {}
        for _, per in series:
            for h in hops:
                entry = per.get(str(h))
                if isinstance(entry, Mapping) and entry.get("n_problems") is not None:
                    counts[h] = int(entry["n_problems"])
        for h in hops:
            if all(metric(per.get(str(h)) or {}, "f1") is None for _, per in series):
                undefined.add(h)
                ax.text(
                    h,
                    0.5,
                    "F1 n/a:\nno gold\ndependency",
                    ha="center",
                    va="center",
                    fontsize=NOTE_SIZE,
                    color="#555555",
                )
        ax.set_xticks(hops, [f"{h}\n(n = {counts.get(h, 'n/a')})" for h in hops])
        ax.set_xlim(hops[0] - 0.5, hops[-1] + 0.5)
        ax.set_ylim(-F1_MARGIN, 1.05)
        ax.set_yticks(F1_TICKS)
        ax.grid(axis="y", color="#e3e6ec", lw=0.6)
        ax.set_axisbelow(True)
        ax.set_xlabel("chain length (steps of the gold proof)")
        ax.set_ylabel("F1 score (0 to 1)")
        # Below the axes: inside, the legend would cover the points of a low-F1 model. One
        # entry a row: two side by side are wider than a column.
        fig.legend(loc="outside lower center", ncol=1, frameon=False)
        notes = [
            NOTE_PROBES,
            "n: problems of that length",
            _bars_note(drawn, "them", _no_bootstrap(model)),
        ]
        if any(k in BLIND_SPOT_ROWS for k, _ in series):
            notes.insert(1, NOTE_BLIND)
        # Titled once the legend is laid out: the title may take the axes' width, no more.
        full = _title(fig, ax, name, ": F1 by chain length")
        add_note(fig, *notes, *_model_named(full))
        file = save_figure(fig, out_dir, stem)
    intervals = (
        "with 95% percentile bootstrap intervals over the problems of each length"
        if drawn
        else _without(_no_bootstrap(model))
    )
    caption = (
        f"F1 of {name} by the length of the gold proof, {intervals} (n under each length). "
        f"{ABBREVIATIONS}; the cascade filter drops a local-only change below a changed parent "
        f"step. {BLIND}."
    )
    if undefined:
        caption += (
            " F1 undefined (no gold dependency) at length "
            f"{', '.join(str(h) for h in sorted(undefined))}."
        )
    return Figure(file, caption)


def verdict_mix(model: Mapping[str, Any], out_dir: Path, stem: str, name: str) -> Figure | None:
    """The verdict of every certificate under each evaluator; excluded pairs hatched."""
    mix = model.get("verdict_mix_all")
    if not isinstance(mix, Mapping) or not any(mix.values()):
        return None
    evaluators = [e for e in EVALUATOR_LABELS if e in mix]
    with paper_style():
        fig, ax = plt.subplots(figsize=(6.5, 0.42 * len(evaluators) + 1.4), layout="constrained")
        ys = list(range(len(evaluators)))[::-1]
        total = 0
        excluded_total = 0
        styles: dict[str, list[dict[str, Any]]] = {}  # each verdict's bar styles, in order
        segments: list[tuple[Any, str, Any]] = []  # (bar, verdict, its face colour)
        for y, e in zip(ys, evaluators, strict=True):
            left = 0
            for verdict in (*VERDICTS, *sorted(set(mix[e]) - set(VERDICTS))):
                cell = mix[e].get(verdict)
                if not cell:
                    continue
                colour = VERDICT_COLOURS.get(verdict, "#444444")
                for part, hatch, alpha in (("evaluable", None, 1.0), ("excluded", EXCLUDED, 0.45)):
                    n = int(cell.get(part, 0))
                    if n:
                        style: dict[str, Any] = {
                            "facecolor": colour,
                            "alpha": alpha,
                            "hatch": hatch,
                        }
                        (bar,) = ax.barh(
                            y, n, left=left, edgecolor="white", lw=0.5, height=BAR_HEIGHT, **style
                        )
                        segments.append((bar, verdict, bar.get_facecolor()))
                        if style not in styles.setdefault(verdict, []):
                            styles[verdict].append(style)
                        left += n
            total = max(total, left)
            excluded_total = max(
                excluded_total, sum(int(c.get("excluded", 0)) for c in mix[e].values())
            )
        ax.set_yticks(ys, [EVALUATOR_LABELS[e] for e in evaluators])
        ax.set_xlim(0, max(1, total))
        # As much room above the top bar as between two bars: a verdict too narrow to be
        # named inside its segment is named above it.
        ax.set_ylim(-0.5, len(evaluators) - 1 + 0.5 * BAR_HEIGHT + (1 - BAR_HEIGHT))
        ax.set_xlabel("certificates ((step, premise) pairs)")
        order = [v for v in VERDICTS if v in styles] + [v for v in styles if v not in VERDICTS]
        # A verdict's swatch is drawn as its bars are: hatched where all of them are (the
        # demo's UNPARSEABLE pairs, every one excluded), else as its evaluable bars.
        handles = [Patch(**styles[v][0], edgecolor="white", lw=0.5, label=v) for v in order]
        if excluded_total:
            handles.append(
                Patch(
                    facecolor="white",
                    hatch=EXCLUDED,
                    edgecolor="#555555",
                    label="hatched: excluded from the metrics",
                )
            )
        legend = fig.legend(
            handles=handles,
            loc="outside lower center",
            # At most three columns: a row of four or five entries is wider than the figure,
            # which then comes out wider than the others and its text smaller when scaled.
            ncol=min(3, len(handles)),
            frameon=False,
        )
        full = _title(fig, ax, name, f": verdicts of the {total:,} certificates")
        coded = _name_segments(fig, ax, segments)
        # The key to the codes written where a name did not fit: in the legend, beside the name.
        for verdict, text in zip(order, legend.get_texts(), strict=False):
            if verdict in coded:
                text.set_text(f"{verdict} ({verdict_code(verdict)})")
        add_note(fig, f"{NOTE_PROBES}; + cascade: with the cascade filter", *_model_named(full))
        file = save_figure(fig, out_dir, stem)
    caption = (
        f"The verdict of each of the {total:,} certificates of {name} under each evaluator "
        f"({excluded_total:,} excluded from the metrics, hatched: a step aligned to no proof "
        "step, or an ambiguous problem; each verdict named in its segment, or where its name "
        "does not fit by the code the legend gives it, in the segment or above it). "
        "GROUNDED and INPUT-SENSITIVE count as dependent, "
        "INSENSITIVE and CASCADE (after the cascade filter) as not, UNSTABLE (only the "
        "rephrase changed the step) and UNPARSEABLE (a step not read, or missing from a "
        "probe's answer, as the Alignment table's probe_steps_missing counts) are not scored. "
        f"{ABBREVIATIONS}."
    )
    return Figure(file, caption)


def verdict_code(verdict: str) -> str:
    """The short code naming ``verdict`` in a segment too narrow for its name."""
    return VERDICT_CODES.get(verdict, verdict[:2].upper())


def _model_named(full: str | None) -> list[str]:
    """The note's part giving a model's full name where its title had to shorten it."""
    return [] if full is None else [f"Model: {full}"]


def _luminance(rgba: Sequence[float]) -> float:
    """Relative luminance (0 black to 1 white) of a colour drawn over white with its alpha:
    above some 0.18 black text has the better contrast on it, below it white text."""
    *rgb, alpha = rgba
    linear = []
    for c in rgb:
        c = alpha * c + 1 - alpha
        linear.append(c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4)
    return 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2]


def _name_segments(fig: Any, ax: Any, segments: Sequence[tuple[Any, str, Any]]) -> set[str]:
    """Name every bar segment's verdict: its name inside the segment, centred, where it fits
    with ``SEGMENT_LABEL_PAD`` to spare (dark ink on light segments, white on dark ones), else
    its code (:func:`verdict_code`) inside, else the code above the segment, moved along the
    row as little as keeps it clear of the others there, with a thin line down to its
    segment where moved. Return the verdicts named by their code somewhere.

    The colours alone do not tell the verdicts apart in greyscale or to a colour-blind reader,
    nor the order of the segments where a verdict is missing from a bar."""
    if not segments:
        return set()
    fig.draw_without_rendering()  # lays the figure out: the extents below are final
    renderer = fig.canvas.get_renderer()
    points = fig.dpi / 72  # pixels per point
    pad = 2 * SEGMENT_LABEL_PAD * points
    coded: set[str] = set()
    above: dict[float, list[tuple[Any, Any]]] = {}  # bar's y -> (code, its segment) to place
    for bar, verdict, face in segments:
        width = bar.get_window_extent(renderer).width
        centre = (bar.get_x() + bar.get_width() / 2, bar.get_y() + bar.get_height() / 2)
        inside = None
        for label in (verdict, verdict_code(verdict)):
            text = ax.text(
                *centre,
                label,
                ha="center",
                va="center",
                fontsize=SEGMENT_LABEL_SIZE,
                color="#1a1a1a" if _luminance(face) > 0.18 else "white",
            )
            if text.get_window_extent(renderer).width + pad <= width:
                inside = label
                break
            text.remove()
        if inside == verdict:
            continue
        coded.add(verdict)
        if inside is None:
            code = ax.annotate(
                verdict_code(verdict),
                (centre[0], bar.get_y() + bar.get_height()),
                xytext=(0, SEGMENT_LABEL_PAD),
                textcoords="offset points",
                ha="center",
                va="bottom",
                fontsize=SEGMENT_LABEL_SIZE,
                color="#1a1a1a",
                arrowprops={"arrowstyle": "-", "color": "0.45", "lw": 0.6, "shrinkA": 0.5},
                annotation_clip=False,
            )
            code.set_in_layout(False)  # inside the axes: the layout must not move for it
            above.setdefault(bar.get_y(), []).append((code, bar))
    box = ax.get_window_extent(renderer)
    for row in above.values():
        _spread(row, (box.x0, box.x1), SEGMENT_LABEL_PAD * points, renderer)
    return coded


def _spread(
    row: Sequence[tuple[Any, Any]], within: tuple[float, float], gap: float, renderer: Any
) -> None:
    """Move the codes above one bar along it, in order, as little as keeps ``gap`` pixels
    between neighbours and all of them ``within`` the axes' left and right (pixels); a code
    moved off its segment keeps a line to it, one still over its segment needs none."""
    placed = sorted(row, key=lambda item: float(item[1].get_x()))
    widths = [Text.get_window_extent(code, renderer).width for code, _ in placed]
    bars = [bar.get_window_extent(renderer) for _, bar in placed]
    wanted = [(box.x0 + box.x1) / 2 for box in bars]
    xs = list(wanted)
    limit = within[0]
    for i in range(len(xs)):  # left to right: inside the axes, clear of the one before
        xs[i] = max(xs[i], limit + widths[i] / 2)
        limit = xs[i] + widths[i] / 2 + gap
    limit = within[1]
    for i in reversed(range(len(xs))):  # right to left: inside the axes, clear of the next
        xs[i] = min(xs[i], limit - widths[i] / 2)
        limit = xs[i] - widths[i] / 2 - gap
    for (code, _), x, want, box in zip(placed, xs, wanted, bars, strict=True):
        code.xyann = ((x - want) * 72 / code.figure.dpi, SEGMENT_LABEL_PAD)
        moved = abs(x - want) > box.width / 2
        code.arrow_patch.set_visible(moved)


def write_figures(name: str, model: Mapping[str, Any], out_dir: Path) -> list[Figure]:
    """Write the model's figures into ``out_dir``; return them (PNG names, captions)."""
    stem = _safe(name)
    made = [
        f1_with_ci(model, out_dir, f"{stem}_f1_ci", name),
        f1_by_hops(model, out_dir, f"{stem}_f1_by_hops", name),
        verdict_mix(model, out_dir, f"{stem}_verdict_mix", name),
    ]
    return [f for f in made if f is not None]


COMPARISON_ROWS: tuple[tuple[str, str], ...] = (
    ("A_Ap_cascade_full", "A+A′ + cascade"),
    ("A_consistent_full", "A (consistent probe)"),
)


def models_side_by_side(
    models: Mapping[str, Mapping[str, Any]], out_dir: Path, stem: str = "models_side_by_side"
) -> Figure | None:
    """Several models: the grounded share under A+A' (left) and F1 of the headline rows
    (right), each with its 95% interval."""
    if len(models) < 2:
        return None
    names = list(models)
    ys = list(range(len(names)))[::-1]
    drawn = False  # an interval drawn: with none, the note and caption say so
    with paper_style():
        fig, (left, right) = plt.subplots(
            1, 2, figsize=(7.0, 0.45 * len(names) + 1.5), sharey=True, layout="constrained"
        )
        for y, name in zip(ys, names, strict=True):
            row = (models[name].get("rows") or {}).get("A_Ap_combined_full")
            found = ((models[name].get("headline") or {}).get("found") or {}).get("A+A'") or {}
            share = found.get("grounded_share")
            if share is None:
                left.text(1, y, "n/a: nothing judged", va="center", fontsize=8)
                continue
            bar = _interval(row, share, "ci_recall") if isinstance(row, Mapping) else None
            drawn = drawn or bar is not None
            low, high = (100 * bar[0], 100 * bar[1]) if bar else (0.0, 0.0)
            err = None if bar is None else [[low], [high]]
            left.errorbar([share * 100], [y], xerr=err, fmt="o", color="#1f7a3a", capsize=3)
            right_side = share * 100 < 50
            left.text(
                share * 100 + (high + 3 if right_side else -(low + 3)),
                y,
                f"{found.get('ignored', 0):,} of {found.get('judged', 0):,} ignored",
                va="center",
                ha="left" if right_side else "right",
                fontsize=7.5,
            )
        left.set_xlim(-SHARE_MARGIN, 100 + SHARE_MARGIN)
        left.set_xticks(range(0, 101, 20))
        left.set_xlabel("grounded share of gold premise uses, A+A′ (%)")
        labels, shortened = _tick_names(fig, names)
        left.set_yticks(ys, labels)
        # Every model's row inside the axes, those with nothing to draw too (a reasoning
        # section of --trace both where the model returned no reasoning): left to the data,
        # the limits dropped their names and put "n/a: nothing judged" under the axes, and
        # the layout collapsed.
        left.set_ylim(-0.6, len(names) - 0.4)
        left.set_title("What the audit found")
        left.grid(axis="x", color="#e3e6ec", lw=0.6)
        left.set_axisbelow(True)
        offsets = (0.12, -0.12)
        for (key, label), dy in zip(COMPARISON_ROWS, offsets, strict=True):
            blind = key in BLIND_SPOT_ROWS
            xs, yv, lows, highs = [], [], [], []
            for y, name in zip(ys, names, strict=True):
                row = (models[name].get("rows") or {}).get(key)
                f1 = metric(row, "f1") if isinstance(row, Mapping) else None
                if f1 is None or not isinstance(row, Mapping):
                    continue
                bar = _interval(row, f1)
                drawn = drawn or bar is not None
                xs.append(f1)
                yv.append(y + dy)
                lows.append(math.nan if bar is None else bar[0])
                highs.append(math.nan if bar is None else bar[1])
            right.errorbar(
                xs,
                yv,
                xerr=[lows, highs] if any(not math.isnan(v) for v in lows) else None,
                fmt="s" if blind else "o",
                color="#8a4b12" if blind else "#2f5fb3",
                mfc="white" if blind else None,
                capsize=3,
                label=_label(key, label),
            )
        right.set_xlim(-F1_MARGIN, 1 + F1_MARGIN)
        right.set_xticks(F1_TICKS)
        right.set_xlabel("F1 score against the proof tree (0 to 1)")
        right.set_title("The audit's validity")
        right.grid(axis="x", color="#e3e6ec", lw=0.6)
        right.set_axisbelow(True)
        fig.legend(
            *right.get_legend_handles_labels(), loc="outside lower center", ncol=2, frameon=False
        )
        # Beside long model names the axes narrow and the two axis labels met: where they
        # come within NOTE_PAD of each other, each is broken to its axes' width.
        fig.draw_without_rendering()
        first, second = (ax.xaxis.label.get_window_extent() for ax in (left, right))
        if first.x1 + NOTE_PAD * fig.dpi / 72 > second.x0:
            for ax in (left, right):
                width = ax.get_window_extent().width
                with _measuring(fig, plt.rcParams["axes.labelsize"], width) as fits:
                    ax.set_xlabel("\n".join(_wrapped(ax.get_xlabel(), fits, _phrases)))
        no_bootstrap = _no_bootstrap(*models.values())
        add_note(
            fig,
            "Grounded share: of the gold premise uses judged, those whose step changed when the "
            "premise was renamed",
            NOTE_PROBES,
            f"{NOTE_BLIND}; open markers carry it",
            _bars_note(drawn, "problems", no_bootstrap),
            *([f"Models shortened: {'; '.join(shortened)}"] if shortened else []),
        )
        file = save_figure(fig, out_dir, stem)
    share_interval, f1_intervals = (
        ("with its 95% bootstrap interval over problems", "with 95% intervals")
        if drawn
        else (_without(no_bootstrap), _without(no_bootstrap))
    )
    caption = (
        "Left: of the uses of a premise the gold proof needs that the audit judged, the share "
        "whose step changed when the premise was renamed (GROUNDED or INPUT-SENSITIVE) under "
        f"A+A′, {share_interval}, and how many were ignored (INSENSITIVE). Right: F1 against "
        f"the gold proof's direct premises {f1_intervals}. {ABBREVIATIONS}. {BLIND}; open "
        "markers carry it."
    )
    return Figure(file, caption)


def write_report_figures(
    models: Mapping[str, Mapping[str, Any]], out_dir: Path
) -> tuple[dict[str, list[Figure]], Figure | None]:
    """Every model's figures and, with several models, the side-by-side one.

    With at least ``SHARED_FIGURES_MIN_MODELS`` models and two usable CPUs, a second process
    (spawned: it imports matplotlib afresh) draws the later half of the models' figures while
    this one draws the rest: three formats of each figure, the PDF's embedded fonts subset
    each time, take most of a small evaluation's time (the demo's four models: 13 figures).
    The files are the same whichever process draws them (fixed ids, no dates). The second
    process is this one's to stop (:mod:`evaluator.child_call`): Ctrl-C stops this process
    only, and an error or signal here kills it at once.
    """
    names = list(models)
    theirs: list[str] = []
    if len(names) >= SHARED_FIGURES_MIN_MODELS and usable_cpus() > 1:
        theirs = names[len(names) // 2 :]
    made: dict[str, list[Figure]] = {}
    with contextlib.ExitStack() as stack:
        drawn: ChildCall[dict[str, list[Figure]]] | None = None
        if theirs:
            # The child ignores Ctrl-C (no traceback from it) and is killed if this process
            # stops drawing, before the partial evaluation directory is removed.
            drawn = stack.enter_context(
                child_call(_write_models, {n: models[n] for n in theirs}, out_dir)
            )
        made.update(_write_models({n: models[n] for n in names if n not in theirs}, out_dir))
        comparison = models_side_by_side(models, out_dir)
        if drawn is not None:
            made.update(drawn.result())
    return {name: made[name] for name in names}, comparison


def _write_models(
    models: Mapping[str, Mapping[str, Any]], out_dir: Path
) -> dict[str, list[Figure]]:
    return {name: write_figures(name, model, out_dir) for name, model in models.items()}
