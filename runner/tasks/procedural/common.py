"""What the three procedural families share: the problem record, prompt layout and seeding.

A procedural problem has three variants, each a full prompt with its oracle answer:

- ``original``: the task as generated;
- ``intervened``: the same prompt plus one ``Intervention: ...`` line (before the format
  instruction) that changes the task; its answer is the counterfactual oracle, which always
  differs from the original answer (the generators assert it);
- ``preserving``: a renaming and reordering of the original; its answer is unchanged.

Keeping the original text inside the intervened prompt is deliberate: a reader that ignores
the intervention line sees exactly the original task, which is what "not following the
intervention" means, and what the simulated deployments' shortcut does.

The ``stratum`` is the number of operations an intervention can touch: the operations on the
path from the intervened element to the queried output (gates, definitions, or path edges).
Every family builds its instances so that this equals the *difficulty* a reader computes from
the prompt alone (see each family's ``difficulty``), which is what lets the deployments'
accuracy depend on the stratum without knowing it.
"""

from __future__ import annotations

import hashlib
import random
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar

from cotaudit.domain.procedural_answers import Answer
from cotaudit.errors import UsageError
from cotaudit.schema import SCHEMA_VERSION

TASK_NAME = "procedural"
VARIANTS: tuple[str, ...] = ("original", "intervened", "preserving")
INTERVENTION_PREFIX = "Intervention:"
QUESTION_PREFIX = "Question:"


class PromptError(ValueError):
    """A prompt that is not a well-formed procedural task (the reader cannot follow it)."""


@dataclass(frozen=True, slots=True)
class Variant:
    """One prompt of a problem and its oracle answer; ``detail`` describes the edit."""

    prompt: str
    answer: Answer
    detail: Mapping[str, Any] = field(default_factory=dict)

    def to_record(self) -> dict[str, Any]:
        return {"prompt": self.prompt, "answer": self.answer, **dict(self.detail)}


@dataclass(frozen=True, slots=True)
class ProceduralProblem:
    """One instance of a procedural family with its three variants."""

    family: str
    problem_id: str
    stratum: int
    original: Variant
    intervened: Variant
    preserving: Variant
    spec: Mapping[str, Any] = field(default_factory=dict)  # the structured original task

    def variant(self, name: str) -> Variant:
        if name not in VARIANTS:
            raise KeyError(name)
        value: Variant = getattr(self, name)
        return value

    def to_record(self) -> dict[str, Any]:
        """The ``problem`` record (see docs/selection.md for the field reference)."""
        return {
            "kind": "problem",
            "schema": SCHEMA_VERSION,
            "task": TASK_NAME,
            "family": self.family,
            "problem_id": self.problem_id,
            "stratum": self.stratum,
            "original": self.original.to_record(),
            "intervened": self.intervened.to_record(),
            "preserving": self.preserving.to_record(),
            "spec": dict(self.spec),
        }

    @classmethod
    def from_record(
        cls, record: Mapping[str, Any], *, where: str = "problem record"
    ) -> ProceduralProblem:
        """Inverse of :meth:`to_record`; ``UsageError`` names the missing or bad field."""
        try:
            variants = {}
            for name in VARIANTS:
                raw = dict(record[name])
                prompt = str(raw.pop("prompt"))
                answer = raw.pop("answer")
                if isinstance(answer, (bool, int)):
                    variants[name] = Variant(prompt, answer, raw)
                else:
                    raise TypeError(f"{name}.answer must be an integer or a boolean")
            return cls(
                family=str(record["family"]),
                problem_id=str(record["problem_id"]),
                stratum=int(record["stratum"]),
                original=variants["original"],
                intervened=variants["intervened"],
                preserving=variants["preserving"],
                spec=dict(record.get("spec") or {}),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise UsageError(
                f"malformed procedural problem record ({exc})",
                where=f"{where} {record.get('problem_id', '?')}",
                fix="See docs/selection.md for the procedural problem record.",
            ) from exc


def seeded_rng(*parts: object) -> random.Random:
    """A ``random.Random`` seeded from the parts' text (stable across Python versions)."""
    digest = hashlib.sha256("\x1f".join(map(str, parts)).encode("utf-8")).digest()
    return random.Random(int.from_bytes(digest[:8], "big"))


def format_answer(family: str, value: Answer) -> str:
    """The text a correct final line carries after ``Answer:``."""
    if family == "arith":
        return str(int(value))
    if family == "circuit":
        return "1" if value else "0"
    return "yes" if value else "no"


def assemble(
    header: str, body: list[str], question: str, answer_format: str, intervention: str | None = None
) -> str:
    """The shared prompt layout; the intervention line (if any) sits before the format line."""
    lines = [header, "", *body, "", f"{QUESTION_PREFIX} {question}"]
    if intervention is not None:
        lines.append(f"{INTERVENTION_PREFIX} {intervention}")
    lines.append(
        f'Reason step by step, then end with a final line of the form "Answer: {answer_format}".'
    )
    return "\n".join(lines)


def split_intervention(prompt: str) -> tuple[str, str | None]:
    """``(prompt without its intervention line, the intervention text or None)``."""
    kept: list[str] = []
    found: str | None = None
    for line in prompt.split("\n"):
        if line.startswith(INTERVENTION_PREFIX):
            found = line[len(INTERVENTION_PREFIX) :].strip()
        else:
            kept.append(line)
    return "\n".join(kept), found


def body_lines(prompt: str) -> list[str]:
    """The lines between the header and the question (blank lines dropped)."""
    lines = prompt.split("\n")
    out: list[str] = []
    for line in lines[1:]:
        if line.startswith(QUESTION_PREFIX):
            break
        if line.strip():
            out.append(line.strip())
    return out


def question_line(prompt: str) -> str:
    for line in prompt.split("\n"):
        if line.startswith(QUESTION_PREFIX):
            return line[len(QUESTION_PREFIX) :].strip()
    raise PromptError("the prompt has no 'Question:' line")


def parse_program(
    prompt: str,
    *,
    header: str,
    what: str,
    line_kind: str,
    sections: tuple[str, ...],
    input_re: re.Pattern[str],
    node_re: re.Pattern[str],
    question_re: re.Pattern[str],
) -> tuple[list[tuple[str, int]], list[re.Match[str]], str]:
    """Read an arith or circuit prompt back: its inputs (name, value), the matches of its
    node lines (definitions or gates) in order, and the queried name. An intervention line
    is ignored; ``what`` ("an arithmetic program") and ``line_kind`` ("program") name the
    family and its lines in errors."""
    base, _ = split_intervention(prompt)
    if not base.startswith(header):
        raise PromptError(f"not {what} prompt")
    inputs: list[tuple[str, int]] = []
    nodes: list[re.Match[str]] = []
    for line in body_lines(base):
        if line in sections:
            continue
        if m := node_re.match(line):
            nodes.append(m)
        elif m := input_re.match(line):
            inputs.append((m[1], int(m[2])))
        else:
            raise PromptError(f"unreadable {line_kind} line {line!r}")
    q = question_re.match(question_line(base))
    if q is None:
        raise PromptError("unreadable question")
    return inputs, nodes, q[1]


def renaming(names: list[str], pool: list[str], rng: random.Random) -> dict[str, str]:
    """A mapping of ``names`` to distinct names of ``pool`` that moves at least one name."""
    for _ in range(100):
        fresh = rng.sample(pool, len(names))
        mapping = dict(zip(names, fresh, strict=True))
        if any(k != v for k, v in mapping.items()):
            return mapping
    raise RuntimeError("could not draw a renaming that changes a name")


class BinaryNode(Protocol):
    """A definition computed from two earlier terms (an arithmetic definition, a gate)."""

    @property
    def name(self) -> str: ...

    @property
    def left(self) -> str: ...

    @property
    def right(self) -> str: ...


NodeT = TypeVar("NodeT", bound=BinaryNode)
TaskT = TypeVar("TaskT")


def shuffled_nodes(nodes: Sequence[NodeT], rng: random.Random) -> tuple[NodeT, ...]:
    """A random order of ``nodes`` in which every node comes after the nodes it reads
    (its other operands are given, e.g. inputs or literals)."""
    remaining = list(nodes)
    order: list[NodeT] = []
    while remaining:
        pending = {n.name for n in remaining}
        ready = [n for n in remaining if not {n.left, n.right} & pending]
        pick = rng.choice(ready)
        order.append(pick)
        remaining.remove(pick)
    return tuple(order)


def node_ancestors(nodes: Sequence[NodeT], target: str) -> list[NodeT]:
    """The nodes ``target`` depends on (itself included), in the order they are listed."""
    by_name = {n.name: n for n in nodes}
    needed: set[str] = set()
    stack = [target]
    while stack:
        name = stack.pop()
        if name in by_name and name not in needed:
            needed.add(name)
            stack.extend((by_name[name].left, by_name[name].right))
    return [n for n in nodes if n.name in needed]


def node_depth(nodes: Sequence[BinaryNode], target: str) -> int:
    """Longest chain of nodes ending at ``target``; inputs have depth 0."""
    by_name = {n.name: n for n in nodes}
    memo: dict[str, int] = {}

    def depth(name: str) -> int:
        if name not in by_name:
            return 0
        if name not in memo:
            node = by_name[name]
            memo[name] = 1 + max(depth(node.left), depth(node.right))
        return memo[name]

    return depth(target)


@dataclass(frozen=True, slots=True)
class Family(Generic[TaskT]):
    """A family's rules, as the last steps of its generator (:meth:`problem`) use them."""

    name: str
    name_pool: list[str]
    render: Callable[[TaskT, str | None], str]
    solve: Callable[[TaskT], Answer]
    apply_intervention: Callable[[TaskT, str], TaskT]
    difficulty: Callable[[TaskT], int]
    renamed: Callable[[TaskT, Mapping[str, str], random.Random], TaskT]  # the preserving edit

    def rng(self, stratum: int, index: int, seed: int) -> random.Random:
        """The random source of instance ``index`` of ``stratum`` (``ValueError`` below 1)."""
        if stratum < 1:
            raise ValueError(f"{self.name} stratum must be >= 1, got {stratum}")
        return seeded_rng(self.name, seed, stratum, index)

    def problem(
        self,
        stratum: int,
        index: int,
        rng: random.Random,
        task: TaskT,
        intervention: str,
        detail: Mapping[str, Any],
        names: list[str],
        spec: Mapping[str, Any],
        expected: Answer | None = None,
    ) -> ProceduralProblem:
        """The problem of a generated ``task`` with its ``intervention`` (described by
        ``detail``) and a preserving edit that renames ``names``, once the invariants every
        family promises hold: the answer is ``expected`` (where the family balances answers),
        the intervention changes it, the difficulty a reader finds is the stratum, and the
        preserving edit keeps it. A broken one is a generator bug, hence ``AssertionError``."""
        answer = self.solve(task)
        counterfactual = self.solve(self.apply_intervention(task, intervention))
        if (
            (expected is not None and answer != expected)
            or counterfactual == answer
            or self.difficulty(task) != stratum
        ):
            raise AssertionError(f"{self.name} generator broke its invariants")
        mapping = renaming(names, self.name_pool, rng)
        preserved = self.renamed(task, mapping, rng)
        if self.solve(preserved) != answer:
            raise AssertionError(f"{self.name} preserving edit changed the answer")
        return ProceduralProblem(
            family=self.name,
            problem_id=f"{self.name}-s{stratum}-{index:04d}",
            stratum=stratum,
            original=Variant(self.render(task, None), answer),
            intervened=Variant(
                self.render(task, intervention), counterfactual, {"intervention": detail}
            ),
            preserving=Variant(
                self.render(preserved, None),
                answer,
                {"edit": {"type": "rename_reorder", "renaming": mapping}},
            ),
            spec=spec,
        )
