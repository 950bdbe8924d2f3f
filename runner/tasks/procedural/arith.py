"""Arithmetic DAG: named variables computed from inputs and earlier variables.

The prompt lists ``Inputs:`` (``a = 4``) and ``Definitions:`` (``c = a + b``, operators
``+ - *``, operands a variable or an integer literal) and asks for one variable's value.

An instance of stratum ``s`` is built around a *chain* of ``s`` definitions from one input
``x0`` to the queried variable, each combining the previous value with a fresh input or a
literal (multiplication only by the literals 2 or 3). Distractor definitions never feed the
queried variable and never read ``x0``. The intervention sets ``x0`` to another value: the
answer is affine in ``x0`` with a positive coefficient, so it always changes, and the
intervention touches exactly the ``s`` chain definitions. The preserving edit renames every
variable and reorders inputs and definitions (dependencies first).
"""

from __future__ import annotations

import random
import re
from collections.abc import Mapping
from dataclasses import dataclass, replace

from runner.tasks.procedural.common import (
    Family,
    ProceduralProblem,
    PromptError,
    assemble,
    node_ancestors,
    node_depth,
    parse_program,
    shuffled_nodes,
)

FAMILY = "arith"
HEADER = "Task: evaluate an arithmetic program."
ANSWER_FORMAT = "<integer>"
_LETTERS = [chr(c) for c in range(ord("a"), ord("z") + 1)]
NAME_POOL = _LETTERS + [f"{c}{c}" for c in _LETTERS]
_NAME = r"[a-z]+[0-9]*"
_TERM = rf"(?:{_NAME}|-?\d+)"
_INPUT_RE = re.compile(rf"^({_NAME}) = (-?\d+)$")
_DEF_RE = re.compile(rf"^({_NAME}) = ({_TERM}) ([-+*]) ({_TERM})$")
_QUESTION_RE = re.compile(rf"^What is the value of ({_NAME})\?$")
_SET_RE = re.compile(rf"^set ({_NAME}) = (-?\d+) \(instead of (-?\d+)\)")


@dataclass(frozen=True, slots=True)
class Definition:
    name: str
    left: str  # a variable name or an integer literal, as written
    op: str  # "+", "-" or "*"
    right: str


@dataclass(frozen=True, slots=True)
class ArithTask:
    inputs: tuple[tuple[str, int], ...]
    definitions: tuple[Definition, ...]
    target: str


def _is_literal(term: str) -> bool:
    return bool(re.fullmatch(r"-?\d+", term))


def _apply(op: str, x: int, y: int) -> int:
    if op == "+":
        return x + y
    if op == "-":
        return x - y
    return x * y


def evaluate(task: ArithTask) -> dict[str, int]:
    """Every variable's value; raises ``PromptError`` for an undefined or cyclic name."""
    values = dict(task.inputs)
    pending = list(task.definitions)
    while pending:
        progressed = False
        for d in list(pending):
            terms = [d.left, d.right]
            if all(_is_literal(t) or t in values for t in terms):
                x, y = (int(t) if _is_literal(t) else values[t] for t in terms)
                values[d.name] = _apply(d.op, x, y)
                pending.remove(d)
                progressed = True
        if not progressed:
            raise PromptError(f"undefined or cyclic variables: {[d.name for d in pending]}")
    if task.target not in values:
        raise PromptError(f"the queried variable {task.target!r} is not defined")
    return values


def solve(task: ArithTask) -> int:
    return evaluate(task)[task.target]


def ancestors(task: ArithTask) -> list[Definition]:
    """The definitions the queried variable depends on, in the order they are listed."""
    return node_ancestors(task.definitions, task.target)


def difficulty(task: ArithTask) -> int:
    """Longest chain of definitions ending at the queried variable (= the stratum)."""
    return node_depth(task.definitions, task.target)


def render(task: ArithTask, intervention: str | None = None) -> str:
    body = ["Inputs:", *(f"{n} = {v}" for n, v in task.inputs), "Definitions:"]
    body += [f"{d.name} = {d.left} {d.op} {d.right}" for d in task.definitions]
    return assemble(
        HEADER, body, f"What is the value of {task.target}?", ANSWER_FORMAT, intervention
    )


def parse(prompt: str) -> ArithTask:
    """Read the task back from a prompt (an intervention line is ignored here)."""
    inputs, nodes, target = parse_program(
        prompt,
        header=HEADER,
        what="an arithmetic program",
        line_kind="program",
        sections=("Inputs:", "Definitions:"),
        input_re=_INPUT_RE,
        node_re=_DEF_RE,
        question_re=_QUESTION_RE,
    )
    definitions = tuple(Definition(m[1], m[2], m[3], m[4]) for m in nodes)
    return ArithTask(tuple(inputs), definitions, target)


def intervention_text(name: str, new: int, old: int) -> str:
    return f"set {name} = {new} (instead of {old}); everything else stays as defined."


def apply_intervention(task: ArithTask, text: str) -> ArithTask:
    m = _SET_RE.match(text)
    if m is None or m[1] not in dict(task.inputs):
        raise PromptError(f"unreadable intervention {text!r}")
    value = int(m[2])
    return replace(task, inputs=tuple((n, value if n == m[1] else v) for n, v in task.inputs))


def worked_steps(task: ArithTask, slip_at: int | None = None, slip: int = 0) -> list[str]:
    """Lines of a rule-following derivation; ``slip`` is added at step ``slip_at``."""
    values = dict(task.inputs)
    lines = []
    for i, d in enumerate(ancestors(task)):
        x, y = (int(t) if _is_literal(t) else values[t] for t in (d.left, d.right))
        result = _apply(d.op, x, y) + (slip if i == slip_at else 0)
        values[d.name] = result
        lines.append(f"{d.name} = {d.left} {d.op} {d.right} = {x} {d.op} {y} = {result}")
    lines.append(f"So {task.target} = {values[task.target]}.")
    return lines


def derived_answer(task: ArithTask, slip_at: int | None = None, slip: int = 0) -> int:
    """The final value of :func:`worked_steps` with the same slip."""
    line = worked_steps(task, slip_at, slip)[-1]
    return int(line.rsplit("=", 1)[1].strip(" ."))


def generate(stratum: int, index: int, seed: int) -> ProceduralProblem:
    """Instance ``index`` of stratum ``stratum`` (pure function of its arguments)."""
    rng = _RULES.rng(stratum, index, seed)
    names = iter(rng.sample(NAME_POOL, len(NAME_POOL)))
    x0 = next(names)
    inputs: dict[str, int] = {x0: rng.randint(1, 9)}
    defs: list[Definition] = []
    prev = x0
    for _ in range(stratum):
        name = next(names)
        if rng.random() < 0.2:
            op, other = "*", str(rng.choice((2, 3)))
        else:
            op = rng.choice("+-")
            if rng.random() < 0.6:
                other = next(names)
                inputs[other] = rng.randint(1, 9)
            else:
                other = str(rng.randint(1, 9))
        defs.append(Definition(name, prev, op, other))
        prev = name
    target = prev
    spare = next(names)
    inputs[spare] = rng.randint(1, 9)
    pool = [n for n in inputs if n != x0]
    for _ in range(rng.randint(1, 2)):
        name = next(names)
        left, right = rng.choice(pool), rng.choice([*pool, str(rng.randint(1, 9))])
        defs.append(Definition(name, left, rng.choice("+-*"), right))
        pool.append(name)
    definitions = shuffled_nodes(defs, rng)
    input_order = rng.sample(list(inputs), len(inputs))
    task = ArithTask(tuple((n, inputs[n]) for n in input_order), definitions, target)
    new = rng.choice([v for v in range(1, 10) if v != inputs[x0]])
    text = intervention_text(x0, new, inputs[x0])
    detail = {"type": "set_input", "target": x0, "from": inputs[x0], "to": new}
    names_used = [*inputs, *(d.name for d in defs)]
    return _RULES.problem(stratum, index, rng, task, text, detail, names_used, _spec(task))


def _renamed(task: ArithTask, mapping: Mapping[str, str], rng: random.Random) -> ArithTask:
    def r(term: str) -> str:
        return mapping.get(term, term)

    defs = [Definition(r(d.name), r(d.left), d.op, r(d.right)) for d in task.definitions]
    definitions = shuffled_nodes(defs, rng)
    inputs = [(r(n), v) for n, v in task.inputs]
    rng.shuffle(inputs)
    return ArithTask(tuple(inputs), definitions, r(task.target))


def _spec(task: ArithTask) -> dict[str, object]:
    return {
        "inputs": [[n, v] for n, v in task.inputs],
        "definitions": [[d.name, d.left, d.op, d.right] for d in task.definitions],
        "target": task.target,
    }


_RULES = Family(FAMILY, NAME_POOL, render, solve, apply_intervention, difficulty, _renamed)
