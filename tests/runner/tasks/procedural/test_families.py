"""The three procedural families: oracles checked independently, invariants, balance, seeds."""

from __future__ import annotations

import re
from collections import Counter
from types import ModuleType

import pytest

from runner.tasks.procedural import FAMILIES, arith, circuit, family_of_prompt, reachability
from runner.tasks.procedural.common import (
    ProceduralProblem,
    PromptError,
    split_intervention,
)

STRATA = range(1, 9)
INDICES = range(12)


def _all(module: ModuleType, seed: int = 0) -> list[ProceduralProblem]:
    return [module.generate(s, i, seed) for s in STRATA for i in INDICES]


def _program(prompt: str) -> tuple[list[str], str]:
    lines = [ln for ln in prompt.split("\n")]
    body = lines[
        lines.index("Inputs:") + 1 : next(
            i for i, ln in enumerate(lines) if ln.startswith("Question:")
        )
    ]
    target = re.search(r"value of (\w+)\?", prompt)
    assert target is not None
    return [ln for ln in body if ln and not ln.endswith(":")], target[1]


def _exec_arith(prompt: str, override: tuple[str, int] | None = None) -> int:
    """An independent oracle: the program lines are valid Python."""
    lines, target = _program(prompt)
    env: dict[str, int] = {}
    pending = list(lines)
    while pending:  # definitions may be listed in any dependency-respecting order
        for line in list(pending):
            try:
                exec(line, {}, env)
            except NameError:
                continue
            if override and line.startswith(f"{override[0]} ="):
                env[override[0]] = override[1]
            pending.remove(line)
    return env[target]


def _exec_circuit(prompt: str, override: str | None = None) -> bool:
    lines, target = _program(prompt)
    if override:
        lines = [override if ln.split(" = ")[0] == override.split(" = ")[0] else ln for ln in lines]
    ops = {
        "AND": lambda x, y: x & y,
        "OR": lambda x, y: x | y,
        "XOR": lambda x, y: x ^ y,
        "NAND": lambda x, y: 1 - (x & y),
        "NOR": lambda x, y: 1 - (x | y),
    }
    env: dict[str, int] = {}
    while len(env) < len(lines):
        for line in lines:
            name, expr = line.split(" = ")
            if expr in ("0", "1"):
                env[name] = int(expr)
                continue
            m = re.fullmatch(r"([A-Z]+)\((\w+), (\w+)\)", expr)
            assert m is not None, line
            if m[2] in env and m[3] in env:
                env[name] = ops[m[1]](env[m[2]], env[m[3]])
    return bool(env[target])


def _exec_reach(prompt: str, change: tuple[str, str, str] | None = None) -> bool:
    edges = set(re.findall(r"^([A-Z]+) -> ([A-Z]+)$", prompt, re.M))
    if change:
        verb, u, v = change
        edges = edges | {(u, v)} if verb == "add" else edges - {(u, v)}
    m = re.search(r"from ([A-Z]+) to ([A-Z]+)\?", prompt)
    assert m is not None
    seen, todo = {m[1]}, [m[1]]
    while todo:
        node = todo.pop()
        for a, b in edges:
            if a == node and b not in seen:
                seen.add(b)
                todo.append(b)
    return m[2] in seen


def test_arith_oracles_agree_with_an_independent_interpreter() -> None:
    for p in _all(arith):
        assert _exec_arith(p.original.prompt) == p.original.answer
        assert _exec_arith(p.preserving.prompt) == p.original.answer
        _, text = split_intervention(p.intervened.prompt)
        assert text is not None
        m = re.match(r"set (\w+) = (\d+)", text)
        assert m is not None
        assert _exec_arith(p.original.prompt, (m[1], int(m[2]))) == p.intervened.answer


def test_circuit_oracles_agree_with_an_independent_evaluator() -> None:
    for p in _all(circuit):
        assert _exec_circuit(p.original.prompt) is p.original.answer
        assert _exec_circuit(p.preserving.prompt) is p.original.answer
        _, text = split_intervention(p.intervened.prompt)
        assert text is not None
        flip = re.match(r"set (\w+) = ([01])", text)
        swap = re.search(r" by (\w+ = [A-Z]+\(\w+, \w+\))", text)
        line = f"{flip[1]} = {flip[2]}" if flip else swap[1] if swap else None
        assert line is not None, text
        assert _exec_circuit(p.original.prompt, line) is p.intervened.answer


def test_reachability_oracles_agree_with_an_independent_search() -> None:
    for p in _all(reachability):
        assert _exec_reach(p.original.prompt) is p.original.answer
        assert _exec_reach(p.preserving.prompt) is p.original.answer
        _, text = split_intervention(p.intervened.prompt)
        m = re.match(r"(add|remove) the edge ([A-Z]+) -> ([A-Z]+)", text or "")
        assert m is not None
        assert _exec_reach(p.original.prompt, (m[1], m[2], m[3])) is p.intervened.answer


@pytest.mark.parametrize("module", list(FAMILIES.values()), ids=list(FAMILIES))
def test_invariants_hold_for_every_instance(module: ModuleType) -> None:
    for p in _all(module, seed=3):
        assert p.intervened.answer != p.original.answer
        assert p.preserving.answer == p.original.answer
        assert p.preserving.prompt != p.original.prompt
        base, text = split_intervention(p.intervened.prompt)
        assert base == p.original.prompt and text
        task = module.parse(p.original.prompt)
        assert module.solve(task) == p.original.answer
        assert module.solve(module.apply_intervention(task, text)) == p.intervened.answer
        assert module.difficulty(task) == p.stratum
        assert module.difficulty(module.parse(p.preserving.prompt)) == p.stratum
        assert family_of_prompt(p.original.prompt) == p.family
        assert p.original.prompt.rstrip().endswith('"Answer: ' + module.ANSWER_FORMAT + '".')


@pytest.mark.parametrize("module", list(FAMILIES.values()), ids=list(FAMILIES))
def test_generation_is_a_pure_function_of_its_arguments(module: ModuleType) -> None:
    assert module.generate(4, 7, 1).to_record() == module.generate(4, 7, 1).to_record()
    assert module.generate(4, 7, 1).original.prompt != module.generate(4, 7, 2).original.prompt
    with pytest.raises(ValueError, match="stratum"):
        module.generate(0, 0, 0)


def test_yes_no_answers_and_circuit_interventions_are_balanced() -> None:
    for module in (circuit, reachability):
        counts = Counter(p.original.answer for p in _all(module))
        assert counts[True] == counts[False]
    kinds = Counter(p.intervened.detail["intervention"]["type"] for p in _all(circuit))
    assert kinds["flip_input"] == kinds["swap_gate"]


def test_record_round_trip() -> None:
    for module in FAMILIES.values():
        p = module.generate(3, 5, 0)
        record = p.to_record()
        assert record["kind"] == "problem" and record["task"] == "procedural"
        assert ProceduralProblem.from_record(record) == p


def test_parsers_reject_foreign_or_damaged_prompts() -> None:
    p = arith.generate(2, 0, 0)
    with pytest.raises(PromptError):
        circuit.parse(p.original.prompt)
    with pytest.raises(PromptError):
        arith.parse(p.original.prompt.replace(" = ", " := ", 1))
    with pytest.raises(PromptError):
        arith.apply_intervention(arith.parse(p.original.prompt), "double everything")
    assert family_of_prompt("What is 2 + 2?") is None
