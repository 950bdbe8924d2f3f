"""The figures as a paper's reader sees them: markers at the ends of an axis drawn whole,
legends clear of the data, verdicts named where their colours alone cannot tell them apart,
and a legend no wider than its figure."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.lines import Line2D
from matplotlib.transforms import Bbox

import evaluator.figures as figures
from evaluator.figures import f1_by_hops, f1_with_ci, models_side_by_side, verdict_mix


@pytest.fixture
def drawn(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[Any]]:
    """The matplotlib figures the figure functions draw, kept after they are written."""
    kept: list[Any] = []
    save = figures.save_figure

    def keep(fig: Any, out_dir: Path, stem: str) -> str:
        kept.append(fig)
        return save(fig, out_dir, stem)

    monkeypatch.setattr(figures, "save_figure", keep)
    yield kept


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
    for text in ax.texts:
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
    assert (a_prime, 1395) not in named  # five certificates: no room for the name
    # white on the dark verdicts, dark ink on light ones (here none)
    assert {t.get_color() for t in ax.texts} == {"white"}


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
