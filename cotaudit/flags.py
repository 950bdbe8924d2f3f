"""Command-line conventions shared by every command: one name per idea, old spellings kept for
one release as hidden aliases that say what the new name is (docs/command-line.md).

An alias is an ordinary argparse option with ``help=argparse.SUPPRESS`` (absent from
``--help``) and the canonical option's ``dest``, so the command reads one attribute whichever
spelling was used; using it prints one line on standard error naming the new spelling.

Numeric options take their ``type`` from :func:`number_flag` and :func:`integer_flag`, which
check as a config key is checked (``cotaudit.values``: finite, within bounds, 64-bit
integers), so ``--hang-limit nan`` is refused by argparse (exit 2, the flag named) instead of
failing later.

``-`` as a path means the standard streams, as for most tools: standard input where a command
reads one file (``evaluate -``, ``parse -``), standard output where it writes one (``plan --out
-``, ``view --out -``, ``rescore --json -``, ``selection --json -``; :func:`is_stdout`). A
directory of files has no such stream: an output directory's ``type`` is :func:`output_dir`,
which refuses ``-`` (and an empty path, a variable left unset) instead of creating a directory
named ``-`` (or writing into the current one).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from cotaudit.errors import UsageError
from cotaudit.values import expected_integer, expected_number, integer, number


class _Deprecated(argparse.Action):
    """Store like the canonical option, and say once that the spelling is going away."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: Any) -> None:
        self.canonical: str = kwargs.pop("canonical")
        self.flag: bool = kwargs.pop("flag")
        super().__init__(option_strings, dest, nargs=0 if self.flag else None, **kwargs)

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        setattr(namespace, self.dest, True if self.flag else values)
        print(
            f"{parser.prog}: {option_string} is now spelled {self.canonical}; the old spelling "
            "goes away in the next release.",
            file=sys.stderr,
        )


def add_alias(
    parser: argparse.ArgumentParser,
    old: str,
    canonical: str,
    *,
    dest: str,
    flag: bool = False,
    **kwargs: Any,
) -> None:
    """Accept ``old`` as a hidden spelling of ``canonical`` (stored in ``dest``); ``flag`` for a
    store-true option; ``kwargs`` (``type``, ``choices``, ``metavar``) as the canonical's."""
    parser.add_argument(
        old,
        dest=dest,
        action=_Deprecated,
        canonical=canonical,
        flag=flag,
        default=argparse.SUPPRESS,
        help=argparse.SUPPRESS,
        **kwargs,
    )


def number_flag(
    *,
    low: float | None = None,
    high: float | None = None,
    positive: bool = False,
    fix: str | None = None,
) -> Callable[[str], float]:
    """An argparse ``type`` for a finite number within the bounds (``positive``: > 0)."""
    expected = expected_number(low=low, high=high, positive=positive)

    def parse(text: str) -> float:
        try:
            value: Any = float(text)
        except ValueError:
            value = text
        try:
            return number(
                value,
                name=None,
                where="",
                fix="",
                low=low,
                high=high,
                positive=positive,
                given=_as_typed(text),
            )
        except UsageError as exc:
            raise argparse.ArgumentTypeError(_with_fix(exc.what, fix, expected)) from None

    parse.__name__ = "number"
    return parse


def integer_flag(
    *, low: int | None = None, high: int | None = None, fix: str | None = None
) -> Callable[[str], int]:
    """An argparse ``type`` for an integer within the bounds and 64 bits."""
    expected = expected_integer(low=low, high=high)

    def parse(text: str) -> int:
        try:
            value: Any = int(text)
        except ValueError:
            value = text
        try:
            return integer(
                value, name=None, where="", fix="", low=low, high=high, given=_as_typed(text)
            )
        except UsageError as exc:
            raise argparse.ArgumentTypeError(_with_fix(exc.what, fix, expected)) from None

    parse.__name__ = "integer"
    return parse


def _as_typed(text: str) -> str:
    return text if len(text) <= 40 else f"{len(text)} characters"


def _with_fix(what: str, fix: str | None, expected: str) -> str:
    return f"{what}; {fix or f'give {expected}'}"


# A path that names a standard stream: stdin where a command reads, stdout where it writes.
STREAM = "-"


def is_stdout(path: object) -> bool:
    """``path`` is ``-``: the output file goes to standard output."""
    return path is not None and str(path) == STREAM


def output_dir(text: str) -> Path:
    """An argparse ``type`` for a directory a command writes files into: ``-`` (a stream, not
    a directory) and an empty path are refused, exit 2, with the flag named."""
    if text == STREAM:
        raise argparse.ArgumentTypeError(
            "- (standard output) cannot take a directory of files; give a directory (./- for "
            "one named -)"
        )
    if not text:
        raise argparse.ArgumentTypeError(
            "an empty path (a variable left unset?); give the directory to write into"
        )
    return Path(text)
