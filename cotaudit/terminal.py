"""What the terminal shows: whether a stream can show a progress bar, how a span of time reads
in a progress line, how wide a line may be, and the tables and legends commands print in it;
both halves ask it.

A terminal wraps a line longer than its width into the next, and a table so wrapped cannot be
read. Every table a command prints goes through :func:`fitted` (one table where it fits, else
tables one under another, each keeping the column that names a row) and every legend through
:func:`legend`, at :func:`terminal_width`; no figure is cut or dropped to fit.
"""

from __future__ import annotations

import os
import sys
import textwrap
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import TextIO

# A pipe, a file, a terminal without a size: what any terminal shows whole.
UNKNOWN_WIDTH = 80
# Prose reads best in lines no longer than this, however wide the terminal.
LEGEND_WIDTH = 100
_GAP = 2  # spaces between two columns


def shows_bars(stream: TextIO) -> bool:
    """True for a terminal that reports a width; False for a file, a pipe, or a terminal
    without a size.

    A pseudo-terminal that nobody sized (``script``, some CI runners' and editors' shells)
    reports 0 columns: tqdm then draws its bars with no room for them, and the user sees
    nothing for the whole run. Such a stream gets the plain progress lines instead.
    """
    try:
        if not stream.isatty():
            return False
        return os.get_terminal_size(stream.fileno()).columns > 0
    except (OSError, ValueError):  # closed, or no file descriptor (io.UnsupportedOperation)
        return False


def duration(seconds: float) -> str:
    """A span of time as a progress line shows it: ``42 s``, ``17 min``, ``2.1 h``."""
    seconds = max(0.0, seconds)
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def terminal_width(stream: TextIO | None = None) -> int:
    """The columns of the terminal ``stream`` is (the process's standard output by default),
    ``$COLUMNS`` first; else 80: a pipe, a file or a terminal that reports no width (0 columns:
    an unsized pseudo-terminal) gets what any terminal shows whole."""
    try:
        columns = int(os.environ.get("COLUMNS", ""))
    except ValueError:
        columns = 0
    if columns > 0:
        return columns
    stream = stream or sys.__stdout__  # None: a process started without one
    try:
        columns = os.get_terminal_size(stream.fileno()).columns if stream else 0
    except (OSError, ValueError):  # closed, or no file descriptor (io.UnsupportedOperation)
        columns = 0
    return columns if columns > 0 else UNKNOWN_WIDTH


@dataclass(frozen=True, slots=True)
class Group:
    """Columns of a table that belong together (their indices, in order), and the title over
    them ("": none). A table split to fit keeps a group's columns together where they fit in
    one table, and restates its title over each part."""

    columns: Sequence[int]
    title: str = ""


def _span(widths: Sequence[int], columns: Sequence[int], title: str) -> int:
    """The characters the columns take side by side, at least their title's."""
    return max(sum(widths[i] for i in columns) + _GAP * (len(columns) - 1), len(title))


def aligned(
    rows: Sequence[Sequence[str]],
    *,
    left: Collection[int] = (0,),
    groups: Sequence[Group] = (),
    rule: bool = True,
) -> list[str]:
    """``rows`` (the first the header) as one table: the columns in ``left`` (text) aligned
    left, the others (figures) right; the titles of ``groups`` centred over their columns on a
    line above the header (a group's last column widened where its title is longer than its
    columns); a rule under the header if ``rule``. No line ends in spaces."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    titled = [g for g in groups if g.title and g.columns]
    for group in titled:
        last = group.columns[-1]
        widths[last] += _span(widths, group.columns, group.title) - _span(widths, group.columns, "")
    out: list[str] = []
    if titled:
        starts = [sum(widths[:i]) + _GAP * i for i in range(len(widths))]
        line = ""
        for group in titled:
            start = starts[group.columns[0]]
            line = line.ljust(start) + group.title.center(_span(widths, group.columns, ""))
        out.append(line.rstrip())
    for number, row in enumerate(rows):
        cells = zip(row, widths, strict=True)
        out.append(
            (" " * _GAP)
            .join(c.ljust(w) if j in left else c.rjust(w) for j, (c, w) in enumerate(cells))
            .rstrip()
        )
        if number == 0 and rule:
            out.append("-" * len(out[-1]))
    return out


def fitted(
    rows: Sequence[Sequence[str]],
    groups: Sequence[Group],
    width: int,
    *,
    left: Collection[int] = (0,),
    rule: bool = True,
) -> list[str]:
    """``rows`` aligned as one table where it fits ``width`` columns; else as tables one under
    another (a blank line between), each the first column (what names a row) and as many of
    the next columns as fit (at least one), so that a terminal never wraps a line and no
    figure is cut or dropped. ``groups`` are the other columns, each once, in order: the
    columns of one share a table where they fit in one, under its title. ``left`` and
    ``rule`` as :func:`aligned`."""
    shown = [i for g in groups for i in g.columns]
    if shown != list(range(1, len(rows[0]))):
        raise ValueError(f"groups {shown} are not the columns after the first, each once")
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    tables: list[list[Group]] = [[]]  # each table's part of each group

    def fits(parts: Sequence[Group]) -> bool:
        return widths[0] + sum(_GAP + _span(widths, p.columns, p.title) for p in parts) <= width

    for group in groups:
        if tables[-1] and not fits([*tables[-1], group]):
            tables.append([])
        part: list[int] = []  # the group's columns in the last table
        for i in group.columns:
            if (tables[-1] or part) and not fits([*tables[-1], Group([*part, i], group.title)]):
                if part:
                    tables[-1].append(Group(part, group.title))
                tables.append([])
                part = []
            part.append(i)
        if part:
            tables[-1].append(Group(part, group.title))
    out: list[str] = []
    for parts in filter(None, tables):
        columns = [0, *(i for p in parts for i in p.columns)]
        at = {i: k for k, i in enumerate(columns)}  # a column's place in this table
        if out:
            out.append("")
        out += aligned(
            [[row[i] for i in columns] for row in rows],
            left={at[i] for i in columns if i in left},
            groups=[Group([at[i] for i in p.columns], p.title) for p in parts],
            rule=rule,
        )
    return out


def wrapped(text: str, width: int, indent: str = "  ") -> list[str]:
    """``text`` in lines of at most ``width`` characters, the second and later indented by
    ``indent``; one line where it fits. A line ends where the text breaks best once the line
    is half full: after a clause (``;``), else after an item of a list (``,``: ``OR = 1.01,
    z = 0.09``), else as late as the words allow, not between a name and its value where it
    can help it. A path or a name longer than the line stays whole: cut, it names nothing."""
    width = max(width, len(indent) + 20)
    if len(text) <= width:
        return [text]
    words = text.split()
    lines: list[str] = []
    first = 0
    while first < len(words):
        start = indent if lines else text[: len(text) - len(text.lstrip())]
        length = len(start) + len(words[first])
        ends = [(first + 1, length)]  # (the word after the line, the line's length)
        while ends[-1][0] < len(words) and length + 1 + len(words[ends[-1][0]]) <= width:
            length += 1 + len(words[ends[-1][0]])
            ends.append((ends[-1][0] + 1, length))
        end = ends[-1][0]
        if end < len(words):
            half_full = [e for e in ends if 2 * e[1] >= width] or ends
            end = max(half_full, key=lambda e: (_break(words[e[0] - 1]), e[0]))[0]
            if _break(words[end - 1]) < 0:  # a shorter line rather than a name without its value
                end = max(ends, key=lambda e: (_break(words[e[0] - 1]), e[0]))[0]
        lines.append(start + " ".join(words[first:end]))
        first = end
    return lines


def _break(word: str) -> int:
    """How well a line ends after ``word``: best after a clause, then after an item of a list,
    worst between a name and its value (``n=194:``, ``z =``)."""
    if word.endswith(";"):
        return 2
    if word.endswith(","):
        return 1
    return -1 if word.endswith((":", "=")) else 0


def legend(meanings: Sequence[tuple[str, str]], width: int) -> list[str]:
    """What each column means: its name, then its meaning in lines no longer than ``width``
    (nor :data:`LEGEND_WIDTH`), each line after the first under the first's text."""
    key_width = max((len(key) for key, _ in meanings), default=0)
    text_width = max(min(width, LEGEND_WIDTH) - key_width - _GAP, 20)
    out: list[str] = []
    for key, meaning in meanings:
        lines = textwrap.wrap(
            meaning, text_width, break_long_words=False, break_on_hyphens=False
        ) or [""]
        out.append(f"{key.ljust(key_width)}{' ' * _GAP}{lines[0]}".rstrip())
        out += [" " * (key_width + _GAP) + more for more in lines[1:]]
    return out
