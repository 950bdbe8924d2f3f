"""The selection study's figures stand on their own (docs/selection.md, "Output"): each keeps a
short key to its marks, bars and abbreviations in a note under it, as the report's figures do;
and ``--no-figures`` takes the figures of an earlier selection out of the output directory, so
that none stays beside a page that no longer shows it, while every other file stays."""

from __future__ import annotations

import html
import re
from pathlib import Path

import pytest

import evaluator.figures as figures
from cotaudit.cli import main
from evaluator.selection import JointCounts, analyse
from evaluator.selection_report import FIGURES, write_figures

# The demo's deployments: sim-ceiling answers every task correctly (no interval, no odds ratio).
DEMO = {
    "sim-careful": JointCounts(194, 21, 62, 23),
    "sim-sloppy": JointCounts(138, 46, 83, 33),
    "sim-shortcut": JointCounts(122, 87, 71, 20),
    "sim-ceiling": JointCounts(191, 109, 0, 0),
}
# More deployments than the gap figure draws as a scatter: it is drawn as rows.
MANY = {f"deployment-{i:02d}": JointCounts(60 + 3 * i, 20, 10 + i % 5, 10 + i) for i in range(12)}
TEXT = re.compile(
    r'<text style="font-size: ([\d.]+)px[^>]*?(?:translate\([\d.]+ |y=")([\d.]+)[^>]*>'
    r"([^<]*)</text>"
)


def _note_and_others(svg: Path) -> tuple[str, list[float], list[float]]:
    """The note's text (its lines joined) and the heights (SVG y, growing downwards) of its
    lines and of every other text of the figure's SVG, which keeps its text as text."""
    placed = [
        (float(size), float(y), html.unescape(text))
        for size, y, text in TEXT.findall(svg.read_text(encoding="utf-8"))
    ]
    note = [(y, text) for size, y, text in placed if size == figures.NOTE_SIZE]
    others = [y for size, y, _ in placed if size != figures.NOTE_SIZE]
    return " ".join(text for _, text in note), [y for y, _ in note], others


@pytest.mark.parametrize(
    ("counts", "keys", "absent"),
    [
        (
            DEMO,
            {
                FIGURES[0]: [
                    "A: the trace followed the intervention; C: it answered the original task "
                    "correctly",
                    "F_sel = P(A = 1 | C = 1)",
                    "Δ = F_sel − F_pop",
                    "Bars: F_pop + the 95% delta-method (Wald) interval of Δ",
                    "no bar where Δ has no interval (a ceiling control",
                ],
                FIGURES[1]: [
                    "A: the trace followed the intervention",
                    "Squares: odds ratio of A and C, area by inverse variance",
                    "diamond: pooled Cochran-Mantel-Haenszel (CMH) odds ratio",
                    "Bars: 95% Woolf intervals",
                    "1 = no association",
                    "Not drawn (no odds ratio: every trace correct): sim-ceiling",
                ],
                FIGURES[2]: [
                    "Δ = F_sel − F_pop, in percentage points (pp)",
                    "Bars: 95% delta-method (Wald) intervals of Δ",
                    "*: p < 0.05",
                    "Grey diamond: Δ has no interval",
                ],
            },
            {},
        ),
        (
            MANY,
            {
                FIGURES[0]: ["F_pop = P(A = 1)", "Bars: F_pop + the 95% delta-method (Wald)"],
                FIGURES[1]: ["(CMH) odds ratio", "Bars: 95% Woolf intervals"],
                FIGURES[2]: ["Δ = F_sel − F_pop", "Wald) intervals of Δ", "*: p < 0.05"],
            },
            # Every deployment has its interval and odds ratio: no key to what is not drawn.
            {
                FIGURES[0]: ["no bar where"],
                FIGURES[1]: ["Not drawn"],
                FIGURES[2]: ["Grey diamond"],
            },
        ),
    ],
    ids=["scatter-with-a-ceiling", "rows"],
)
def test_each_selection_figure_keeps_its_key_in_a_note_under_it(
    tmp_path: Path,
    counts: dict[str, JointCounts],
    keys: dict[str, list[str]],
    absent: dict[str, list[str]],
) -> None:
    # The symbols and abbreviations were explained only by selection.md's captions: a figure
    # taken out of the page said nothing of its `*`, its grey diamond, F_pop/F_sel, Δ or CMH.
    assert write_figures(analyse(counts, rng=0, resamples=0), tmp_path) == list(FIGURES)
    for name in FIGURES:
        note, note_ys, other_ys = _note_and_others(tmp_path / f"{Path(name).stem}.svg")
        for key in keys[name]:
            assert key in note, (name, key, note)
        for key in absent.get(name, []):
            assert key not in note, (name, key, note)
        assert note.endswith(".")
        # under everything else the figure writes: its legend, axis labels and names
        assert note_ys and other_ys and min(note_ys) - figures.NOTE_SIZE > max(other_ys)


EARLIER = "deployment,a,b,c,d\nx,30,20,20,30\ny,40,10,25,25\n"
LATER = "deployment,a,b,c,d\nx,50,5,5,40\n"
FIGURE_FILES = [f"{Path(f).stem}.{ext}" for f in FIGURES for ext in figures.FORMATS]


def test_no_figures_removes_the_earlier_selections_figures_and_nothing_else(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    earlier, later = tmp_path / "earlier.csv", tmp_path / "later.csv"
    earlier.write_text(EARLIER, encoding="utf-8")
    later.write_text(LATER, encoding="utf-8")
    out = tmp_path / "out"
    assert main(["selection", "--counts", str(earlier), "--out", str(out), "--n-boot", "0"]) == 0
    assert sorted(p.name for p in out.iterdir() if p.name in FIGURE_FILES) == sorted(FIGURE_FILES)
    # The user's own files beside them, some with names close to the figures'.
    own = {
        "notes.txt": b"mine",
        "selection_forest.png.bak": b"a copy I made",
        "selection_forest_v2.png": b"mine too",
        "figure.png": b"another figure",
    }
    for name, content in own.items():
        (out / name).write_bytes(content)
    capsys.readouterr()

    argv = ["selection", "--counts", str(later), "--out", str(out), "--no-figures"]
    assert main(argv) == 0
    said = capsys.readouterr().out
    # The earlier study's figures used to stay beside the new page, which no longer links
    # them and whose numbers they contradict.
    assert not [name for name in FIGURE_FILES if (out / name).exists()]
    assert "removed the earlier selection's figures" in said
    assert str(out / "selection_forest.png") in said
    page = (out / "selection.md").read_text(encoding="utf-8")
    assert "## Figures" not in page and "| x | 100 | 55.0% |" in page
    assert {name: (out / name).read_bytes() for name in own} == own
    assert sorted(p.name for p in out.iterdir()) == sorted([*own, "selection.json", "selection.md"])

    # Run again without figures: nothing left to remove, nothing said of it.
    assert main(argv) == 0
    assert "removed" not in capsys.readouterr().out


def test_no_figures_keeps_a_file_of_a_figures_name_that_matplotlib_did_not_draw(
    tmp_path: Path,
) -> None:
    # A file of a figure's name is the selection's only where matplotlib drew it: the user's
    # own, a directory of such a name and a link to a figure stay.
    earlier, later = tmp_path / "earlier.csv", tmp_path / "later.csv"
    earlier.write_text(EARLIER, encoding="utf-8")
    later.write_text(LATER, encoding="utf-8")
    drawn = tmp_path / "drawn"
    assert main(["selection", "--counts", str(earlier), "--out", str(drawn), "--n-boot", "0"]) == 0
    out = tmp_path / "out"
    argv = ["selection", "--counts", str(later), "--out", str(out), "--no-figures"]
    assert main(argv) == 0  # a selection's page there: its figures' names are taken
    (out / "selection_forest.png").write_bytes(b"the user's own forest plot")
    (out / "selection_forest.pdf").write_bytes(b"%PDF-1.4 the user's own")
    (out / "selection_fpop_fsel.svg").mkdir()
    (out / "selection_gap_vs_accuracy.png").symlink_to(drawn / "selection_gap_vs_accuracy.png")
    assert main(argv) == 0
    assert (out / "selection_forest.png").read_bytes() == b"the user's own forest plot"
    assert (out / "selection_forest.pdf").read_bytes() == b"%PDF-1.4 the user's own"
    assert (out / "selection_fpop_fsel.svg").is_dir()
    assert (out / "selection_gap_vs_accuracy.png").is_symlink()
    assert (drawn / "selection_gap_vs_accuracy.png").stat().st_size > 1000


def test_the_figures_recognised_are_those_of_every_format_written(tmp_path: Path) -> None:
    from evaluator.commands.selection import DRAWN_BY, drawn_by_matplotlib, figure_files

    assert sorted(DRAWN_BY) == sorted(figures.FORMATS)
    assert write_figures(analyse(DEMO, rng=0, resamples=0), tmp_path) == list(FIGURES)
    files = figure_files(tmp_path)
    assert sorted(p.name for p in files) == sorted(FIGURE_FILES)
    assert all(drawn_by_matplotlib(path) for path in files)


def test_figures_kept_when_the_new_set_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # A refused run writes nothing and removes nothing: the earlier set stays whole.
    earlier = tmp_path / "earlier.csv"
    earlier.write_text(EARLIER, encoding="utf-8")
    out = tmp_path / "out"
    assert main(["selection", "--counts", str(earlier), "--out", str(out), "--n-boot", "0"]) == 0
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    bad = tmp_path / "bad.csv"
    bad.write_text("deployment,a,b,c,d\nx,1,2,3,-4\n", encoding="utf-8")
    assert main(["selection", "--counts", str(bad), "--out", str(out), "--no-figures"]) == 2
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    assert "line 2, column 'd'" in capsys.readouterr().err
