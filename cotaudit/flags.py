"""Command-line conventions shared by every command: one name per idea, old spellings kept for
one release as hidden aliases that say what the new name is (docs/command-line.md).

An alias is an ordinary argparse option with ``help=argparse.SUPPRESS`` (absent from
``--help``) and the canonical option's ``dest``, so the command reads one attribute whichever
spelling was used; using it prints one line on standard error naming the new spelling.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any


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
