"""Reasoning traces side by side: the answer's audit beside the reasoning trace's.

Filled in below (``--trace both``).
"""

from __future__ import annotations

from cotaudit.schema import JSONDict
from evaluator.pipeline import EvaluateOptions


def add_trace_comparison(report: JSONDict, options: EvaluateOptions) -> None:
    """Add the ``traces`` section of a ``--trace both`` evaluation."""


def render_trace_comparison(report: JSONDict) -> str:
    """The report.md section comparing the traces ("" when there is none)."""
    return ""
