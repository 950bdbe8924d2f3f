"""Validators for a task's ``[task]`` table, shared by the task kinds.

Each raises ``UsageError`` naming the config file, ``[task].<key>`` and an accepted value, so
every task kind reports a bad key the same way.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from cotaudit.errors import UsageError
from cotaudit.values import integer, nearest, number, shown


def task_keys(
    table: Mapping[str, Any],
    allowed: frozenset[str],
    where: str,
    *,
    kind: str,
    elsewhere: tuple[frozenset[str], str] | None = None,
) -> None:
    """Refuse a key of ``table`` that ``allowed`` lacks, naming the nearest accepted one (a
    typo) or, for a key of ``elsewhere``'s set, the setting it belongs to (``kind`` and
    ``elsewhere``'s label read as ``source = "generate"``)."""
    unknown = sorted(set(table) - allowed, key=str)  # a Python mapping: any keys
    if not unknown:
        return
    key = unknown[0]
    hint = ""
    if elsewhere is not None and key in elsewhere[0]:
        hint = f" ({key!r} applies to {elsewhere[1]}, not to {kind})"
    accepted = f"Accepted keys for {kind}: {', '.join(sorted(allowed))}."
    close = nearest(key, allowed) if not hint else None
    raise UsageError(
        f"unknown key {key!r}{hint}",
        where=f"{where}: [task].{key}",
        fix=f"Did you mean {close!r}? {accepted}" if close else accepted,
    )


def task_int(table: Mapping[str, Any], key: str, default: int, where: str, *, minimum: int) -> int:
    """``table[key]`` (``default`` when absent) as an integer >= ``minimum`` (64 bits)."""
    return integer(
        table.get(key, default),
        name=repr(key),
        where=f"{where}: [task].{key}",
        fix=f"Set {key} = {max(minimum, default)} or another integer >= {minimum}.",
        low=minimum,
    )


def task_number(
    table: Mapping[str, Any],
    key: str,
    default: float,
    where: str,
    *,
    low: float,
    high: float,
    example: float,
) -> float:
    """``table[key]`` (``default`` when absent) as a finite number in [``low``, ``high``]."""
    return number(
        table.get(key, default),
        name=repr(key),
        where=f"{where}: [task].{key}",
        fix=f"Set {key} = {example}.",
        low=low,
        high=high,
    )


def task_path(
    table: Mapping[str, Any],
    key: str,
    config_dir: Path,
    where: str,
    *,
    points_at: str = "the data (see ../shared/data/README.md)",
    file: bool = False,
) -> Path:
    """``table[key]`` as an existing path (a file, with ``file``); a relative path is taken from
    the config's folder. ``points_at`` says what the key should name, for the messages."""
    value = table.get(key)
    if value is None:
        raise UsageError(
            f"missing {key!r}",
            where=f"{where}: [task].{key}",
            fix=f'Set {key} = "some/path" (relative to the config file) naming {points_at}.',
        )
    if not isinstance(value, str) or not value.strip():
        raise UsageError(
            f"{key!r} must be a path string, got {shown(value)}",
            where=f"{where}: [task].{key}",
            fix=f'Set {key} = "some/path" (relative to the config file).',
        )
    path = Path(value).expanduser()
    path = path if path.is_absolute() else config_dir / path
    if not (path.is_file() if file else path.exists()):
        problem = "is not a file" if path.exists() else "does not exist"
        raise UsageError(
            f"{path} {problem}",
            where=f"{where}: [task].{key}",
            fix=f"Point {key} at {points_at}.",
        )
    return path
