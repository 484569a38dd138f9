"""The step table the runtime registers, and the layering rules of ``steps/``."""

from __future__ import annotations

import ast
import itertools
import subprocess
import sys
from pathlib import Path

from saga.steps.definition import StepDef
from saga.steps.grouper import group
from saga.steps.models import GrouperOutput, ParserOutput, RouterInput, RouterOutput
from saga.steps.parser import parse
from saga.steps.pipeline_steps import STEPS
from saga.steps.router import route

STEPS_DIR = Path(__file__).resolve().parents[2] / "steps"
HEAVY = ("pypdf", "rapidfuzz", "httpx", "fpdf")


def test_pipeline_is_router_parser_grouper() -> None:
    """Three steps in order; only the parser loads and deletes the pages blob."""
    assert list(STEPS) == [
        StepDef("router", route, RouterInput, RouterOutput),
        StepDef("parser", parse, RouterOutput, ParserOutput, loads_pages=True, deletes_pages=True),
        StepDef("grouper", group, ParserOutput, GrouperOutput),
    ]


def test_each_output_is_the_next_input() -> None:
    """A step's output type is the input type of the step after it."""
    for before, after in itertools.pairwise(STEPS):
        assert before.output_type is after.input_type


def _imports(path: Path) -> list[tuple[str, bool]]:
    """(module, at module level) for every import in ``path``."""
    tree = ast.parse(path.read_text())
    top = {id(node) for node in tree.body}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(alias.name, id(node) in top) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.append((node.module, id(node) in top))
    return found


def test_steps_import_no_redis_state_or_adapters() -> None:
    """steps/ never imports redis, saga.adapters, or saga.state beyond its errors."""
    for path in STEPS_DIR.glob("*.py"):
        for module, _ in _imports(path):
            assert not module.startswith(("redis", "saga.adapters")), (path.name, module)
            if module.startswith("saga.state"):
                assert module == "saga.state.errors", (path.name, module)


def test_heavy_libraries_are_imported_inside_functions() -> None:
    """pypdf, rapidfuzz and httpx load only when a step needs them."""
    for path in STEPS_DIR.glob("*.py"):
        for module, at_top in _imports(path):
            if module.split(".")[0] in HEAVY:
                assert not at_top, (path.name, module)


def test_importing_the_pipeline_loads_no_heavy_library() -> None:
    """A fresh interpreter importing the step table has no pypdf, rapidfuzz, httpx or redis."""
    code = (
        "import sys, saga.steps.pipeline_steps, saga.steps.testing; "
        f"print([m for m in {(*HEAVY, 'redis')!r} if m in sys.modules])"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert result.stdout.strip() == "[]"
