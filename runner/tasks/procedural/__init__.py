"""Procedural task families of the selection study (docs/selection.md).

Three families, each a module with the same functions: ``generate(stratum, index, seed)``
(a :class:`~runner.tasks.procedural.common.ProceduralProblem` with original, intervened and
preserving variants), ``parse(prompt)``, ``apply_intervention(task, text)``, ``solve(task)``,
``difficulty(task)`` and ``render(task, intervention)``. :data:`FAMILIES` maps a family name
to its module; :func:`family_of_prompt` tells which family wrote a prompt.
"""

from __future__ import annotations

from types import ModuleType

from runner.tasks.procedural import arith, circuit, reachability

FAMILIES: dict[str, ModuleType] = {
    arith.FAMILY: arith,
    circuit.FAMILY: circuit,
    reachability.FAMILY: reachability,
}


def family_of_prompt(prompt: str) -> str | None:
    """The family whose header starts ``prompt``, or None."""
    for name, module in FAMILIES.items():
        if prompt.startswith(module.HEADER):
            return name
    return None
