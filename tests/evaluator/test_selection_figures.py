"""The selection study's figures as a paper's reader sees them: F_pop visible where it equals
F_sel, every deployment's name inside the axes and clear of the others, forest tick labels
apart and no square too small to see. Checked through the matplotlib artists (and, for what
hides what, the rendered pixels) of the figures ``write_figures`` saves."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.colors import to_rgb

from evaluator.selection import JointCounts, SelectionReport, analyse
from evaluator.selection_report import (
    FIGURE_CAPTIONS,
    FIGURES,
    FOREST_AREA,
    forest_note,
    text_extent,
    write_figures,
)
from tests.evaluator.conftest import Drawn

# The demo's four deployments (cotaudit demo --study selection): sim-ceiling answers every
# task correctly, so its F_sel equals its F_pop and its accuracy is 100%.
DEMO = {
    "sim-careful": JointCounts(194, 21, 62, 23),
    "sim-sloppy": JointCounts(138, 46, 83, 33),
    "sim-shortcut": JointCounts(122, 87, 71, 20),
    "sim-ceiling": JointCounts(191, 109, 0, 0),
}
# Seed 003's Table 7 and its ceiling control.
SEED = {
    "GLM-5.3": JointCounts(299, 216, 208, 277),
    "deepseek-v4-flash": JointCounts(85, 60, 73, 82),
    "deepseek-v4-pro": JointCounts(77, 56, 34, 33),
    "glm-5.2": JointCounts(36, 43, 8, 13),
    "qwen3.8-max": JointCounts(12, 8, 0, 0),
}
# Two deployments a quarter point apart at the same accuracy, and Haldane-corrected odds
# ratios (a zero cell) whose intervals span four decades. (A zero margin, every trace or none
# following, has no odds ratio at all: test_a_zero_margin_is_left_out_of_the_forest.)
EDGES = {
    "nearly-all-faithful": JointCounts(80, 0, 19, 1),
    "nearly-none-faithful": JointCounts(0, 70, 1, 29),
    "nearly-ceiling-long-deployment-name": JointCounts(190, 5, 4, 1),
    "close-a": JointCounts(60, 20, 10, 10),
    "close-b": JointCounts(61, 19, 10, 10),
    "ceiling-one": JointCounts(50, 0, 0, 0),
}
# Eight deployments a fraction of a point of accuracy apart, their intervals ten points long:
# no side of most points is free.
CROWDED = {f"deployment-{i}": JointCounts(60 + i, 20, 10 + i % 3, 10) for i in range(8)}


def _draw(fig: Any) -> Any:
    """Lay ``fig`` out and render it as its PNG is: once closed, its own canvas draws nothing,
    and the extents it keeps are those of the last file saved, the PDF's."""
    canvas: Any = FigureCanvasAgg(fig)
    canvas.draw()
    return canvas


def _report(counts: dict[str, JointCounts]) -> SelectionReport:
    return analyse(counts, resamples=10)


def _marker(ax: Any, label: str, y: float) -> Any:
    (line,) = [
        line
        for line in ax.get_lines()
        if line.get_label() == label and float(line.get_ydata()[0]) == y
    ]
    return line


def test_f_pop_stays_visible_where_it_equals_f_sel(tmp_path: Path, drawn: Drawn) -> None:
    report = _report(DEMO)
    assert report.deployments["sim-ceiling"].f_sel == report.deployments["sim-ceiling"].f_pop
    write_figures(report, tmp_path)
    fig = drawn.by_png[FIGURES[0]]
    (ax,) = fig.axes
    ceiling_row = 0.0  # the last deployment is drawn lowest
    pop = _marker(ax, "F_pop (all traces)", ceiling_row)
    sel = _marker(ax, "F_sel (correct traces)", ceiling_row)
    # The filled dot is drawn on the open circle and fits inside its ring.
    assert sel.get_zorder() > pop.get_zorder()
    assert sel.get_markersize() + sel.get_markeredgewidth() < (
        pop.get_markersize() - pop.get_markeredgewidth()
    )
    # Where F_pop lies on the bar (sim-sloppy), the bar runs under the circle, not over it.
    bars = [line for line in ax.get_lines() if line.get_marker() in (None, "None", "")]
    assert bars and all(bar.get_zorder() < pop.get_zorder() for bar in bars)
    # What the reader sees: the circle's colour around the ceiling's point.
    canvas = _draw(fig)
    pixels = np.asarray(canvas.buffer_rgba())[..., :3].astype(float) / 255
    x, y = ax.transData.transform((np.asarray(pop.get_xdata(), float)[0], ceiling_row))
    reach = int(pop.get_markersize() * fig.dpi / 72)
    row = round(float(fig.bbox.height - y))  # the buffer's rows run from the top
    around = pixels[row - reach : row + reach + 1, int(x) - reach : int(x) + reach + 1]
    circle = np.linalg.norm(around - np.array(to_rgb(pop.get_markeredgecolor())), axis=-1)
    assert int((circle < 0.15).sum()) >= 10
    assert "inside the circle" in FIGURE_CAPTIONS[FIGURES[0]]


@pytest.mark.parametrize(
    "counts", [DEMO, SEED, EDGES, CROWDED], ids=["demo", "seed", "edges", "crowded"]
)
def test_the_gap_figure_names_every_deployment_inside_the_axes_and_apart(
    tmp_path: Path, drawn: Drawn, counts: dict[str, JointCounts]
) -> None:
    write_figures(_report(counts), tmp_path)
    fig = drawn.by_png[FIGURES[2]]
    _draw(fig)
    (ax,) = fig.axes
    box = ax.get_window_extent()
    names = {t.get_text().rstrip("*"): text_extent(t) for t in ax.texts}
    assert set(names) == set(counts)
    for name, extent in names.items():
        assert box.x0 <= extent.x0 and extent.x1 <= box.x1, name
        assert box.y0 <= extent.y0 and extent.y1 <= box.y1, name
    for (a, first), (b, second) in itertools.combinations(names.items(), 2):
        assert not first.overlaps(second), (a, b)


def _drawn_marks(fig: Any, ax: Any) -> dict[str, Any]:
    """The display boxes of what the gap figure draws for its points, as laid out: each
    interval's bar (its line's width included), each cap and each marker, and the zero line."""
    from matplotlib.container import ErrorbarContainer
    from matplotlib.transforms import Bbox

    marks: dict[str, Any] = {}
    for k, container in enumerate(c for c in ax.containers if isinstance(c, ErrorbarContainer)):
        _, caps, (bars,) = container.lines
        for path, width in zip(bars.get_paths(), bars.get_linewidths(), strict=False):
            ends = ax.transData.transform(path.vertices)
            marks[f"bar {k}"] = Bbox([ends.min(axis=0), ends.max(axis=0)]).padded(
                float(width) * fig.dpi / 72 / 2
            )
        for j, cap in enumerate(caps):
            marks[f"cap {k}.{j}"] = cap.get_window_extent()
    for j, line in enumerate(ax.get_lines()):
        if line.get_marker() not in (None, "None", "", "_"):
            marks[f"marker {j}"] = line.get_window_extent()
        elif line.get_linestyle() == "--":
            marks["zero line"] = line.get_window_extent()
    return marks


@pytest.mark.parametrize(
    "counts", [DEMO, SEED, EDGES, CROWDED], ids=["demo", "seed", "edges", "crowded"]
)
def test_no_name_of_the_gap_figure_covers_an_interval_or_a_marker(
    tmp_path: Path, drawn: Drawn, counts: dict[str, JointCounts]
) -> None:
    # A name was put on the side of its point that covered least when every side met
    # something: in seed 003's figure deepseek-v4-flash's name ran across GLM-5.3's interval.
    report = _report(counts)
    write_figures(report, tmp_path)
    fig = drawn.by_png[FIGURES[2]]
    _draw(fig)
    (ax,) = fig.axes
    marks = _drawn_marks(fig, ax)
    drawn_points = sum(1 for s in report.deployments.values() if s.delta is not None)
    assert sum(1 for m in marks if m.startswith("marker")) == drawn_points
    assert sum(1 for m in marks if m.startswith("bar")) == sum(
        1 for s in report.deployments.values() if s.delta_ci is not None
    )
    for text in ax.texts:
        extent = text_extent(text)
        for what, mark in marks.items():
            assert not extent.overlaps(mark), (text.get_text(), what)


def test_of_two_points_close_together_the_upper_one_is_named_above(
    tmp_path: Path, drawn: Drawn
) -> None:
    report = _report(EDGES)
    upper, lower = report.deployments["close-b"], report.deployments["close-a"]
    assert upper.delta is not None and lower.delta is not None and upper.delta > lower.delta
    write_figures(report, tmp_path)
    fig = drawn.by_png[FIGURES[2]]
    _draw(fig)
    (ax,) = fig.axes
    names = {t.get_text().rstrip("*"): text_extent(t) for t in ax.texts}
    assert names["close-b"].y0 >= names["close-a"].y1


@pytest.mark.parametrize("counts", [DEMO, SEED, EDGES], ids=["demo", "seed", "edges"])
def test_the_forest_tick_labels_do_not_meet(
    tmp_path: Path, drawn: Drawn, counts: dict[str, JointCounts]
) -> None:
    write_figures(_report(counts), tmp_path)
    fig = drawn.by_png[FIGURES[1]]
    _draw(fig)
    (ax,) = fig.axes
    labels = [t for t in ax.xaxis.get_ticklabels() if t.get_text()]
    assert "1" in [t.get_text() for t in labels]
    boxes = sorted((t.get_window_extent() for t in labels), key=lambda b: b.x0)
    space = 2 * fig.dpi / 72  # two points: a reader tells "0.01" and "0.02" from "0.010.02"
    assert all(b.x0 - a.x1 >= space for a, b in itertools.pairwise(boxes))


def test_the_seed_forest_keeps_its_plain_decimal_ticks(tmp_path: Path, drawn: Drawn) -> None:
    write_figures(_report(SEED), tmp_path)
    fig = drawn.by_png[FIGURES[1]]
    _draw(fig)
    (ax,) = fig.axes
    assert [t.get_text() for t in ax.xaxis.get_ticklabels()] == ["0.5", "1", "2", "4"]


def test_no_forest_square_is_too_small_to_see(tmp_path: Path, drawn: Drawn) -> None:
    report = _report(EDGES)
    assert report.deployments["nearly-all-faithful"].haldane  # a zero cell: a wide interval
    write_figures(report, tmp_path)
    (ax,) = drawn.by_png[FIGURES[1]].axes
    sizes = [float(s) for c in ax.collections for s in c.get_sizes()]
    assert len(sizes) == len(EDGES) - 1  # the ceiling control has no odds ratio
    assert min(sizes) >= FOREST_AREA[0] and max(sizes) <= FOREST_AREA[1]


def test_a_zero_margin_is_left_out_of_the_forest(tmp_path: Path, drawn: Drawn) -> None:
    # Every trace followed the intervention (b = d = 0), or none was correct (a = b = 0): the
    # odds ratio is 0/0. Haldane's +0.5 drew 3.93 and 0.67 here, with intervals, as if an
    # association had been measured.
    counts = {
        "all-follow": JointCounts(80, 0, 20, 0),
        "none-correct": JointCounts(0, 0, 30, 20),
        "zero-cell": JointCounts(50, 0, 10, 40),
        "even": JointCounts(10, 10, 10, 10),
        "ceiling": JointCounts(30, 20, 0, 0),
    }
    report = _report(counts)
    write_figures(report, tmp_path)
    fig = drawn.by_png[FIGURES[1]]
    (ax,) = fig.axes
    assert [t.get_text() for t in ax.get_yticklabels()] == ["zero-cell", "even", "pooled (CMH)"]
    note = " ".join(forest_note(report, ["zero-cell", "even"]))
    assert "Not drawn (no odds ratio): ceiling (every trace correct); all-follow, none" in note
    assert "(a zero margin: no trace correct, or every trace or none following)" in note
    assert "Haldane-Anscombe +0.5 in every cell: zero-cell" in note


def test_the_forest_labels_an_interval_past_100(tmp_path: Path, drawn: Drawn) -> None:
    # b = 0: the corrected ratio is 389.57 [22.2, 6850.3]; the ticks stopped at 100, leaving
    # the axis's outer decades, and the estimate, without a label.
    write_figures(_report({"zero-cell": JointCounts(50, 0, 10, 40)}), tmp_path)
    fig = drawn.by_png[FIGURES[1]]
    _draw(fig)
    (ax,) = fig.axes
    low, high = ax.get_xlim()
    ticks = [t for t in ax.get_xticks() if low <= t <= high]
    assert max(ticks) >= 1000
    assert high / max(ticks) < 10  # no unlabelled decade at the right end
