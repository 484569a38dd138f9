"""Layering holds by construction: an AST walk of every module's imports.

saga/ (runtime)  ->  state/  steps/  adapters/
state/   knows nothing of steps, adapters or the runtime
steps/   knows nothing of Redis, the state machine (but its errors) or adapters
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

Rule = Callable[[str], bool]
"""Returns True when a module name may not be imported."""


def _state_forbids(module: str) -> bool:
    top = module.split(".", maxsplit=1)[0]
    if top in ("steps", "adapters"):
        return True
    return top == "saga" and not (module == "saga.state" or module.startswith("saga.state."))


def _steps_forbids(module: str) -> bool:
    if module.split(".", maxsplit=1)[0] in ("redis", "valkey", "hiredis", "state", "adapters"):
        return True
    if module == "saga.state.errors" or module.startswith("saga.state.errors."):
        return False
    return module.startswith(("saga.state", "saga.adapters")) or module == "saga"


RULES: dict[str, Rule] = {"state": _state_forbids, "steps": _steps_forbids}


def imported_modules(source: str, package: str) -> list[tuple[int, str]]:
    """Every module a source file imports (absolute names; relative ones resolved)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - node.level + 1])
                mod = f"{base}.{node.module}" if node.module else base
            else:
                mod = node.module or ""
            # ``from X import a`` imports X.a (a submodule or a name of X): judge X.a.
            found += [(node.lineno, f"{mod}.{alias.name}") for alias in node.names]
        elif isinstance(node, ast.Call) and node.args:
            name = getattr(node.func, "attr", getattr(node.func, "id", ""))
            arg = node.args[0]
            if name in ("import_module", "__import__") and isinstance(arg, ast.Constant):
                found.append((node.lineno, str(arg.value)))
    return found


def violations(folder: str) -> list[str]:
    rule = RULES[folder]
    bad = []
    for path in sorted((REPO / folder).rglob("*.py")):
        rel = path.relative_to(REPO)
        package = "saga." + ".".join(rel.parent.parts)
        for line, module in imported_modules(path.read_text(), package):
            if rule(module):
                bad.append(f"{rel}:{line}: imports {module}")
    return bad


@pytest.mark.parametrize("folder", list(RULES))
def test_layer_imports_only_what_it_may(folder: str) -> None:
    """state/ imports nothing of steps, adapters or the runtime; steps/ never imports Redis."""
    assert (REPO / folder).is_dir()
    assert list((REPO / folder).rglob("*.py")), f"{folder}/ has no modules"
    assert violations(folder) == []


@pytest.mark.parametrize(
    ("folder", "source", "forbidden"),
    [
        ("state", "from saga.steps.router import route", True),
        ("state", "import saga.adapters.llm", True),
        ("state", "from saga import settings", True),
        ("state", "from saga.cli import main", True),
        ("state", "from .. import steps", True),
        ("state", "from saga.state.keys import Keys\nfrom . import ids", False),
        ("steps", "import redis.asyncio", True),
        ("steps", "from redis import Redis", True),
        ("steps", "from saga.state.keys import Keys", True),
        ("steps", "from saga.state import machine", True),
        ("steps", "from saga.adapters.llm import complete", True),
        ("steps", "importlib.import_module('redis')", True),
        ("steps", "from saga.state.errors import SagaError", False),
        ("steps", "from saga.state import errors", False),
        ("steps", "from .models import Biomarker", False),
    ],
)
def test_layering_rules_catch_violations(folder: str, source: str, forbidden: bool) -> None:
    """The rules flag forbidden imports (absolute, relative, dynamic) and let allowed ones by."""
    found = imported_modules(source, f"saga.{folder}")
    assert any(RULES[folder](m) for _, m in found) is forbidden, found
