"""The layout of a run directory: the names both halves agree on."""

from __future__ import annotations

RESULTS_NAME = "results.jsonl"  # the stream
MANIFEST_NAME = "manifest.json"  # which config the run directory belongs to
EVAL_DIRNAME = "eval"  # what `cotaudit evaluate` writes by default
