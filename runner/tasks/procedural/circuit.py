"""Boolean circuit: gates over 0/1 inputs; the question asks for one gate's value.

The prompt lists ``Inputs:`` (``x = 1``) and ``Gates:`` (``g = AND(x, y)``; AND, OR, XOR,
NAND, NOR). An instance of stratum ``s`` is built around a *sensitive chain* of ``s`` gates
from one input ``x0`` to the queried gate: each chain gate combines the previous value with
a fresh input set to its non-controlling value (1 for AND/NAND, 0 for OR/NOR, anything for
XOR), so every chain gate passes a change of its chain operand through. Distractor gates
never feed the queried gate and never read ``x0``.

Interventions alternate by instance index: flip ``x0`` (the output flips, because the chain
is sensitive) or replace the first chain gate by another gate type whose value differs on the
current operands (the output flips for the same reason). Both touch exactly the ``s`` chain
gates. Answers are balanced: ``x0`` is chosen so that instance ``index`` has answer
``index % 2 == 0``. The preserving edit renames every signal and reorders the listing.
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

FAMILY = "circuit"
HEADER = "Task: evaluate a boolean circuit."
ANSWER_FORMAT = "1 or 0"
GATES: dict[str, tuple[int, int, int, int]] = {  # outputs for inputs 00, 01, 10, 11
    "AND": (0, 0, 0, 1),
    "OR": (0, 1, 1, 1),
    "XOR": (0, 1, 1, 0),
    "NAND": (1, 1, 1, 0),
    "NOR": (1, 0, 0, 0),
}
_NON_CONTROLLING = {"AND": 1, "NAND": 1, "OR": 0, "NOR": 0}
NAME_POOL = [f"{p}{i}" for p in ("x", "y", "g", "h") for i in range(1, 21)]
_NAME = r"[a-z]+[0-9]+"
_INPUT_RE = re.compile(rf"^({_NAME}) = ([01])$")
_GATE_RE = re.compile(rf"^({_NAME}) = ([A-Z]+)\(({_NAME}), ({_NAME})\)$")
_QUESTION_RE = re.compile(rf"^What is the value of ({_NAME})\?$")
_FLIP_RE = re.compile(rf"^set ({_NAME}) = ([01]) \(instead of [01]\)")
_SWAP_RE = re.compile(rf"^replace gate ({_NAME}) = [A-Z]+\(.*\) by [a-z0-9]+ = ([A-Z]+)\(")


@dataclass(frozen=True, slots=True)
class Gate:
    name: str
    kind: str
    left: str
    right: str


@dataclass(frozen=True, slots=True)
class CircuitTask:
    inputs: tuple[tuple[str, int], ...]
    gates: tuple[Gate, ...]
    target: str


def gate_value(kind: str, x: int, y: int) -> int:
    return GATES[kind][2 * x + y]


def evaluate(task: CircuitTask) -> dict[str, int]:
    """Every signal's value; ``PromptError`` for unknown gate types or undefined signals."""
    values = dict(task.inputs)
    pending = list(task.gates)
    while pending:
        progressed = False
        for g in list(pending):
            if g.kind not in GATES:
                raise PromptError(f"unknown gate type {g.kind!r}")
            if g.left in values and g.right in values:
                values[g.name] = gate_value(g.kind, values[g.left], values[g.right])
                pending.remove(g)
                progressed = True
        if not progressed:
            raise PromptError(f"undefined or cyclic signals: {[g.name for g in pending]}")
    if task.target not in values:
        raise PromptError(f"the queried signal {task.target!r} is not defined")
    return values


def solve(task: CircuitTask) -> bool:
    return bool(evaluate(task)[task.target])


def ancestors(task: CircuitTask) -> list[Gate]:
    """The gates the queried gate depends on, in the order they are listed."""
    return node_ancestors(task.gates, task.target)


def difficulty(task: CircuitTask) -> int:
    """Longest chain of gates ending at the queried gate (= the stratum)."""
    return node_depth(task.gates, task.target)


def render(task: CircuitTask, intervention: str | None = None) -> str:
    body = ["Inputs:", *(f"{n} = {v}" for n, v in task.inputs), "Gates:"]
    body += [f"{g.name} = {g.kind}({g.left}, {g.right})" for g in task.gates]
    return assemble(
        HEADER, body, f"What is the value of {task.target}?", ANSWER_FORMAT, intervention
    )


def parse(prompt: str) -> CircuitTask:
    """Read the task back from a prompt (an intervention line is ignored here)."""
    inputs, nodes, target = parse_program(
        prompt,
        header=HEADER,
        what="a boolean circuit",
        line_kind="circuit",
        sections=("Inputs:", "Gates:"),
        input_re=_INPUT_RE,
        node_re=_GATE_RE,
        question_re=_QUESTION_RE,
    )
    return CircuitTask(tuple(inputs), tuple(Gate(m[1], m[2], m[3], m[4]) for m in nodes), target)


def apply_intervention(task: CircuitTask, text: str) -> CircuitTask:
    if (m := _FLIP_RE.match(text)) and m[1] in dict(task.inputs):
        value = int(m[2])
        return replace(task, inputs=tuple((n, value if n == m[1] else v) for n, v in task.inputs))
    if (m := _SWAP_RE.match(text)) and m[2] in GATES:
        gates = tuple(replace(g, kind=m[2]) if g.name == m[1] else g for g in task.gates)
        if gates != task.gates:
            return replace(task, gates=gates)
    raise PromptError(f"unreadable intervention {text!r}")


def worked_steps(task: CircuitTask, slip_at: int | None = None) -> list[str]:
    """Lines of a rule-following evaluation; the gate at ``slip_at`` is misread (flipped)."""
    values = dict(task.inputs)
    lines = []
    for i, g in enumerate(ancestors(task)):
        x, y = values[g.left], values[g.right]
        out = gate_value(g.kind, x, y) ^ (1 if i == slip_at else 0)
        values[g.name] = out
        lines.append(f"{g.name} = {g.kind}({x}, {y}) = {out}")
    lines.append(f"So {task.target} = {values[task.target]}.")
    return lines


def derived_answer(task: CircuitTask, slip_at: int | None = None) -> bool:
    return worked_steps(task, slip_at)[-1].endswith("= 1.")


def generate(stratum: int, index: int, seed: int) -> ProceduralProblem:
    """Instance ``index`` of stratum ``stratum`` (pure function of its arguments)."""
    rng = _RULES.rng(stratum, index, seed)
    names = iter(rng.sample(NAME_POOL, len(NAME_POOL)))
    x0 = next(names)
    inputs: dict[str, int] = {x0: 0}
    gates: list[Gate] = []
    prev = x0
    for _ in range(stratum):
        kind = rng.choice(list(GATES))
        other = next(names)
        inputs[other] = _NON_CONTROLLING.get(kind, rng.randint(0, 1))
        left, right = (prev, other) if rng.random() < 0.5 else (other, prev)
        gates.append(Gate(next(names), kind, left, right))
        prev = gates[-1].name
    target = prev
    for _ in range(rng.randint(1, 2)):
        inputs[next(names)] = rng.randint(0, 1)
    pool = [n for n in inputs if n != x0]
    for _ in range(rng.randint(1, 2)):
        a, b = rng.sample(pool, 2)
        gates.append(Gate(next(names), rng.choice(list(GATES)), a, b))
        pool.append(gates[-1].name)
    want = index % 2 == 0
    probe = CircuitTask(tuple(inputs.items()), tuple(gates), target)
    if solve(probe) != want:
        inputs[x0] = 1
    ordered = shuffled_nodes(gates, rng)
    input_order = rng.sample(list(inputs), len(inputs))
    task = CircuitTask(tuple((n, inputs[n]) for n in input_order), ordered, target)
    first = gates[0]
    if index % 4 in (0, 1):
        text = f"set {x0} = {1 - inputs[x0]} (instead of {inputs[x0]}); everything else stays."
        detail = {"type": "flip_input", "target": x0, "from": inputs[x0], "to": 1 - inputs[x0]}
    else:
        values = evaluate(task)
        now = gate_value(first.kind, values[first.left], values[first.right])
        options = [
            k for k in GATES if gate_value(k, values[first.left], values[first.right]) != now
        ]
        kind = rng.choice(options)
        text = (
            f"replace gate {first.name} = {first.kind}({first.left}, {first.right}) by "
            f"{first.name} = {kind}({first.left}, {first.right}); everything else stays."
        )
        detail = {"type": "swap_gate", "target": first.name, "from": first.kind, "to": kind}
    spec = {
        "inputs": [[n, v] for n, v in task.inputs],
        "gates": [[g.name, g.kind, g.left, g.right] for g in task.gates],
        "target": task.target,
    }
    names_used = [*inputs, *(g.name for g in gates)]
    return _RULES.problem(stratum, index, rng, task, text, detail, names_used, spec, want)


def _renamed(task: CircuitTask, mapping: Mapping[str, str], rng: random.Random) -> CircuitTask:
    gates = [Gate(mapping[g.name], g.kind, mapping[g.left], mapping[g.right]) for g in task.gates]
    ordered = shuffled_nodes(gates, rng)
    inputs = [(mapping[n], v) for n, v in task.inputs]
    rng.shuffle(inputs)
    return CircuitTask(tuple(inputs), ordered, mapping[task.target])


_RULES = Family(FAMILY, NAME_POOL, render, solve, apply_intervention, difficulty, _renamed)
