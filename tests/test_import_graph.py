"""The runtime's import graph, read from the source (tests/import_graph.py): no circles,
and every import goes down the layers (ARCHITECTURE.md, DESIGN.md's table).

saga/ (runtime)  ->  state/  steps/  adapters/
state/     knows nothing of steps, adapters or the runtime
steps/     knows nothing of Redis, the state machine (but its errors) or adapters
adapters/  knows nothing of the runtime (it uses state's keys and script loader)
saga.bench is imported by the benchmark and `saga bench` only, never by an executor.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tests import import_graph
from tests.import_graph import Edge

REPO = Path(__file__).resolve().parents[1]
MODULES, EDGES = import_graph.graph(REPO)
RUNS = ("module", "function")  # the kinds of edge that execute


def _py_files(folder: str) -> int:
    return sum(1 for _ in (REPO / folder).rglob("*.py"))


def test_the_graph_holds_every_module_once() -> None:
    """The walk finds every module of saga/, state/, steps/ and adapters/ under its one
    import name (saga.state.keys, never state.keys), and the edges between them."""
    for folder in ("state", "steps", "adapters"):
        found = [m for m in MODULES if m.startswith(f"saga.{folder}.")]
        assert len(found) + 1 == _py_files(folder), folder  # + its __init__
    own = [m for m, p in MODULES.items() if p.resolve().is_relative_to(REPO / "saga")]
    real = {p.resolve() for p in MODULES.values()}
    assert len(real) == len(MODULES) > 250, "each file is read once"
    assert len(own) > 150 and len(EDGES) > 1500
    assert ("saga.documents.pipeline", "saga.api.app", "module") in {
        (e.source, e.target, e.kind) for e in EDGES
    }


def _tree(root: Path, files: dict[str, str]) -> None:
    for name, source in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(source)


def test_a_planted_cycle_is_caught(tmp_path: Path) -> None:
    """Circles of each kind are found, through symlinked folders and relative imports;
    TYPE_CHECKING imports make none; a clean tree has none."""
    _tree(tmp_path / "top", {"__init__.py": "", "c.py": "from saga import a\n"})
    _tree(
        tmp_path,
        {
            "saga/__init__.py": "",
            "saga/a.py": "from saga.b import x\n",
            "saga/b.py": "def f():\n    from saga import a\n",
            "saga/d.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import saga.e\n",
            "saga/e.py": "from . import d\n",
            "saga/f.py": "import importlib\nimportlib.import_module('saga.top.c')\n",
        },
    )
    os.symlink("../top", tmp_path / "saga" / "top")
    mods, edges = import_graph.graph(tmp_path)
    assert "saga.top.c" in mods
    assert import_graph.cycles(mods, edges, ["module"]) == []
    assert import_graph.cycles(mods, edges, RUNS) == [["saga.a", "saga.b"]]
    assert import_graph.cycles(mods, edges, ["module", "typing"]) == [["saga.d", "saga.e"]]
    (tmp_path / "saga" / "b.py").write_text("from saga.f import y\n")
    (tmp_path / "top" / "c.py").write_text("import saga.b\n")
    found = import_graph.cycles(mods, import_graph.graph(tmp_path)[1], ["module"])
    assert found == [["saga.b", "saga.f", "saga.top.c"]]


def test_no_module_level_cycle() -> None:
    """No two modules of the runtime import each other, however far round, on import."""
    assert import_graph.cycles(MODULES, EDGES, ["module"]) == []


def test_no_cycle_through_lazy_imports_either() -> None:
    """Counting function-level (lazy) imports too, no module reaches itself: the public
    API, the client and the document pipeline's wiring can each be read alone."""
    assert import_graph.cycles(MODULES, EDGES, RUNS) == []


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


_ADAPTERS_MAY = ("saga.adapters", "saga.state", "saga.steps", "saga.telemetry.tracing")


def _adapters_forbids(module: str) -> bool:
    top = module.split(".", maxsplit=1)[0]
    if top in ("state", "steps", "adapters"):
        return True
    return top == "saga" and not any(
        module == m or module.startswith(m + ".") for m in _ADAPTERS_MAY
    )


RULES: dict[str, Rule] = {
    "state": _state_forbids,
    "steps": _steps_forbids,
    "adapters": _adapters_forbids,
}


def imported_modules(source: str, package: str) -> list[tuple[int, str]]:
    """Every module a source file imports (absolute names; relative ones resolved),
    third-party ones included (the graph holds only the project's)."""
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
    """state/ imports nothing of steps, adapters or the runtime; steps/ never imports
    Redis; adapters/ nothing of the runtime."""
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
        ("adapters", "from saga.worker.ports import Ports", True),
        ("adapters", "from saga import settings", True),
        ("adapters", "from ..telemetry import metrics", True),
        ("adapters", "from saga.telemetry import tracing", False),
        ("adapters", "from saga.state.keys import Keys", False),
        ("adapters", "from saga.steps.context import Completion", False),
    ],
)
def test_layering_rules_catch_violations(folder: str, source: str, forbidden: bool) -> None:
    """The rules flag forbidden imports (absolute, relative, dynamic) and let allowed ones by."""
    found = imported_modules(source, f"saga.{folder}")
    assert any(RULES[folder](m) for _, m in found) is forbidden, found


def _outside(edges: list[Edge], target: str, allowed: tuple[str, ...]) -> list[str]:
    return sorted(
        f"{e.source}:{e.line}"
        for e in edges
        if (e.target == target or e.target.startswith(target + "."))
        and not any(e.source == a or e.source.startswith(a + ".") for a in allowed)
    )


def test_only_the_benchmark_imports_the_benchmark() -> None:
    """saga.bench and saga.evaluation are imported by themselves and their commands only
    (the image leaves all four out: deploy/Dockerfile.dockerignore)."""
    assert any(m.startswith("saga.bench.") for m in MODULES)
    assert _outside(EDGES, "saga.bench", ("saga.bench", "saga.cli.cmd_bench")) == []
    assert _outside(EDGES, "saga.evaluation", ("saga.evaluation", "saga.cli.cmd_eval")) == []


API = tuple(sorted(m for m in MODULES if m.startswith("saga.api.")))  # the whole package
ABOVE_API = ("saga.cli", "saga.console", "saga.worker", "saga.controller", "saga.bench",
             "saga.evaluation", "saga.lifecycle", "saga.documents")  # fmt: skip


def test_the_public_api_imports_nothing_above_it() -> None:
    """App, SagaClient and their pieces import no command, console, executor, controller,
    benchmark or app (the document pipeline is loaded by reference: DOCUMENTS_APP)."""
    bad = [
        f"{e.source}:{e.line} -> {e.target}"
        for e in EDGES
        if e.source in API and any(e.target == a or e.target.startswith(a + ".") for a in ABOVE_API)
    ]
    assert bad == []
    assert "saga.api.app" in API and "saga.api.client" in API
    assert "saga.documents.pipeline" in MODULES


def _worker_graph() -> set[str]:
    """What ``saga worker`` can import: the CLI's entry and every command module (the
    parser registers each) on import; the worker command, the executor and the pipeline
    it serves (the document app, named by reference) through every lazy import too."""
    commands = [m for m in MODULES if m.startswith("saga.cli.cmd_")]
    loaded = import_graph.closure(["saga", "saga.cli.main", *commands], EDGES, ["module"])
    app = _documents_app().partition(":")[0]
    return loaded | import_graph.closure(["saga.cli.cmd_worker", app], EDGES, RUNS)


def _documents_app() -> str:
    """``DOCUMENTS_APP``: the wiring's reference to the document pipeline's App."""
    for path in MODULES.values():
        for node in ast.parse(path.read_text()).body:
            target = node.targets[0] if isinstance(node, ast.Assign) else None
            if getattr(target, "id", "") == "DOCUMENTS_APP":
                return str(ast.literal_eval(node.value))  # type: ignore[union-attr]
    raise AssertionError("no module names DOCUMENTS_APP")


def test_a_worker_imports_no_benchmark_module() -> None:
    """Nothing ``saga worker`` can reach, eagerly or lazily, is a saga.bench (or
    saga.evaluation) module; the reach is wide (the executor, the steps, the adapters)."""
    reach = _worker_graph()
    assert {"saga.worker.service", "saga.documents.pipeline", "saga.steps.parser"} <= reach
    assert "saga.cli.cmd_bench" in reach  # registered by the parser: it must stay light
    assert sorted(m for m in reach if m.startswith(("saga.bench", "saga.evaluation"))) == []


def test_a_started_worker_process_loaded_no_benchmark_module() -> None:
    """The same, from a real process: the CLI's parser built, the worker command's and
    the executor's modules and the document pipeline loaded, no saga.bench module is."""
    code = (
        "import sys\n"
        "from saga.cli.main import build_parser\n"
        "build_parser().parse_args(['worker', 'router'])\n"
        "import saga.worker.service, saga.worker.processes\n"
        "from saga.wiring.runtime import document_pipeline\n"
        "from saga.config.settings import load_settings\n"
        "assert document_pipeline(load_settings()).name == 'documents'\n"
        "print(sorted(m for m in sys.modules if m.startswith('saga.')).__len__())\n"
        "print([m for m in sys.modules if m.startswith(('saga.bench', 'saga.evaluation'))])\n"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO), "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    env.pop("SAGA_PIPELINE", None)
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120,
        cwd=REPO, check=False,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    count, loaded = out.stdout.split("\n")[:2]
    assert int(count) > 50 and loaded == "[]", out.stdout
