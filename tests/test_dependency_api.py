"""No module reads a private (``_``-prefixed) attribute of aiohttp, tenacity, aiolimiter or
diskcache: an upgrade within the version ranges may rename or remove anything private, and a
sweep would crash or, worse, silently miss the cache and re-send paid requests.

An AST walk over ``cotaudit/``, ``runner/`` and ``evaluator/``. It resolves the names a module
imports from those packages, the names and ``self`` attributes it binds to values built from
them (``limiter = AsyncLimiter(...)``, ``self._cache = cache`` with ``cache: diskcache.Cache``,
``async with session.post(...) as resp``), and ``self`` inside classes that subclass theirs;
then every ``x._name`` (or ``getattr(x, "_name")``) whose ``x`` is one of those is a finding,
and so is importing a private module or name. Dunder names are public.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PACKAGES = frozenset({"aiohttp", "tenacity", "aiolimiter", "diskcache"})
SCANNED = ("cotaudit", "runner", "evaluator")


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _dotted(node: ast.AST) -> str | None:
    """``a.b.c`` for a chain of names and attributes, else None."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        inner = _dotted(node.value)
        return None if inner is None else f"{inner}.{node.attr}"
    return None


class _Checker:
    def __init__(self, tree: ast.Module, where: str) -> None:
        self.tree = tree
        self.where = where
        self.tracked: set[str] = set()  # names and dotted self attributes of library values
        self.findings: list[str] = []

    def _rooted(self, node: ast.AST | None) -> bool:
        """Whether ``node`` is (built from) a tracked name: ``x``, ``x.a``, ``x(...)``,
        ``x[...]``, ``await x``, ``x | None`` in an annotation, a string annotation."""
        if node is None:
            return False
        dotted = _dotted(node)
        if dotted is not None:
            parts = dotted.split(".")
            return any(".".join(parts[: i + 1]) in self.tracked for i in range(len(parts)))
        if isinstance(node, ast.Call | ast.Await | ast.Subscript | ast.Starred):
            inner = node.func if isinstance(node, ast.Call) else node.value
            return self._rooted(inner)
        if isinstance(node, ast.BinOp):  # X | None
            return self._rooted(node.left) or self._rooted(node.right)
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            try:
                return self._rooted(ast.parse(node.value, mode="eval").body)
            except SyntaxError:
                return False
        return False

    def _bind(self, target: ast.AST, value: ast.AST | None) -> bool:
        if isinstance(target, ast.Tuple | ast.List) and isinstance(value, ast.Tuple | ast.List):
            return any(self._bind(t, v) for t, v in zip(target.elts, value.elts, strict=False))
        name = _dotted(target)
        if name is not None and name not in self.tracked and self._rooted(value):
            self.tracked.add(name)
            return True
        return False

    def collect(self) -> None:
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    top = alias.name.split(".")[0]
                    if top in PACKAGES:
                        if any(_private(part) for part in alias.name.split(".")):
                            self.findings.append(f"{self.where}:{node.lineno}: import {alias.name}")
                        self.tracked.add(alias.asname or top)
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                parts = node.module.split(".")
                if parts[0] not in PACKAGES:
                    continue
                for alias in node.names:
                    if any(_private(p) for p in parts) or _private(alias.name):
                        self.findings.append(
                            f"{self.where}:{node.lineno}: from {node.module} import {alias.name}"
                        )
                    self.tracked.add(alias.asname or alias.name)
        changed = True
        while changed:  # to a fixed point: b = a.x after a = Lib() tracks b too
            changed = False
            for node in ast.walk(self.tree):
                if isinstance(node, ast.Assign):
                    for target in node.targets:
                        changed |= self._bind(target, node.value)
                elif isinstance(node, ast.AnnAssign):
                    changed |= self._bind(node.target, node.annotation)
                    changed |= self._bind(node.target, node.value)
                elif isinstance(node, ast.arg) and node.annotation is not None:
                    if node.arg not in self.tracked and self._rooted(node.annotation):
                        self.tracked.add(node.arg)
                        changed = True
                elif isinstance(node, ast.withitem) and node.optional_vars is not None:
                    changed |= self._bind(node.optional_vars, node.context_expr)
                elif isinstance(node, ast.ClassDef) and any(self._rooted(b) for b in node.bases):
                    changed |= "self" not in self.tracked
                    self.tracked.add("self")  # a subclass of theirs: its self is theirs

    def check(self) -> list[str]:
        self.collect()
        for node in ast.walk(self.tree):
            reads = (
                isinstance(node, ast.Attribute) and _private(node.attr) and self._rooted(node.value)
            )
            reflects = (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id in ("getattr", "setattr", "hasattr")
                and len(node.args) >= 2
                and isinstance(node.args[1], ast.Constant)
                and isinstance(node.args[1].value, str)
                and _private(node.args[1].value)
                and self._rooted(node.args[0])
            )
            if reads or reflects:
                self.findings.append(f"{self.where}:{node.lineno}: {ast.unparse(node)}")
        return sorted(self.findings, key=lambda f: int(f.split(":")[-2]))


def private_uses(source: str, where: str = "<source>") -> list[str]:
    """Every private attribute of the four packages that ``source`` reads, imports or sets."""
    return _Checker(ast.parse(source), where).check()


def test_no_module_reads_a_private_attribute_of_its_libraries() -> None:
    findings: list[str] = []
    files = [path for package in SCANNED for path in sorted((REPO / package).rglob("*.py"))]
    assert len(files) > 50, "the walk found the project's modules"
    for path in files:
        findings += private_uses(path.read_text(encoding="utf-8"), str(path.relative_to(REPO)))
    assert findings == [], "\n".join(findings)


# What the engine and the cache did before this check existed, and the other shapes it covers.
CAUGHT = [
    (
        "aiolimiter state through an attribute of self",
        """
from aiolimiter import AsyncLimiter
class RateLimits:
    def __init__(self, rps):
        self.requests = AsyncLimiter(rps, 1.0)
    def try_acquire(self):
        requests = self.requests
        if requests._waiters:
            return False
        requests._level += 1
""",
        ["requests._waiters", "requests._level"],
    ),
    (
        "diskcache's connection through an annotated parameter",
        """
import diskcache
class ResponseCache:
    def __init__(self, cache: diskcache.Cache) -> None:
        self._cache = cache
    def get_many(self, keys):
        return self._cache._sql("SELECT 1").fetchall()
def _open(directory):
    cache = diskcache.Cache(directory)
    return cache._con
""",
        ["self._cache._sql", "cache._con"],
    ),
    (
        "an aiohttp response from async with, and getattr",
        """
import aiohttp
async def post(session: "aiohttp.ClientSession", url):
    async with session.post(url) as resp:
        return resp._body, getattr(resp, "_headers")
""",
        ["resp._body", "getattr(resp, '_headers')"],
    ),
    (
        "private modules and names imported",
        """
from aiohttp._http_parser import HttpResponseParser
from tenacity import _utils
import diskcache.core as core
x = core._private_constant
""",
        ["HttpResponseParser", "_utils", "core._private_constant"],
    ),
    (
        "a subclass reading its base's private state",
        """
from tenacity.wait import wait_base
class wait_own(wait_base):
    def __call__(self, retry_state):
        return self._cached
""",
        ["self._cached"],
    ),
]


@pytest.mark.parametrize(("label", "source", "expected"), CAUGHT, ids=[c[0] for c in CAUGHT])
def test_the_check_catches_private_reads(label: str, source: str, expected: list[str]) -> None:
    findings = private_uses(source)
    assert len(findings) == len(expected), findings
    for finding, what in zip(findings, expected, strict=True):
        assert what in finding, (what, findings)


def test_the_check_leaves_public_use_and_our_own_privates_alone() -> None:
    source = """
import aiohttp
from aiolimiter import AsyncLimiter
class Pacing:
    def __init__(self):
        self._own = {}
        self.limiter = AsyncLimiter(1, 1)
    async def admit(self):
        await self.limiter.acquire(1)
        self._own.clear()
        return self.limiter.max_rate, aiohttp.ClientSession.__name__
"""
    assert private_uses(source) == []
