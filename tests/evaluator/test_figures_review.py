"""The figures as a paper's reader sees them: markers at the ends of an axis drawn whole,
legends clear of the data, verdicts named where their colours alone cannot tell them apart,
and a legend no wider than its figure."""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.container import ErrorbarContainer
from matplotlib.lines import Line2D
from matplotlib.text import Annotation, Text
from matplotlib.transforms import Bbox

import evaluator.figures as figures
from evaluator.figures import f1_by_hops, f1_with_ci, models_side_by_side, verdict_mix


def _draw(fig: Any) -> None:
    """Lay ``fig`` out and render it as its PNG is, on a canvas of its own: once closed by
    ``save_figure``, its canvas draws nothing, and the extents it keeps are those of the last
    file saved (the PDF's)."""
    FigureCanvasAgg(fig).draw()


def _row(f1: float, low: float, high: float) -> dict[str, Any]:
    return {"f1": f1, "ci": [low, high]}


# A model whose consistent probe finds nothing (F1 = 0, as the demo's world-knowledge
# reasoner under --ontology true) and whose headline row is perfect (F1 = 1, the faithful one).
EXTREMES: dict[str, Any] = {
    "rows": {
        "A_Ap_cascade_full": _row(1.0, 1.0, 1.0),
        "A_Ap_combined_full": _row(0.5, 0.45, 0.55),
        "A_consistent_full": _row(0.0, 0.0, 0.0),
        "string_diff_full": _row(0.0, 0.0, 0.1),
    },
    "by_hops_rows": {
        "A_Ap_cascade_full": {str(h): {**_row(1.0, 1.0, 1.0), "n_problems": 5} for h in (3, 4, 5)},
        "A_consistent_full": {str(h): {**_row(0.0, 0.0, 0.0), "n_problems": 5} for h in (3, 4, 5)},
    },
    "headline": {"found": {"A+A'": {"grounded_share": 1.0, "judged": 9, "ignored": 0}}},
}
NOTHING_GROUNDED: dict[str, Any] = {
    **EXTREMES,
    "headline": {"found": {"A+A'": {"grounded_share": 0.0, "judged": 9, "ignored": 9}}},
}


def _markers_cut_by_the_axes(fig: Any) -> list[tuple[str, float, float]]:
    """Every clipped marker (points, error-bar caps) that reaches past its axes' box."""
    _draw(fig)
    cut = []
    for ax in fig.axes:
        box = ax.get_window_extent()
        for line in ax.get_lines():
            assert isinstance(line, Line2D)
            if line.get_marker() in (None, "None", "") or not line.get_clip_on():
                continue
            # half the marker plus half its edge, in pixels: the reach from its centre
            reach = (line.get_markersize() + line.get_markeredgewidth()) / 2 * fig.dpi / 72
            for x, y in ax.transData.transform(line.get_xydata()):
                if not (
                    box.x0 <= x - reach
                    and x + reach <= box.x1
                    and box.y0 <= y - reach
                    and y + reach <= box.y1
                ):
                    cut.append((str(line.get_label()), float(x), float(y)))
    return cut


@pytest.mark.parametrize(
    "draw",
    [
        lambda out: f1_with_ci(EXTREMES, out, "m_f1_ci", "m"),
        lambda out: f1_by_hops(EXTREMES, out, "m_f1_by_hops", "m"),
        lambda out: models_side_by_side({"m1": EXTREMES, "m2": NOTHING_GROUNDED}, out),
    ],
    ids=["f1_ci", "f1_by_hops", "models_side_by_side"],
)
def test_a_marker_at_f1_0_or_1_or_a_share_of_0_or_100_is_drawn_whole(
    tmp_path: Path, drawn: list[Any], draw: Callable[[Path], Any]
) -> None:
    assert draw(tmp_path) is not None
    (fig,) = drawn
    assert _markers_cut_by_the_axes(fig) == []


def test_the_by_hops_legend_covers_no_point_of_a_low_f1_model(
    tmp_path: Path, drawn: list[Any]
) -> None:
    low = {
        "by_hops_rows": {
            key: {str(h): {**_row(f1, f1, f1), "n_problems": 5} for h in (3, 4, 5)}
            for key, f1 in (("A_Ap_cascade_full", 0.1), ("A_consistent_full", 0.0))
        }
    }
    assert f1_by_hops(low, tmp_path, "low_f1_by_hops", "low") is not None
    (fig,) = drawn
    _draw(fig)
    (ax,) = fig.axes
    legends = [*fig.legends, *([ax.get_legend()] if ax.get_legend() else [])]
    assert legends
    points = [
        Bbox.from_extents(x - 4, y - 4, x + 4, y + 4)
        for line in ax.get_lines()
        for x, y in ax.transData.transform(line.get_xydata())
    ]
    for legend in legends:
        box = legend.get_window_extent()
        assert not any(box.overlaps(p) for p in points)


def _mix(**bars: dict[str, int]) -> dict[str, Any]:
    return {
        "verdict_mix_all": {
            evaluator: {v: {"evaluable": n, "excluded": 0} for v, n in counts.items()}
            for evaluator, counts in bars.items()
        }
    }


def test_the_verdict_mix_names_a_verdict_inside_its_segment_where_the_name_fits(
    tmp_path: Path, drawn: list[Any]
) -> None:
    # A finds nothing grounded: its bar is one colour, which in greyscale or to a red-green
    # colour-blind reader could be GROUNDED as well as INSENSITIVE; the name says which.
    mix = _mix(
        A={"INSENSITIVE": 1400},
        **{"A'": {"GROUNDED": 700, "INSENSITIVE": 695, "UNSTABLE": 5}},
    )
    figure = verdict_mix(mix, tmp_path, "m_verdict_mix", "m")
    assert figure is not None and "named in its segment" in figure.caption
    (fig,) = drawn
    _draw(fig)
    (ax,) = fig.axes
    bars = {(round(p.get_y(), 2), round(p.get_x())): p.get_window_extent() for p in ax.patches}
    named = {}
    inside = [t for t in ax.texts if not isinstance(t, Annotation)]
    for text in inside:
        box = text.get_window_extent()
        centre = ((box.x0 + box.x1) / 2, (box.y0 + box.y1) / 2)
        (key,) = [k for k, bar in bars.items() if bar.contains(*centre)]
        assert bars[key].x0 <= box.x0 and box.x1 <= bars[key].x1, text.get_text()
        assert bars[key].y0 <= box.y0 and box.y1 <= bars[key].y1, text.get_text()
        named[key] = text.get_text()
    a_bar, a_prime = sorted({y for y, _ in bars}, reverse=True)  # A is drawn on top
    assert named.get((a_bar, 0)) == "INSENSITIVE"
    assert named.get((a_prime, 0)) == "GROUNDED"
    assert named.get((a_prime, 700)) == "INSENSITIVE"
    assert (a_prime, 1395) not in named  # five certificates: no room for the name inside
    # white on the dark verdicts, dark ink on light ones (here none)
    assert {t.get_color() for t in inside} == {"white"}
    # ... but its code above it, the key to it in the legend
    (above,) = [t for t in ax.texts if isinstance(t, Annotation)]
    assert above.get_text() == figures.verdict_code("UNSTABLE") == "UN"
    box, bar = Text.get_window_extent(above), bars[(a_prime, 1395)]
    assert box.y0 >= bar.y1 and box.x0 <= bar.x1 and box.x1 >= bar.x0
    (legend,) = fig.legends
    assert "UNSTABLE (UN)" in [t.get_text() for t in legend.get_texts()]
    assert "GROUNDED" in [t.get_text() for t in legend.get_texts()]  # named: no code needed


def test_the_verdict_mix_caption_counts_a_missing_probe_step_as_unparseable(
    tmp_path: Path, drawn: list[Any]
) -> None:
    # A reasoner that skips steps (noisy) leaves probe answers without the step: its pairs are
    # UNPARSEABLE though every step there was read. The caption said "a step not read" beside
    # parse rates of 1.000, and the reader could not tell where the UNPARSEABLE came from.
    mix = _mix(A={"GROUNDED": 50, "UNPARSEABLE": 30})
    figure = verdict_mix(mix, tmp_path, "m_verdict_mix", "m")
    assert figure is not None
    assert "UNPARSEABLE (a step not read, or missing from a probe's answer" in figure.caption
    assert "probe_steps_missing" in figure.caption


@pytest.mark.parametrize(
    "verdicts",
    [
        figures.VERDICTS,  # every verdict and the hatched entry: seven
        ("GROUNDED", "INSENSITIVE", "CASCADE", "UNPARSEABLE"),  # the demo's, and hatched: five
        ("INPUT-SENSITIVE", "INSENSITIVE", "UNPARSEABLE"),  # the longest names: four
        ("INPUT-SENSITIVE", "UNPARSEABLE"),  # three
    ],
)
def test_the_verdict_mix_legend_is_no_wider_than_its_figure(
    tmp_path: Path, drawn: list[Any], verdicts: tuple[str, ...]
) -> None:
    mix = {
        "verdict_mix_all": {
            e: {v: {"evaluable": 100, "excluded": 10} for v in verdicts}
            for e in ("A", "A'", "A+A'", "A+A'+cascade")
        }
    }
    assert verdict_mix(mix, tmp_path, "m_verdict_mix", "m") is not None
    (fig,) = drawn
    _draw(fig)
    (legend,) = fig.legends
    assert len(legend.get_texts()) == len(verdicts) + 1  # and the hatched one
    assert legend.get_window_extent().width <= fig.bbox.width


# The same model as a report written with --n-boot 0: every interval null.
NO_BOOTSTRAP: dict[str, Any] = {
    "rows": {k: {**row, "ci": None} for k, row in EXTREMES["rows"].items()},
    "by_hops_rows": {
        k: {h: {**e, "ci": None} for h, e in per.items()}
        for k, per in EXTREMES["by_hops_rows"].items()
    },
    "headline": EXTREMES["headline"],
    "bootstrap": {"n_boot": 0, "n_problems": 15},
}
FIGURES: list[Callable[[Path, dict[str, Any]], Any]] = [
    lambda out, m: f1_with_ci(m, out, "m_f1_ci", "m"),
    lambda out, m: f1_by_hops(m, out, "m_f1_by_hops", "m"),
    lambda out, m: verdict_mix(m, out, "m_verdict_mix", "m"),
    lambda out, m: models_side_by_side({"m1": m, "m2": m}, out),
]
FIGURE_IDS = ["f1_ci", "f1_by_hops", "verdict_mix", "models_side_by_side"]
WITH_EVERYTHING: dict[str, Any] = {
    **EXTREMES,
    **_mix(A={"INSENSITIVE": 900, "GROUNDED": 300}, **{"A'": {"GROUNDED": 700}}),
    "bootstrap": {"n_boot": 1000, "n_problems": 15},
}


def _texts(fig: Any) -> list[Any]:
    """Every piece of text the figure shows, once laid out."""
    _draw(fig)
    return [t for t in fig.findobj(Text) if t.get_visible() and t.get_text().strip()]


@pytest.mark.parametrize(
    "draw",
    [FIGURES[0], FIGURES[1], FIGURES[3]],
    ids=["f1_ci", "f1_by_hops", "models_side_by_side"],
)
def test_without_intervals_no_bar_is_drawn_and_the_figure_and_its_caption_say_so(
    tmp_path: Path, drawn: list[Any], draw: Callable[[Path, dict[str, Any]], Any]
) -> None:
    # A bar of width 0 at every point read as certainty, the legend showed error bars and the
    # caption promised "95% percentile bootstrap intervals" though --n-boot 0 computed none.
    figure = draw(tmp_path, NO_BOOTSTRAP)
    assert figure is not None
    (fig,) = drawn
    texts = " ".join(t.get_text() for t in _texts(fig))
    assert "No intervals (no bootstrap: --n-boot 0)" in " ".join(texts.split())
    for ax in fig.axes:
        for container in ax.containers:
            if isinstance(container, ErrorbarContainer):
                assert not container.has_xerr and not container.has_yerr, container.get_label()
    assert "without intervals (no bootstrap: --n-boot 0)" in figure.caption
    assert "95%" not in figure.caption


def test_a_chain_length_without_an_f1_is_a_gap_marked_n_a_not_a_line_across_it(
    tmp_path: Path, drawn: list[Any]
) -> None:
    # No gold dependency at length 4 (every pair of those problems excluded, say): the line
    # from 3 to 5 read as a trend measured through 4.
    undefined = {**_row(0.0, 0.0, 0.0), "n_problems": 2, "tp": 0, "fp": 3, "fn": 0}
    model = {
        "by_hops_rows": {
            key: {
                "3": {**_row(0.9, 0.8, 0.95), "n_problems": 5},
                "4": undefined,
                "5": {**_row(0.7, 0.6, 0.8), "n_problems": 4},
            }
            for key in ("A_Ap_cascade_full", "A_consistent_full")
        }
    }
    figure = f1_by_hops(model, tmp_path, "gap_f1_by_hops", "gap")
    assert figure is not None and "at length 4" in figure.caption
    (fig,) = drawn
    texts = _texts(fig)
    (ax,) = fig.axes
    lines = [ln for ln in ax.get_lines() if ln.get_linestyle() not in ("None", "")]
    assert len(lines) == 2
    for line in lines:
        xs, ys = (list(map(float, v)) for v in (line.get_xdata(), line.get_ydata()))
        points = list(zip(xs, ys, strict=True))
        # no segment (two points in a row, neither NaN) joins a point before 4 to one after
        joined = [
            (a, b)
            for (a, ya), (b, yb) in itertools.pairwise(points)
            if not (math.isnan(ya) or math.isnan(yb))
        ]
        assert not any(a < 4 < b for a, b in joined), points
    na = [t for t in texts if "n/a" in t.get_text() and t.axes is ax]
    assert [t.get_position()[0] for t in na] == [4]


def _keyed(texts: Sequence[str]) -> list[str]:
    """The abbreviations a figure's text uses that none of its text explains."""
    text = " ".join(" ".join(texts).split())
    keys = {
        "†": ("† A's blind spot",),
        "A′": ("A′: local probe", "A′ (local probe)"),
        "A+A′": ("A+A′: both probes", "A+A′ (both probes)"),
    }
    return [
        k for k, explained in keys.items() if k in text and not any(e in text for e in explained)
    ]


@pytest.mark.parametrize("draw", FIGURES, ids=FIGURE_IDS)
def test_every_figure_explains_its_dagger_and_abbreviations_itself(
    tmp_path: Path, drawn: list[Any], draw: Callable[[Path, dict[str, Any]], Any]
) -> None:
    # Taken out of report.md (into a paper, a slide), a figure loses its caption: a † or an
    # A′ on its axes must be explained in the figure, and what its bars are.
    assert draw(tmp_path, WITH_EVERYTHING) is not None
    (fig,) = drawn
    texts = [t.get_text() for t in _texts(fig)]
    assert _keyed(texts) == []
    bars = [
        c
        for ax in fig.axes
        for c in ax.containers
        if isinstance(c, ErrorbarContainer) and (c.has_xerr or c.has_yerr)
    ]
    if bars:  # the figure says what they are
        assert "Bars: 95% percentile bootstrap intervals" in " ".join(" ".join(texts).split())


@pytest.mark.parametrize("draw", FIGURES, ids=FIGURE_IDS)
def test_the_note_under_a_figure_is_below_all_its_text_in_the_saved_file_and_no_wider(
    tmp_path: Path, drawn: list[Any], draw: Callable[[Path, dict[str, Any]], Any]
) -> None:
    # The saved file's tight box takes in the note: a legend anchored to the figure's lower
    # edge then moved down onto the note. The SVG keeps its text as text, with its place:
    # the note's lines come below every other text, the legend's last line the lowest.
    assert draw(tmp_path, WITH_EVERYTHING) is not None
    (fig,) = drawn
    (svg,) = tmp_path.glob("*.svg")
    placed = [
        (float(y), size, text)
        for size, y, text in re.findall(
            r'<text style="font-size: ([\d.]+)px[^>]*?(?:translate\([\d.]+ |y=")([\d.]+)[^>]*>'
            r"([^<]*)</text>",
            svg.read_text(),
        )
    ]
    (note_text,) = fig.texts  # the note is the figure's only text of its own
    lines = note_text.get_text().splitlines()
    note = [y for y, _, text in placed if text in lines]
    others = [y for y, _, text in placed if text not in lines]
    assert len(note) == len(lines) and others
    assert min(note) - figures.NOTE_SIZE > max(others)  # SVG y grows downwards
    # and the note widens nothing: the figure is as wide with it as without it
    _draw(fig)
    renderer = fig.canvas.get_renderer()
    with_note = fig.get_tightbbox(renderer).width
    note_text.set_visible(False)
    assert fig.get_tightbbox(renderer).width == pytest.approx(with_note, abs=0.01)


ONE_COLUMN, TWO_COLUMNS = 3.3, 7.0  # inches: the printed widths of a two-column paper
SMALLEST_PRINTED_TEXT = 6.0  # points


@pytest.mark.parametrize("draw", FIGURES, ids=FIGURE_IDS)
def test_a_figure_prints_one_or_two_columns_wide_with_no_text_under_6_points(
    tmp_path: Path, drawn: list[Any], draw: Callable[[Path, dict[str, Any]], Any]
) -> None:
    # F1 by chain length was 5.3 in wide: in one column its tick labels printed at 5.3 pt,
    # across two it took the page's width for three points.
    assert draw(tmp_path, WITH_EVERYTHING) is not None
    (fig,) = drawn
    texts = _texts(fig)
    width = fig.get_tightbbox(fig.canvas.get_renderer()).width  # inches, as saved
    one_column = width <= ONE_COLUMN + 0.25
    assert one_column or TWO_COLUMNS - 0.6 <= width <= TWO_COLUMNS + 0.25, width
    scale = (ONE_COLUMN if one_column else TWO_COLUMNS) / width
    smallest = min(t.get_fontsize() for t in texts) * scale
    assert smallest >= SMALLEST_PRINTED_TEXT, (width, smallest)
    if draw is FIGURES[1]:
        assert one_column  # three points of a line: one column


def test_a_model_with_nothing_judged_keeps_its_row_inside_the_side_by_side_axes(
    tmp_path: Path, drawn: list[Any]
) -> None:
    # --trace both on models that return no reasoning: their reasoning sections judge
    # nothing. The y limits followed the other models' points, so these rows' names were
    # dropped and their "n/a: nothing judged" fell under the axes, over the x label.
    empty: dict[str, Any] = {"rows": {}, "headline": {"found": {"A+A'": {"judged": 0}}}}
    figure = models_side_by_side({"m1": EXTREMES, "m1:reasoning": empty}, tmp_path)
    assert figure is not None
    (fig,) = drawn
    _draw(fig)
    left = fig.axes[0]
    low, high = left.get_ylim()
    assert all(low < y < high for y in left.get_yticks())
    shown = [t.get_text() for t in left.get_yticklabels()]
    assert "m1:reasoning" in shown and "m1" in shown
    box = left.get_window_extent()
    (note,) = [t for t in left.texts if t.get_text() == "n/a: nothing judged"]
    extent = note.get_window_extent()
    assert box.y0 <= extent.y0 and extent.y1 <= box.y1
