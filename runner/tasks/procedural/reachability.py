"""Graph reachability: is there a directed path from a source node to a target node?

An instance of stratum ``L`` has a path ``v0 -> v1 -> ... -> vL`` from the source to the
target; a *yes* instance has all ``L`` path edges and its intervention removes one of them, a
*no* instance misses one path edge and its intervention adds it (answers alternate by index,
so they are balanced). The path nodes have no other edges, so the removed edge is the only
way through and the added edge really connects; distractor nodes form a separate component.
The intervention touches the ``L`` path edges, and a reader finds ``L`` from the prompt alone
(:func:`difficulty`): the distance from source to target when reachable, otherwise
``(|reach(source)| - 1) + (|coreach(target)| - 1) + 1``. The preserving edit renames every
node and reorders the edge list.
"""

from __future__ import annotations

import itertools
import random
import re
from collections.abc import Mapping
from dataclasses import dataclass, replace

from runner.tasks.procedural.common import (
    Family,
    ProceduralProblem,
    PromptError,
    assemble,
    body_lines,
    question_line,
    split_intervention,
)

FAMILY = "reachability"
HEADER = "Task: decide reachability in a directed graph."
ANSWER_FORMAT = "yes or no"
NAME_POOL = [chr(c) for c in range(ord("A"), ord("Z") + 1)] + [
    f"{chr(c)}{chr(c)}" for c in range(ord("A"), ord("Z") + 1)
]
_NAME = r"[A-Z]+"
_EDGE_RE = re.compile(rf"^({_NAME}) -> ({_NAME})$")
_QUESTION_RE = re.compile(rf"^Is there a directed path from ({_NAME}) to ({_NAME})\?$")
_CHANGE_RE = re.compile(rf"^(add|remove) the edge ({_NAME}) -> ({_NAME})")


@dataclass(frozen=True, slots=True)
class GraphTask:
    edges: tuple[tuple[str, str], ...]
    source: str
    target: str


def reach(edges: tuple[tuple[str, str], ...], start: str, *, reverse: bool = False) -> list[str]:
    """Nodes reachable from ``start`` (itself included), in breadth-first order."""
    succ: dict[str, list[str]] = {}
    for u, v in edges:
        a, b = (v, u) if reverse else (u, v)
        succ.setdefault(a, []).append(b)
    seen = [start]
    for node in seen:
        for nxt in succ.get(node, []):
            if nxt not in seen:
                seen.append(nxt)
    return seen


def distance(task: GraphTask) -> int | None:
    succ: dict[str, list[str]] = {}
    for u, v in task.edges:
        succ.setdefault(u, []).append(v)
    dist = {task.source: 0}
    frontier = [task.source]
    for node in frontier:
        for nxt in succ.get(node, []):
            if nxt not in dist:
                dist[nxt] = dist[node] + 1
                frontier.append(nxt)
    return dist.get(task.target)


def solve(task: GraphTask) -> bool:
    return task.target in reach(task.edges, task.source)


def difficulty(task: GraphTask) -> int:
    """Edges on the source-target path, completed by one edge when it is broken."""
    d = distance(task)
    if d is not None:
        return d
    forward = len(reach(task.edges, task.source)) - 1
    backward = len(reach(task.edges, task.target, reverse=True)) - 1
    return forward + backward + 1


def render(task: GraphTask, intervention: str | None = None) -> str:
    body = ["Edges:", *(f"{u} -> {v}" for u, v in task.edges)]
    question = f"Is there a directed path from {task.source} to {task.target}?"
    return assemble(HEADER, body, question, ANSWER_FORMAT, intervention)


def parse(prompt: str) -> GraphTask:
    """Read the task back from a prompt (an intervention line is ignored here)."""
    base, _ = split_intervention(prompt)
    if not base.startswith(HEADER):
        raise PromptError("not a reachability prompt")
    edges: list[tuple[str, str]] = []
    for line in body_lines(base):
        if line == "Edges:":
            continue
        m = _EDGE_RE.match(line)
        if m is None:
            raise PromptError(f"unreadable edge line {line!r}")
        edges.append((m[1], m[2]))
    q = _QUESTION_RE.match(question_line(base))
    if q is None:
        raise PromptError("unreadable question")
    return GraphTask(tuple(edges), q[1], q[2])


def apply_intervention(task: GraphTask, text: str) -> GraphTask:
    m = _CHANGE_RE.match(text)
    if m is None:
        raise PromptError(f"unreadable intervention {text!r}")
    edge = (m[2], m[3])
    if m[1] == "add":
        return replace(task, edges=(*task.edges, edge))
    if edge not in task.edges:
        raise PromptError(f"intervention removes an edge that is not there: {text!r}")
    return replace(task, edges=tuple(e for e in task.edges if e != edge))


def worked_steps(task: GraphTask, flip: bool = False) -> tuple[list[str], bool]:
    """A breadth-first search written out; ``flip`` misreads the conclusion."""
    seen = reach(task.edges, task.source)
    lines = [f"Starting from {task.source}, the nodes reachable are: {', '.join(seen)}."]
    found = (task.target in seen) != flip
    lines.append(f"So {task.target} is {'' if found else 'not '}reachable from {task.source}.")
    return lines, found


def generate(stratum: int, index: int, seed: int) -> ProceduralProblem:
    """Instance ``index`` of stratum ``stratum`` (pure function of its arguments)."""
    rng = _RULES.rng(stratum, index, seed)
    extra = rng.randint(2, 4)
    names = rng.sample(NAME_POOL, stratum + 1 + extra)
    path, others = names[: stratum + 1], names[stratum + 1 :]
    path_edges = list(itertools.pairwise(path))
    cut = path_edges[rng.randrange(stratum)]
    reachable = index % 2 == 0
    edges = list(path_edges) if reachable else [e for e in path_edges if e != cut]
    candidates = [(u, v) for u in others for v in others if u != v]
    edges += rng.sample(candidates, min(len(candidates), extra + 1))
    rng.shuffle(edges)
    task = GraphTask(tuple(edges), path[0], path[-1])
    verb = "remove" if reachable else "add"
    text = f"{verb} the edge {cut[0]} -> {cut[1]}; everything else stays."
    detail = {"type": f"{verb}_edge", "target": list(cut)}
    spec = {"edges": [list(e) for e in task.edges], "source": path[0], "target": path[-1]}
    return _RULES.problem(stratum, index, rng, task, text, detail, names, spec, reachable)


def _renamed(task: GraphTask, mapping: Mapping[str, str], rng: random.Random) -> GraphTask:
    edges = [(mapping[u], mapping[v]) for u, v in task.edges]
    rng.shuffle(edges)
    return GraphTask(tuple(edges), mapping[task.source], mapping[task.target])


_RULES = Family(FAMILY, NAME_POOL, render, solve, apply_intervention, difficulty, _renamed)
