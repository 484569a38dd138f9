"""The runtime's import graph, read from the source (ast; nothing is imported).

Every module under ``saga/`` is found by walking it with its symlinks followed, so
``state/keys.py`` is ``saga.state.keys`` (its one import name) and is read once.
Each import is an edge of one kind:

- ``module``: runs when the importing module is imported (top level, class bodies,
  ``try``/``if`` blocks);
- ``function``: runs when a function runs (the lazy imports that keep start-up quick);
- ``typing``: under ``if TYPE_CHECKING:`` (never runs).

``from a import b`` is an edge to ``a.b`` when that is a module, else to ``a``;
``importlib.import_module("a.b")`` with a literal is an edge too. Parent packages'
``__init__`` are not edges (as in grimp / import-linter).
"""

from __future__ import annotations

import ast
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

KINDS = ("module", "function", "typing")


@dataclass(frozen=True, slots=True)
class Edge:
    source: str
    target: str
    line: int
    kind: str


def modules(root: Path, package: str = "saga") -> dict[str, Path]:
    """Every module of ``package`` under ``root`` (``root/package``), by import name."""
    found: dict[str, Path] = {}
    for dirpath, dirs, files in os.walk(root / package, followlinks=True):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__" and not d.startswith("."))
        parts = list(Path(dirpath).relative_to(root).parts)
        for name in sorted(files):
            if name.endswith(".py"):
                mod = ".".join(parts if name == "__init__.py" else [*parts, name[:-3]])
                found[mod] = Path(dirpath) / name
    return found


def _type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _known(name: str, known: set[str] | dict[str, Path]) -> str:
    """The longest prefix of ``name`` that is a known module ('' when none is)."""
    while name and name not in known:
        name = name.rpartition(".")[0]
    return name


def edges_of(name: str, source: str, known: dict[str, Path], *, is_package: bool) -> list[Edge]:
    """The edges from module ``name`` (whose source is ``source``) to ``known`` modules."""
    package = name if is_package else name.rpartition(".")[0]
    out: list[Edge] = []

    def add(target: str, line: int, kind: str) -> None:
        target = _known(target, known)
        if target and target != name:
            out.append(Edge(name, target, line, kind))

    def visit(node: ast.AST, kind: str) -> None:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            kind = "function" if kind == "module" else kind
        if isinstance(node, ast.If) and _type_checking(node.test):
            for child in node.body:
                visit(child, "typing")
            for child in node.orelse:
                visit(child, kind)
            return
        if isinstance(node, ast.Import):
            for alias in node.names:
                add(alias.name, node.lineno, kind)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - node.level + 1])
                mod = f"{base}.{node.module}" if node.module else base
            else:
                mod = node.module or ""
            for alias in node.names:
                full = f"{mod}.{alias.name}"
                add(full if full in known else mod, node.lineno, kind)
        elif isinstance(node, ast.Call) and node.args:
            fn = getattr(node.func, "attr", getattr(node.func, "id", ""))
            arg = node.args[0]
            if fn in ("import_module", "__import__") and isinstance(arg, ast.Constant):
                add(str(arg.value), node.lineno, kind)
        for child in ast.iter_child_nodes(node):
            visit(child, kind)

    visit(ast.parse(source), "module")
    return out


def graph(root: Path, package: str = "saga") -> tuple[dict[str, Path], list[Edge]]:
    """The modules of ``package`` and every edge between them."""
    known = modules(root, package)
    edges = [
        e
        for name, path in known.items()
        for e in edges_of(name, path.read_text(), known, is_package=path.name == "__init__.py")
    ]
    return known, edges


def cycles(nodes: Iterable[str], edges: Iterable[Edge], kinds: Iterable[str]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative),
    over the edges of ``kinds``; each sorted, the list sorted."""
    wanted = set(kinds)
    succ: dict[str, set[str]] = {n: set() for n in nodes}
    for e in edges:
        if e.kind in wanted:
            succ.setdefault(e.source, set()).add(e.target)
            succ.setdefault(e.target, set())
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in sorted(succ):
        if start in index:
            continue
        work = [(start, iter(sorted(succ[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, it = work[-1]
            nxt = next(it, None)
            if nxt is not None:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(succ[nxt]))))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                comp = []
                while True:
                    top = stack.pop()
                    on_stack.discard(top)
                    comp.append(top)
                    if top == node:
                        break
                if len(comp) > 1:
                    found.append(sorted(comp))
    return sorted(found)


def closure(starts: Iterable[str], edges: Iterable[Edge], kinds: Iterable[str]) -> set[str]:
    """Every module reachable from ``starts`` over the edges of ``kinds``."""
    wanted = set(kinds)
    succ: dict[str, set[str]] = {}
    for e in edges:
        if e.kind in wanted:
            succ.setdefault(e.source, set()).add(e.target)
    seen = set(starts)
    todo = list(seen)
    while todo:
        for nxt in succ.get(todo.pop(), ()):
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return seen
