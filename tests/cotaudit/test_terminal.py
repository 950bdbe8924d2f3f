"""What the terminal shows, on real pseudo-terminals sized and not: progress bars only where a
terminal has room for them, and every line within the terminal's width (80 where it has none)."""

from __future__ import annotations

import fcntl
import io
import os
import struct
import sys
import termios
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TextIO

import pytest

from cotaudit.terminal import Group, aligned, fitted, legend, shows_bars, terminal_width, wrapped
from evaluator.progress import EvaluationProgress
from runner.progress import Progress


@contextmanager
def terminal(columns: int | None) -> Iterator[TextIO]:
    """The program's end of a new pseudo-terminal, ``columns`` wide (None: never sized)."""
    leader, follower = os.openpty()
    if columns is not None:
        fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 24, columns, 0, 0))
    stream = open(follower, "w", encoding="utf-8")  # noqa: SIM115 (closed below)
    try:
        yield stream
    finally:
        stream.close()
        os.close(leader)


def test_a_sized_terminal_shows_bars_an_unsized_one_and_files_do_not(tmp_path: Path) -> None:
    with terminal(80) as sized:
        assert shows_bars(sized)
    with terminal(None) as unsized:  # a new pseudo-terminal reports 0 columns
        assert unsized.isatty() and os.get_terminal_size(unsized.fileno()).columns == 0
        assert not shows_bars(unsized)
    with (tmp_path / "log").open("w") as file:
        assert not shows_bars(file)
    assert not shows_bars(io.StringIO())  # no file descriptor at all
    with terminal(80) as closed:
        pass
    assert not shows_bars(closed)


def test_both_progress_displays_print_lines_on_an_unsized_terminal() -> None:
    with terminal(None) as unsized:
        assert not Progress(enabled=True, stream=unsized).tty
        assert not EvaluationProgress(enabled=True, stream=unsized).tty
    with terminal(100) as sized:
        runner_progress = Progress(enabled=True, stream=sized)
        evaluation_progress = EvaluationProgress(enabled=True, stream=sized)
        assert runner_progress.tty and evaluation_progress.tty
        runner_progress.close()
        evaluation_progress.close()


def test_the_width_is_the_terminals_else_80(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("COLUMNS", raising=False)
    with terminal(None) as unsized:  # nobody sized it (0 columns: `script`, some CI runners)
        assert terminal_width(unsized) == 80
    with terminal(132) as sized:
        assert terminal_width(sized) == 132
        monkeypatch.setattr(sys, "__stdout__", sized)
        assert terminal_width() == 132  # by default, the process's standard output
    read, write = os.pipe()
    with open(write, "w") as pipe:  # a descriptor
        assert terminal_width(pipe) == 80
    os.close(read)
    with (tmp_path / "log").open("w") as file:
        assert terminal_width(file) == 80
    assert terminal_width(io.StringIO()) == 80  # no file descriptor at all
    with terminal(132) as sized:
        monkeypatch.setenv("COLUMNS", "100")  # $COLUMNS first, as the shell says it
        assert terminal_width(sized) == 100
        for unset in ("0", "", "wide"):
            monkeypatch.setenv("COLUMNS", unset)
            assert terminal_width(sized) == 132


ROWS = [
    ["model", "correct", "ignored", "F1 A+A'+cascade", "truth"],
    ["faithful", "50 of 50", "0 of 249", "1.000 [1.000,1.000]", "0 of 0"],
    ["a-much-longer-name", "34 of 50", "9 of 233", "n/a", "9 of 9"],
]
GROUPS = [Group(range(1, 3), "what the audit found"), Group(range(3, 5), "validity")]


def test_a_table_that_fits_is_one_table_its_titles_over_their_columns() -> None:
    lines = fitted(ROWS, GROUPS, 200, left={0, 3})
    assert lines == aligned(ROWS, left={0, 3}, groups=GROUPS)
    title, header, rule, *rows = lines
    assert header.startswith("model") and set(rule) == {"-"} and len(rule) == len(header)
    # Each title within its columns: the audit's from the first count on, validity's after.
    assert title.index("what the audit found") == len("a-much-longer-name  ")
    assert header.index("ignored") < title.index("validity")
    assert rows[1].startswith("a-much-longer-name  34 of 50")  # counts right-aligned
    assert "n/a     " in rows[1]  # a text column left-aligned


@pytest.mark.parametrize("width", [60, 40, 30, 10])
def test_a_table_too_wide_is_split_keeping_the_names_groups_and_titles(width: int) -> None:
    lines = fitted(ROWS, GROUPS, width, left={0, 3})
    tables = "\n".join(lines).split("\n\n")
    assert len(tables) > 1
    for table in tables:
        rows = table.splitlines()
        # Each table: a title, the header, the rule, a line per row starting with its name.
        assert rows[1].startswith("model ") and [r.split()[0] for r in rows[3:]] == [
            "faithful",
            "a-much-longer-name",
        ]
        assert rows[0].strip() in ("what the audit found", "validity")
        # No line longer than the width, but for the name beside one column (or its title).
        assert all(len(r) <= max(width, len(ROWS[2][0]) + 2 + 20) for r in rows)
    for row in ROWS:  # every cell is there, on its row's lines
        found = [ln for ln in lines if ln.startswith(row[0] + " ")]
        assert len(found) == len(tables)
        for cell in row[1:]:
            assert any(cell in ln for ln in found), (cell, found)
    if width >= 60:  # each group whole in a table of its own where it fits in one
        assert len(tables) == 2


def test_a_title_longer_than_its_columns_widens_them() -> None:
    rows = [["name", "x"], ["a", "1"]]
    title, header, _, row = aligned(rows, groups=[Group([1], "a long title")])
    assert title == "      a long title" and header.endswith("x") and len(header) == len(title)
    assert row.endswith("1") and len(row) == len(title)


def test_groups_must_be_every_column_after_the_first_once() -> None:
    with pytest.raises(ValueError, match="not the columns after the first"):
        fitted(ROWS, [Group(range(1, 3))], 80)


def test_prose_breaks_between_clauses_and_items_never_inside_a_name() -> None:
    text = "faithful: 573 of 573 certificates evaluable; steps read: original 1.000, "
    text += "consistent 1.000, local 1.000, surface 1.000"
    assert wrapped(text, 200) == [text]
    assert wrapped(text, 80, "    ") == [
        "faithful: 573 of 573 certificates evaluable;",
        "    steps read: original 1.000, consistent 1.000, local 1.000, surface 1.000",
    ]
    assert wrapped(text, 60, "    ") == [
        "faithful: 573 of 573 certificates evaluable;",
        "    steps read: original 1.000, consistent 1.000,",
        "    local 1.000, surface 1.000",
    ]
    pooled = "Pooled CMH over 3 deployment(s), n=900: OR = 1.01, z = 0.09, p = 0.930"
    assert wrapped(pooled, 56) == [
        "Pooled CMH over 3 deployment(s), n=900: OR = 1.01,",
        "  z = 0.09, p = 0.930",
    ]
    path = "/a/" + "deep/" * 20 + "report.md"
    assert wrapped(f"wrote {path} and more", 40) == ["wrote", f"  {path}", "  and more"]
    for width in (30, 45, 60, 80):
        lines = wrapped(text, width, "  ")
        assert " ".join(" ".join(lines).split()) == text  # every word, in order
        assert all(len(ln) <= width for ln in lines)


def test_a_legend_is_wrapped_under_its_meanings_and_no_wider_than_100() -> None:
    meanings = [("F1", "word " * 60), ("†", "a short one")]
    for width, longest in ((60, 60), (80, 80), (300, 100)):
        lines = legend(meanings, width)
        assert lines[0].startswith("F1  word") and all(ln.startswith("    ") for ln in lines[1:-1])
        assert lines[-1] == "†   a short one"
        assert max(map(len, lines)) <= longest < max(map(len, lines)) + 6
