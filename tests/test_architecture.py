"""The house rules of docs/architecture.md, checked on every module's imports.

``runner`` and ``evaluator`` import ``cotaudit`` and never each other; ``cotaudit``'s shared
modules (schema, domain, errors, constants) import neither half. Only the command line, the
Python API and the commands that compose both halves (``cotaudit/cli.py``, ``cotaudit/api.py``,
``cotaudit/commands/``) may reach into the halves. Every import statement counts, at module
level or inside a function.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
HALVES = ("runner", "evaluator")
# Modules of cotaudit/ that compose the halves, and so may import them.
COMPOSERS = ("cotaudit/cli.py", "cotaudit/api.py", "cotaudit/commands/")


def imported_packages(path: Path) -> Iterator[tuple[int, str]]:
    """``(line, top-level package)`` of every absolute import in ``path``."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield node.lineno, node.module.split(".")[0]


def forbidden_for(relative: str) -> frozenset[str]:
    """The packages a module at ``relative`` (a posix path from the repository) may not import."""
    top = relative.split("/")[0]
    if top == "runner":
        return frozenset({"evaluator"})
    if top == "evaluator":
        return frozenset({"runner"})
    if top == "cotaudit" and not relative.startswith(COMPOSERS):
        return frozenset(HALVES)
    return frozenset()


def crossings(root: Path) -> list[str]:
    found = []
    for package in ("cotaudit", *HALVES):
        for path in sorted((root / package).rglob("*.py")):
            relative = path.relative_to(root).as_posix()
            banned = forbidden_for(relative)
            for line, imported in imported_packages(path):
                if imported in banned:
                    found.append(f"{relative}:{line} imports {imported}")
    return found


def test_no_module_crosses_between_the_halves() -> None:
    assert crossings(ROOT) == []


@pytest.mark.parametrize(
    ("relative", "source", "crossing"),
    [
        ("runner/engine_x.py", "from evaluator.pipeline import Evaluation\n", "evaluator"),
        ("evaluator/x.py", "def f():\n    import runner.engine\n", "runner"),
        ("cotaudit/schema/x.py", "from runner.request_spec import make_spec\n", "runner"),
    ],
)
def test_the_check_catches_a_crossing(
    tmp_path: Path, relative: str, source: str, crossing: str
) -> None:
    for package in ("cotaudit", *HALVES):
        (tmp_path / package).mkdir()
    target = tmp_path / relative
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(source, encoding="utf-8")
    assert crossings(tmp_path) == [f"{relative}:{source.count(chr(10))} imports {crossing}"]


def test_composers_may_use_both_halves(tmp_path: Path) -> None:
    for package in ("cotaudit", *HALVES):
        (tmp_path / package).mkdir()
    (tmp_path / "cotaudit" / "commands").mkdir()
    (tmp_path / "cotaudit" / "commands" / "demo.py").write_text(
        "import runner.engine\nimport evaluator.pipeline\n", encoding="utf-8"
    )
    assert crossings(tmp_path) == []
