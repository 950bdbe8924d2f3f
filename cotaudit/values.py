"""Checks of the numbers a user writes (config keys, task tables, flags), and how any value a
user wrote is shown back in a message.

TOML, JSON and ``float()`` accept values the runner cannot use: ``nan`` and ``inf`` (a rate of
``nan`` never paces, a timeout of ``inf`` never fires), and integers of any size (orjson, which
writes every record and hashes every request, refuses one past 64 bits). :func:`number` and
:func:`integer` refuse them where they are read, with the key or flag named; the config
loader, the task tables and the command-line types (``cotaudit.flags``) all call these two, so
every bad number is reported the same way.

:func:`shown` puts a value in the user's terms rather than Python's: TOML's (or JSON's) type
names and spelling (``true``, ``["a"]``, ``nan``, "a table"), the value itself where short.
"""

from __future__ import annotations

import datetime
import difflib
import math
from collections.abc import Iterable, Mapping
from typing import Any

from cotaudit.constants import INT_MAX, INT_MIN
from cotaudit.errors import UsageError

_SHORT = 40  # characters: a longer value is described, not repeated


def nearest(word: object, choices: Iterable[str]) -> str | None:
    """The one of ``choices`` that ``word`` is most likely a misspelling of, if any is close
    (``max_concurency`` -> ``max_concurrency``), for a "Did you mean ...?" in a message."""
    if not isinstance(word, str):  # a key of a mapping made in Python may be anything
        return None
    close = difflib.get_close_matches(word, sorted(choices), n=1, cutoff=0.75)
    return close[0] if close else None


def shown(value: Any, *, json: bool = False) -> str:
    """``value`` as written in a TOML file (``json``: a JSON one), for "got ..." in a message.

    A string, a list or a table is named by its type (``the string "fast"``, ``the list
    ["a"]``, ``a table``), so that a value of the wrong type reads as one; a number or a
    boolean is its spelling alone. Long values are described by their size.
    """
    if value is None:
        return "null" if json else "no value"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        text = str(value)
        return text if len(text) <= _SHORT else f"an integer of {len(text.lstrip('-'))} digits"
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return repr(value)
    if isinstance(value, str):
        written = _spelled(value)
        return f"the string {written}" if written else f"a string of {len(value)} characters"
    if isinstance(value, list | tuple):
        written = _spelled(value)
        if written:
            return f"the list {written}"
        return f"a list of {len(value)} item{'s' if len(value) != 1 else ''}"
    if isinstance(value, Mapping):
        return "an object" if json else "a table"
    if isinstance(value, datetime.datetime):
        return f"the date-time {value.isoformat()}"
    if isinstance(value, datetime.date):
        return f"the date {value.isoformat()}"
    if isinstance(value, datetime.time):
        return f"the time {value.isoformat()}"
    return f"a {type(value).__name__}"


def _spelled(value: Any) -> str | None:
    """The TOML spelling of a string, number, boolean or list of them; None past ``_SHORT``."""
    if isinstance(value, str):
        if len(value) > _SHORT:
            return None
        escaped = value.replace("\\", "\\\\").replace('"', '\\"')
        escaped = escaped.replace("\n", "\\n").replace("\r", "\\r").replace("\t", "\\t")
        return f'"{escaped}"'
    if isinstance(value, bool | int | float):
        text = shown(value)
        return text if " " not in text else None
    if isinstance(value, list | tuple):
        parts = [_spelled(item) for item in value]
        if any(part is None for part in parts):
            return None
        text = f"[{', '.join(part for part in parts if part is not None)}]"
        return text if len(text) <= _SHORT else None
    return None


def _bound(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else repr(float(x))


def expected_number(
    *, low: float | None = None, high: float | None = None, positive: bool = False
) -> str:
    """What :func:`number` accepts, in words: ``a number > 0``, ``a number in [0, 1]``."""
    if positive:
        return "a number > 0" if high is None else f"a number > 0 and <= {_bound(high)}"
    if low is not None and high is not None:
        return f"a number in [{_bound(low)}, {_bound(high)}]"
    if low is not None:
        return f"a number >= {_bound(low)}"
    if high is not None:
        return f"a number <= {_bound(high)}"
    return "a number"


def expected_integer(*, low: int | None = None, high: int | None = None) -> str:
    """What :func:`integer` accepts, in words: ``an integer >= 1``, ``an integer in [0, 9]``."""
    if low is not None and high is not None:
        return f"an integer in [{low}, {high}]"
    if low is not None:
        return f"an integer >= {low}"
    if high is not None:
        return f"an integer <= {high}"
    return "an integer"


def number(
    value: Any,
    *,
    name: str | None,
    where: str,
    fix: str,
    low: float | None = None,
    high: float | None = None,
    positive: bool = False,
    given: str | None = None,
) -> float:
    """``value`` as a finite float within the bounds (``positive``: > 0), else ``UsageError``.

    An integer is accepted (``timeout_s = 120``), a boolean is not. ``name`` (the key, quoted
    as the message shows it) starts the message; ``given`` replaces :func:`shown` of the value
    (a flag shows its text as typed).
    """
    expected = expected_number(low=low, high=high, positive=positive)
    ok = isinstance(value, int | float) and not isinstance(value, bool)
    if ok and not (isinstance(value, int) or math.isfinite(value)):
        raise _refused(name, f"a finite {expected[2:]}", value, given, where, fix)
    if ok and isinstance(value, int) and not INT_MIN <= value <= INT_MAX:
        ok = False  # float() of it would round, and nothing the runner times is this long
    if ok and (
        (positive and not value > 0)
        or (low is not None and value < low)
        or (high is not None and value > high)
    ):
        ok = False
    if not ok:
        raise _refused(name, expected, value, given, where, fix)
    return float(value)


def integer(
    value: Any,
    *,
    name: str | None,
    where: str,
    fix: str,
    low: int | None = None,
    high: int | None = None,
    given: str | None = None,
    alternative: str | None = None,
) -> int:
    """``value`` as an integer within the bounds and 64 bits, else ``UsageError``.

    A float (``2.5``, ``5.0``) and a boolean are refused: TOML writes an integer without a
    point. ``name``, ``given``: as for :func:`number`; ``alternative`` is the other value the
    caller accepts, for the message (``'"auto"'``: ``"auto" or an integer >= 1``).
    """
    expected = expected_integer(low=low, high=high)
    if alternative is not None:
        expected = f"{alternative} or {expected}"
    if isinstance(value, int) and not isinstance(value, bool):
        bounded = (value > 0 and high is not None) or (value < 0 and low is not None)
        if not INT_MIN <= value <= INT_MAX and not bounded:  # the bound says it all otherwise
            if low is None and high is None and alternative is None:
                bits = f"an integer in [{INT_MIN}, {INT_MAX}] (64 bits)"
            else:
                edge = f"<= {INT_MAX}" if value > 0 else f">= {INT_MIN}"
                bits = f"{expected} and {edge} (64 bits)"
            raise _refused(name, bits, value, given, where, fix)
        if (low is None or value >= low) and (high is None or value <= high):
            return value
    raise _refused(name, expected, value, given, where, fix)


def _refused(
    name: str | None, expected: str, value: Any, given: str | None, where: str, fix: str
) -> UsageError:
    subject = f"{name} must be" if name else "must be"
    return UsageError(
        f"{subject} {expected}, got {given if given is not None else shown(value)}",
        where=where,
        fix=fix,
    )
