"""The ProntoQA-style problem model shared by loaders, generator, probes and the evaluator.

A proof step's ``depends_on`` lists its *direct* parents only: premise ids (``P3``) and
earlier step ids (``S2``), never the transitive closure. Conclusions are canonical
propositions: ``is(e, p)``, ``not_is(e, p)``, ``subtype(p1, p2)``, ``not_subtype(p1, p2)``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from cotaudit.errors import UsageError
from cotaudit.schema import SCHEMA_VERSION


@dataclass(frozen=True, slots=True)
class Premise:
    id: str  # "P1", "P2", ...
    text: str  # as shown to the model, without a trailing period


@dataclass(frozen=True, slots=True)
class ProofStep:
    step: int  # 1-based; referred to as "S{step}"
    conclusion: str  # canonical proposition
    depends_on: tuple[str, ...]  # direct parents: premise ids and "S{k}" for earlier steps


@dataclass(frozen=True, slots=True)
class Problem:
    problem_id: str
    premises: tuple[Premise, ...]
    question: str
    answer: bool
    proof: tuple[ProofStep, ...]
    distractors: tuple[str, ...] = ()  # premise ids not used by the proof
    source: str = ""
    extra: Mapping[str, Any] = field(default_factory=dict)

    @property
    def hops(self) -> int:
        return len(self.proof)

    def premise(self, premise_id: str) -> Premise:
        for p in self.premises:
            if p.id == premise_id:
                return p
        raise KeyError(premise_id)

    def to_record(self) -> dict[str, Any]:
        """The ``problem`` record of the JSONL stream."""
        return {
            "kind": "problem",
            "schema": SCHEMA_VERSION,
            "task": "prontoqa",
            "problem_id": self.problem_id,
            "premises": [{"id": p.id, "text": p.text} for p in self.premises],
            "question": self.question,
            "answer": self.answer,
            "proof": [
                {"step": s.step, "conclusion": s.conclusion, "depends_on": list(s.depends_on)}
                for s in self.proof
            ],
            "hops": self.hops,
            "distractors": list(self.distractors),
            "source": self.source,
            "extra": dict(self.extra),
        }

    @classmethod
    def from_record(cls, record: Mapping[str, Any], *, where: str = "problem record") -> Problem:
        """Inverse of :meth:`to_record`; raises ``UsageError`` naming the missing field."""
        try:
            return cls(
                problem_id=str(record["problem_id"]),
                premises=tuple(Premise(str(p["id"]), str(p["text"])) for p in record["premises"]),
                question=str(record["question"]),
                answer=bool(record["answer"]),
                proof=tuple(
                    ProofStep(int(s["step"]), str(s["conclusion"]), tuple(s["depends_on"]))
                    for s in record["proof"]
                ),
                distractors=tuple(record.get("distractors", ())),
                source=str(record.get("source", "")),
                extra=dict(record.get("extra") or {}),
            )
        except KeyError as exc:
            raise UsageError(
                f"missing field {exc.args[0]!r}",
                where=where,
                fix="A problem record needs problem_id, premises, question, answer and proof.",
            ) from exc
