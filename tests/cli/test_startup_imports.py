"""What a cold `saga show`, `saga list` and `saga --help` import: none of the heavy modules
(litellm, OpenTelemetry's SDK and metrics, PDF parsing, structlog, anyio, the JSON-shape
registry, the pipeline), and only the one command module the command line names.

Each probe runs the real entry point in a fresh process and prints ``sys.modules`` at exit
(``importlib.import_module``, how main.py loads commands, escapes ``-X importtime``). The
control shows the probe does see a listed module that a command imports lazily, so the
other tests cannot pass by looking at nothing."""

from __future__ import annotations

import json
from typing import Any

import pytest

from saga.cli.main import COMMANDS
from saga.state.keys import Keys
from tests.cli.inspect_support import machine, python, start

pytestmark = pytest.mark.anyio

HEAVY = (
    "litellm",
    "opentelemetry.sdk",
    "opentelemetry.metrics",  # redis-py's instrumentation (saga.lean_imports hides it)
    "opentelemetry.exporter",
    "pypdfium2",
    "pypdf",
    "rapidfuzz",
    "httpx",
    "structlog",
    "anyio",  # saga.cli.common.run starts asyncio itself
    "tenacity",
    "saga.cli.shapes",  # the registry of every command's shapes (not shapes_saga)
    "saga.api.pipeline",
    "saga.documents.pipeline",
    "saga.steps.parser",
)
PROBE = """
import json, sys
from saga.cli.main import main
try:
    rc = main(sys.argv[1:])
except SystemExit as exc:  # --help
    rc = exc.code
sys.stdout.flush()
print(json.dumps(sorted(sys.modules)), file=sys.stderr)
sys.exit(rc)
"""


def heavy_in(loaded: list[str]) -> list[str]:
    return [m for m in loaded if any(m == h or m.startswith(h + ".") for h in HEAVY)]


def probe(keys: Keys, redis_url: str, *argv: str) -> tuple[str, list[str]]:
    """The command's stdout and every module loaded when it exited (it must succeed)."""
    res = python(keys, redis_url, "-c", PROBE, *argv)
    assert res.returncode == 0, res.stderr[-2000:]
    return res.stdout, json.loads(res.stderr.strip().splitlines()[-1])


@pytest.mark.parametrize(
    "argv",
    [("show", "--json", "mr-lean"), ("show", "mr-lean"), ("list",), ("list", "--json")],
    ids=" ".join,
)
async def test_show_and_list_import_nothing_heavy(
    redis: Any, keys: Keys, redis_url: str, argv: tuple[str, ...]
) -> None:
    """The command read the saga through Redis, loaded its own module and no other
    command's, and none of HEAVY."""
    await start(await machine(redis, keys), "mr-lean")
    out, loaded = probe(keys, redis_url, *argv)
    assert "mr-lean" in out
    assert {"redis.asyncio", "saga.state.keys", f"saga.cli.cmd_{argv[0]}"} <= set(loaded)
    assert [m for m in loaded if m.startswith("saga.cli.cmd_")] == [f"saga.cli.cmd_{argv[0]}"]
    assert heavy_in(loaded) == []


def test_help_lists_every_command_and_imports_neither_redis_nor_heavy(
    keys: Keys, redis_url: str
) -> None:
    """`saga --help` builds every command's parser (it lists them all) but reaches no
    server: no redis-py, nothing heavy."""
    out, loaded = probe(keys, redis_url, "--help")
    assert all(f"saga.cli.cmd_{name}" in loaded for name in ("show", "list", "worker"))
    assert "show" in out and "worker" in out
    assert [m for m in loaded if m == "redis" or m.startswith("redis.")] == []
    assert heavy_in(loaded) == []


async def test_the_probe_sees_a_heavy_module_a_command_imports(
    redis: Any, keys: Keys, redis_url: str
) -> None:
    """The control: `saga top --once --json` prints the registry's TopDocument and reads
    the breakers (structlog), and the probe finds both among the listed modules."""
    await start(await machine(redis, keys), "mr-lean")
    _, loaded = probe(keys, redis_url, "top", "--once", "--json", "--interval", "0")
    assert {"saga.cli.shapes", "structlog"} <= set(heavy_in(loaded))


def test_a_command_line_not_starting_with_a_command_gets_the_full_parser() -> None:
    """A typo or an option first is answered by the parser of every command."""
    from saga.cli.main import build_parser, named_command

    assert named_command(["show", "r1"]) == "show"
    assert named_command(["shwo", "r1"]) is None and named_command(["--help"]) is None
    assert named_command([]) is None
    choices = build_parser()._subparsers._group_actions[0].choices  # type: ignore[union-attr]
    assert set(choices) == set(COMMANDS)
    only = build_parser("show")._subparsers._group_actions[0].choices  # type: ignore[union-attr]
    assert set(only) == {"show"}
