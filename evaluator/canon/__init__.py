"""Canonical parsing of chain-of-thought text (pure; cached for speed).

Public API: :func:`parse_cot` (whole CoT), :func:`read_step` (one step),
:func:`split_steps`, :func:`split_cot_sentences`, :func:`output_steps`,
:func:`extract_true_false_answer`, and the records
:class:`CotStep`, :class:`StepReading`, :class:`Clause`, :class:`ParsedStep`, :class:`ParsedCot`.
See ``docs/parsing.md``.
"""

from evaluator.canon.clause import canonical_name, read_clause
from evaluator.canon.cot import ParsedCot, ParsedStep, parse_cot
from evaluator.canon.step import CATEGORIES, Clause, StepReading, cited_premises, read_step
from evaluator.canon.text import (
    CotStep,
    extract_true_false_answer,
    output_steps,
    split_cot_sentences,
    split_steps,
)


def clear_caches() -> None:
    """Empty the parser's memo caches (benchmarks measure cold parsing with it)."""
    from evaluator.canon.clause import read_clause as _clause
    from evaluator.canon.step import _premise_props, _read, _strip_leader

    _read.cache_clear()
    _premise_props.cache_clear()
    _strip_leader.cache_clear()
    _clause.cache_clear()


__all__ = [
    "CATEGORIES",
    "Clause",
    "CotStep",
    "ParsedCot",
    "ParsedStep",
    "StepReading",
    "canonical_name",
    "cited_premises",
    "clear_caches",
    "extract_true_false_answer",
    "output_steps",
    "parse_cot",
    "read_clause",
    "read_step",
    "split_cot_sentences",
    "split_steps",
]
