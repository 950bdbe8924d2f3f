"""Where the paper's evidence pack keeps what both halves read: the problems
(``data/prontoqa_50/``, imported by the runner) and each model's evidence
(``evidence/MODEL/``: the outputs the runner imports and replays, the certificates the
evaluator rescores). One place, so that both halves name the same models."""

from __future__ import annotations

from pathlib import Path

EVIDENCE_DIRNAME = "evidence"
PROBLEMS_DIR = Path("data") / "prontoqa_50"


def pack_models(pack: Path) -> list[str]:
    """The models a pack has evidence for (its ``evidence/MODEL/`` directories), sorted."""
    evidence = pack / EVIDENCE_DIRNAME
    if not evidence.is_dir():
        return []
    return sorted(p.name for p in evidence.iterdir() if p.is_dir())
