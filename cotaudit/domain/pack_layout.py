"""Where the paper's evidence pack keeps what both halves read: the problems
(``data/prontoqa_50/``, imported by the runner) and each model's evidence
(``evidence/MODEL/``: the outputs the runner imports and replays, the certificates the
evaluator rescores). One place, so that both halves name the same models and read an
output's token counts alike (``import-evidence`` and ``serve --replay``)."""

from __future__ import annotations

import codecs
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import orjson

from cotaudit.errors import UsageError
from cotaudit.schema import JSONDict
from cotaudit.values import shown

EVIDENCE_DIRNAME = "evidence"
PROBLEMS_DIR = Path("data") / "prontoqa_50"


def pack_json(data: bytes) -> Any:
    """A pack file's bytes parsed as JSON, read as ``utf-8-sig``: a UTF-8 byte order mark at
    the start (a Windows editor writes one on saving) is no part of the document, and every
    reader of a pack skips it alike (``import-evidence``, ``reproduce``, ``serve --replay``,
    ``rescore``, the task's problem files). Raises ``orjson.JSONDecodeError``."""
    return orjson.loads(data[len(codecs.BOM_UTF8) :] if data.startswith(codecs.BOM_UTF8) else data)


def pack_models(pack: Path) -> list[str]:
    """The models a pack has evidence for (its ``evidence/MODEL/`` directories), sorted."""
    evidence = pack / EVIDENCE_DIRNAME
    if not evidence.is_dir():
        return []
    return sorted(p.name for p in evidence.iterdir() if p.is_dir())


_USAGE_FIX = (
    "Token counts are non-negative integers (prompt_tokens, completion_tokens, total_tokens, "
    "and objects of them such as completion_tokens_details); restore the file from the pack."
)


def pack_usage(output: Mapping[str, Any], path: Path) -> JSONDict | None:
    """The output's recorded ``usage``, kept as the pack has it (OpenAI's names), or None
    where it records none.

    Refused where a figure is not a count (``UsageError`` naming the file and the figure):
    the stream's readers sum the counts per endpoint (``cotaudit view``), and a string there
    stops them while a negative or fractional count is summed without a word.
    """
    usage = output.get("usage")
    if usage is None:
        return None
    if not isinstance(usage, dict):
        raise UsageError(
            f"{shown(usage, json=True)} is not an object of token counts",
            where=f"{path}: usage",
            fix=_USAGE_FIX,
        )
    for key, value in usage.items():
        # One level down: OpenAI reports details (cached, reasoning tokens) as objects.
        figures = value.items() if isinstance(value, dict) else [(None, value)]
        for inner, count in figures:
            if not isinstance(count, int) or isinstance(count, bool) or count < 0:
                name = key if inner is None else f"{key}.{inner}"
                raise UsageError(
                    f"{shown(count, json=True)} is not a token count",
                    where=f"{path}: usage.{name}",
                    fix=_USAGE_FIX,
                )
    return usage
