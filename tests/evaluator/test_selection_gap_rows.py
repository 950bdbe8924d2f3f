"""The selection study's gap figure stays legible at twenty deployments: one row a
deployment, in order of accuracy, each named once by its row, instead of a scatter whose names
and lines back to their points cross each other's points and intervals."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.text import Annotation

from evaluator.selection import JointCounts, SelectionReport, analyse
from evaluator.selection_report import (
    FIGURE_CAPTIONS,
    FIGURES,
    GAP_ROWS_CAPTION,
    GAP_SCATTER_MAX,
    render_markdown,
    write_figures,
)
from tests.evaluator.conftest import Drawn

# Twenty deployments of accuracies 55% to 95%, their gaps and intervals overlapping: as a
# scatter their names found no free place and their lines crossed.
TWENTY = {
    f"deployment-{i:02d}-{'long-' * (i % 3)}name": JointCounts(
        a=int((300 + 7 * i) * (0.5 + 0.02 * (i % 5))),
        b=(300 + 7 * i) - int((300 + 7 * i) * (0.5 + 0.02 * (i % 5))),
        c=40 + (i * 13) % 60,
        d=140 - (i * 13) % 60 - 2 * i,
    )
    for i in range(20)
}
DEMO = {
    "sim-careful": JointCounts(194, 21, 62, 23),
    "sim-sloppy": JointCounts(138, 46, 83, 33),
    "sim-shortcut": JointCounts(122, 87, 71, 20),
    "sim-ceiling": JointCounts(191, 109, 0, 0),
}
PAGE_HEIGHT = 9.0  # inches of a page's text
TWO_COLUMNS = 7.0  # inches


def _report(counts: dict[str, JointCounts]) -> SelectionReport:
    return analyse(counts, resamples=10)


def test_twenty_deployments_are_rows_in_order_of_accuracy_each_named_once(
    tmp_path: Path, drawn: Drawn
) -> None:
    report = _report(TWENTY)
    assert len(TWENTY) > GAP_SCATTER_MAX
    write_figures(report, tmp_path)
    fig = drawn.by_png[FIGURES[2]]
    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    renderer = canvas.get_renderer()
    acc_ax, gap_ax = fig.axes
    # No name beside a point, no line back to one: the rows name the deployments.
    assert not [t for ax in fig.axes for t in ax.texts if isinstance(t, Annotation)]
    labels = [t for t in acc_ax.get_yticklabels() if t.get_text()]
    names = [t.get_text().rstrip("*") for t in labels]
    assert sorted(names) == sorted(TWENTY)
    # Top to bottom by accuracy, highest first; each row's marks on its own row.
    by_row = sorted(zip(acc_ax.get_yticks(), names, strict=True), key=lambda yn: -yn[0])
    accuracies = [report.deployments[n].accuracy for _, n in by_row]
    assert accuracies == sorted(accuracies, reverse=True)
    for y, name in zip(acc_ax.get_yticks(), names, strict=True):
        stats = report.deployments[name]
        assert stats.delta is not None and stats.accuracy is not None
        assert any(
            list(line.get_ydata()) == [y]
            and float(line.get_xdata()[0]) == pytest.approx(stats.accuracy * 100)
            for line in acc_ax.get_lines()
        ), name
        assert any(
            list(line.get_ydata()) == [y]
            and float(line.get_xdata()[0]) == pytest.approx(stats.delta * 100)
            for line in gap_ax.get_lines()
        ), name
        star = stats.p is not None and stats.p < 0.05
        assert (f"{name}*" in [t.get_text() for t in labels]) == star
    # The names apart, and the figure a page's height and two columns' width at most.
    for a, b in itertools.combinations([t.get_window_extent() for t in labels], 2):
        assert not a.overlaps(b)
    # The narrow accuracy panel's axis label ran into the gap panel's.
    acc_label = acc_ax.xaxis.label.get_window_extent(renderer)
    assert acc_label.x1 < gap_ax.xaxis.label.get_window_extent(renderer).x0
    box = fig.get_tightbbox(renderer)
    assert box.height <= PAGE_HEIGHT and box.width <= TWO_COLUMNS + 0.25
    page = render_markdown(report, list(FIGURES))
    assert GAP_ROWS_CAPTION in page
    assert FIGURE_CAPTIONS[FIGURES[2]] not in page


def test_four_deployments_keep_the_scatter_and_its_caption(tmp_path: Path, drawn: Drawn) -> None:
    report = _report(DEMO)
    write_figures(report, tmp_path)
    (ax,) = drawn.by_png[FIGURES[2]].axes
    assert sorted(t.get_text().rstrip("*") for t in ax.texts) == sorted(DEMO)
    page = render_markdown(report, list(FIGURES))
    assert FIGURE_CAPTIONS[FIGURES[2]] in page and GAP_ROWS_CAPTION not in page
