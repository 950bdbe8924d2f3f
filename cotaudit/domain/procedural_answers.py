"""The answers of the selection study's procedural tasks, and reading them from model text.

The prompts ask for a last line ``Answer: <value>``. The reader takes the *last* line that
carries an ``Answer:`` label (case-insensitive, markdown emphasis and a trailing period
tolerated: ``**Answer:** 17.``) and reads its value strictly for the family: an integer for
``arith`` (``-12``, ``1,024``), ``1/0/true/false`` for ``circuit``, ``yes/no/true/false``
for ``reachability``. Anything else is a *failure* with a reason (``no answer line``,
``unreadable value``, ``empty text``); it is counted by the evaluator, never guessed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TypeAlias

Answer: TypeAlias = int | bool  # arith: int; circuit and reachability: bool

_LABEL = re.compile(r"^\W*(?:final\s+)?answer\W*?\s*[:：]\s*(.*)$", re.IGNORECASE)
_INT = re.compile(r"^[-+−]?\d{1,3}(?:,\d{3})+$|^[-+−]?\d+$")
_BINARY = {
    "circuit": {"1": True, "0": False, "true": True, "false": False},
    "reachability": {
        "yes": True,
        "no": False,
        "true": True,
        "false": False,
        "reachable": True,
        "unreachable": False,
        "not reachable": False,
    },
}


@dataclass(frozen=True, slots=True)
class Extraction:
    """An extracted answer, or ``value=None`` with the ``failure`` reason."""

    value: Answer | None
    failure: str | None = None
    raw: str | None = None  # the text after the label, as found

    @property
    def ok(self) -> bool:
        return self.failure is None


def _clean(value: str) -> str:
    value = value.strip().strip("*_`").strip()
    value = value.rstrip(".!").strip().strip("*_`\"'").strip()
    return value


def extract_procedural_answer(text: str | None, family: str) -> Extraction:
    """The final answer of ``text`` for ``family`` (see the module docstring)."""
    if family not in ("arith", *_BINARY):
        raise ValueError(f"unknown procedural family {family!r}")
    if not text or not text.strip():
        return Extraction(None, "empty text")
    raw: str | None = None
    for line in reversed(text.strip().split("\n")):
        m = _LABEL.match(line.strip())
        if m is not None:
            raw = m[1]
            break
    if raw is None:
        return Extraction(None, "no answer line")
    value = _clean(raw)
    if family == "arith":
        if _INT.match(value):
            return Extraction(int(value.replace(",", "").replace("−", "-")), None, raw)
        return Extraction(None, "unreadable value", raw)
    found = _BINARY[family].get(value.lower())
    if found is None:
        return Extraction(None, "unreadable value", raw)
    return Extraction(found, None, raw)
