"""The report's figures keep their width whatever the model's name, name every verdict segment
in a way that does not rest on its colour alone, and draw each legend swatch as its bars are."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.colors import to_rgba
from matplotlib.text import Annotation, Text

import evaluator.figures as figures
from evaluator.figures import f1_by_hops, f1_with_ci, models_side_by_side, verdict_mix

from .test_figures_review import WITH_EVERYTHING


def _drawn(fig: Any) -> Any:
    """``fig`` laid out and rendered as its PNG is (its own canvas draws nothing once closed);
    its renderer."""
    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    return canvas.get_renderer()


def _width(fig: Any) -> float:
    """The saved file's width, inches: the tight box ``save_figure`` crops to."""
    return float(fig.get_tightbbox(_drawn(fig)).width)


LONG = "meta-llama/Meta-Llama-3.1-405B-Instruct-Turbo-with-a-long-deployment-suffix"
UNBROKEN = "x" * 120  # no separator to break it at
PER_MODEL: dict[str, Callable[[Path, str], Any]] = {
    "f1_ci": lambda out, name: f1_with_ci(WITH_EVERYTHING, out, "m_f1_ci", name),
    "f1_by_hops": lambda out, name: f1_by_hops(WITH_EVERYTHING, out, "m_f1_by_hops", name),
    "verdict_mix": lambda out, name: verdict_mix(WITH_EVERYTHING, out, "m_verdict_mix", name),
}


@pytest.mark.parametrize("name", [LONG, UNBROKEN], ids=["separated", "unbroken"])
@pytest.mark.parametrize("which", list(PER_MODEL))
def test_a_long_model_name_does_not_widen_its_figure(
    tmp_path: Path, drawn: list[Any], which: str, name: str
) -> None:
    # The title "meta-llama/...: F1 by chain length" made the one-column figure 7.5 in wide:
    # printed in its column, every text of it came out at less than half its size.
    draw = PER_MODEL[which]
    for sub, model in (("short", "m"), ("long", name)):
        (tmp_path / sub).mkdir()
        assert draw(tmp_path / sub, model) is not None
    short, long = drawn
    assert _width(long) == pytest.approx(_width(short), abs=0.02)
    (ax,) = long.axes
    title = ax.title
    assert len(title.get_text().splitlines()) <= figures.TITLE_LINES
    box, axes = title.get_window_extent(), ax.get_window_extent()
    assert axes.x0 <= box.x0 and box.x1 <= axes.x1
    # Where the title had to shorten the name, the note gives it whole.
    shown = title.get_text().replace("\n", "")
    if name not in shown:
        assert figures.ELLIPSIS in shown
        (note,) = long.texts
        assert name in note.get_text().replace("\n", "")


def test_long_model_names_beside_the_side_by_side_rows_keep_its_width_and_meet_nothing(
    tmp_path: Path, drawn: list[Any]
) -> None:
    # The names were the tick labels as they are: 7.9 in wide, the two panels squeezed to
    # slivers under axis labels printed over each other.
    names = [LONG, UNBROKEN, "faithful"]
    assert models_side_by_side({"m1": WITH_EVERYTHING, "m2": WITH_EVERYTHING}, tmp_path)
    assert models_side_by_side(dict.fromkeys(names, WITH_EVERYTHING), tmp_path) is not None
    short, fig = drawn
    assert _width(fig) == pytest.approx(_width(short), abs=0.02)
    left, right = fig.axes
    labels = [t for t in left.get_yticklabels() if t.get_text()]
    assert len(labels) == len(names)
    for label in labels:
        assert len(label.get_text().splitlines()) <= figures.NAME_TICK_LINES
        assert label.get_window_extent().width <= figures.NAME_TICK_WIDTH * fig.dpi
    for a, b in itertools.combinations([t.get_window_extent() for t in labels], 2):
        assert not a.overlaps(b)
    assert not left.xaxis.label.get_window_extent().overlaps(right.xaxis.label.get_window_extent())
    # The names shortened are given whole in the note; "faithful" is shown as it is.
    shown = [t.get_text().replace("\n", "") for t in labels]
    assert "faithful" in shown and LONG not in shown and UNBROKEN not in shown
    (note,) = fig.texts
    assert "Models shortened: " in " ".join(note.get_text().split())
    whole = note.get_text().replace("\n", "")
    assert LONG in whole and UNBROKEN in whole and "= faithful" not in whole


def _cell(evaluable: int, excluded: int = 0) -> dict[str, int]:
    return {"evaluable": evaluable, "excluded": excluded}


# The demo's shape: UNPARSEABLE pairs are all excluded (hatched), a few verdicts narrow, side
# by side at the end of a bar and at its start.
NARROW: dict[str, Any] = {
    "verdict_mix_all": {
        "A": {
            "GROUNDED": _cell(900, 3),
            "INPUT-SENSITIVE": _cell(4),
            "INSENSITIVE": _cell(700, 2),
            "UNSTABLE": _cell(3),
            "UNPARSEABLE": _cell(0, 5),
        },
        "A'": {
            "GROUNDED": _cell(20),
            "INPUT-SENSITIVE": _cell(1200),
            "INSENSITIVE": _cell(390),
            "UNSTABLE": _cell(2, 1),
            "UNPARSEABLE": _cell(0, 5),
        },
        "A+A'": {"GROUNDED": _cell(1610), "UNSTABLE": _cell(3), "UNPARSEABLE": _cell(0, 5)},
    }
}


def _segments(ax: Any) -> list[Any]:
    return [p for p in ax.patches if p.get_width() > 0]


def test_every_verdict_segment_is_named_or_coded_and_no_two_names_meet(
    tmp_path: Path, drawn: list[Any]
) -> None:
    # A segment too narrow for its name was left with its colour alone: in greyscale, or to a
    # colour-blind reader, UNSTABLE and UNPARSEABLE slivers at a bar's end were one grey.
    figure = verdict_mix(NARROW, tmp_path, "m_verdict_mix", "m")
    assert figure is not None and "by the code the legend gives it" in figure.caption
    (fig,) = drawn
    _drawn(fig)
    (ax,) = fig.axes
    colour_of = {to_rgba(c): v for v, c in figures.VERDICT_COLOURS.items()}
    axes = ax.get_window_extent()
    texts = [t for t in ax.texts if t.get_visible()]
    boxes = [Text.get_window_extent(t) for t in texts]
    for segment in _segments(ax):
        face = segment.get_facecolor()
        verdict = colour_of[(*face[:3], 1.0)]
        names = {verdict, figures.verdict_code(verdict)}
        bar = segment.get_window_extent()
        mine = [
            (t, box)
            for t, box in zip(texts, boxes, strict=True)
            if t.get_text() in names
            and (
                (
                    isinstance(t, Annotation)
                    and t.xy
                    == (
                        segment.get_x() + segment.get_width() / 2,
                        segment.get_y() + segment.get_height(),
                    )
                )
                or (not isinstance(t, Annotation) and bar.contains(*box.corners().mean(axis=0)))
            )
        ]
        assert len(mine) == 1, (verdict, segment.get_x(), segment.get_y())
        text, box = mine[0]
        if isinstance(text, Annotation):  # above its bar, inside the axes
            assert box.y0 >= bar.y1 and axes.x0 <= box.x0 and box.x1 <= axes.x1
            assert box.y1 <= axes.y1
            # still over its segment, or joined to it by a line
            assert (box.x0 <= bar.x1 and bar.x0 <= box.x1) or text.arrow_patch.get_visible()
    for (a, first), (b, second) in itertools.combinations(zip(texts, boxes, strict=True), 2):
        assert not first.overlaps(second), (a.get_text(), b.get_text())
    # The legend gives the code of every verdict that one names.
    (legend,) = fig.legends
    entries = [t.get_text() for t in legend.get_texts()]
    for code in {t.get_text() for t in texts if len(t.get_text()) <= 2}:
        (verdict,) = [v for v in figures.VERDICTS if figures.verdict_code(v) == code]
        assert f"{verdict} ({code})" in entries


def test_a_legend_swatch_is_drawn_as_its_verdicts_bars_are(
    tmp_path: Path, drawn: list[Any]
) -> None:
    # The demo's UNPARSEABLE pairs are all excluded, their bars hatched and faded: the legend
    # showed a solid grey swatch that matched no bar of the figure.
    assert verdict_mix(NARROW, tmp_path, "m_verdict_mix", "m") is not None
    (fig,) = drawn
    (ax,) = fig.axes
    (legend,) = fig.legends
    colour_of = {to_rgba(c): v for v, c in figures.VERDICT_COLOURS.items()}
    bars: dict[str, set[tuple[Any, ...]]] = {}
    for segment in _segments(ax):
        face = tuple(segment.get_facecolor())
        bars.setdefault(colour_of[(*face[:3], 1.0)], set()).add((segment.get_hatch(), face))
    handles = dict(
        zip((t.get_text() for t in legend.get_texts()), legend.legend_handles, strict=True)
    )
    for verdict, styles in bars.items():
        (handle,) = [h for label, h in handles.items() if label.split(" (")[0] == verdict]
        swatch = (handle.get_hatch(), tuple(handle.get_facecolor()))
        assert swatch in styles, verdict
        if len(styles) == 1:
            assert swatch == next(iter(styles))
    unparseable = handles["UNPARSEABLE (UP)"]
    assert unparseable.get_hatch() == figures.EXCLUDED
    assert {h for h, _ in bars["UNPARSEABLE"]} == {figures.EXCLUDED}
    assert handles["GROUNDED (GR)"].get_hatch() is None  # mostly evaluable: solid, as its bars
