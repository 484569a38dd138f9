"""Every command's --json output validates against its shipped JSON Schema
(saga/cli/schemas), the schemas match the Structs they are generated from, and a
saga is the same object wherever it is printed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from saga.cli import shapes
from saga.state.keys import Keys
from saga.state.model import FailAction
from tests.cli.inspect_support import cli, commit, fail, machine, run_to_dead, start

pytestmark = pytest.mark.anyio


def validate(name: str, doc: Any) -> None:
    schema = json.loads((shapes.SCHEMAS / f"{name}.json").read_text())
    jsonschema.Draft202012Validator(schema).validate(doc)


def output(keys: Keys, redis_url: str, *argv: str) -> Any:
    res = cli(keys, redis_url, *argv, "--json")
    assert res.returncode == 0, (argv, res.stderr)
    return json.loads(res.stdout)


@pytest.mark.parametrize("name", sorted(shapes.NAMES))
def test_schema_files_match_the_structs(name: str) -> None:
    """A shipped schema is what its Struct generates (`python -m saga.cli.shapes`)."""
    path = shapes.SCHEMAS / f"{name}.json"
    assert path.read_text() == shapes.rendered(name), f"run `python -m saga.cli.shapes`: {path}"


def test_every_schema_is_documented() -> None:
    """docs/json.md names every schema file."""
    doc = (Path(__file__).resolve().parents[2] / "docs" / "json.md").read_text()
    missing = [n for n in shapes.NAMES if f"schemas/{n}.json" not in doc]
    assert not missing


async def test_saga_commands_print_their_shapes(redis: Any, keys: Keys, redis_url: str) -> None:
    """start, start --wait, show, show --follow, list, retry, cancel: valid documents, and
    the saga in start --wait is the saga show prints."""
    sm = await machine(redis, keys)
    validate("start", output(keys, redis_url, "start", "mr-ok", "u-1"))
    for step in ("router", "parser", "grouper"):
        await commit(sm, step, cost=0.25 if step == "parser" else 0.0)
    waited = output(keys, redis_url, "start", "mr-ok", "u-1", "--wait")
    shown = output(keys, redis_url, "show", "mr-ok")
    validate("start", waited)
    validate("show", shown)
    assert waited["created"] is False and waited["saga"] == shown["saga"]
    assert shown["saga"]["state"] == "completed" and shown["saga"]["total_cost"] == 0.25
    follow = cli(keys, redis_url, "show", "mr-ok", "--follow", "--json")
    lines = [json.loads(line) for line in follow.stdout.splitlines()]
    assert len(lines) == len(shown["events"])
    for line in lines:
        validate("event", line)
    await run_to_dead(sm, "mr-dead", "parser")
    listed = output(keys, redis_url, "list")
    validate("list", listed)
    row = next(r for r in listed["sagas"] if r["record_id"] == "mr-ok")
    assert {k: row[k] for k in ("state", "step", "total_cost", "created_ms")} == {
        k: shown["saga"][k] for k in ("state", "step", "total_cost", "created_ms")
    }
    validate("retry-bulk", output(keys, redis_url, "retry", "--step", "parser", "--dry-run"))
    validate("retry", output(keys, redis_url, "retry", "mr-dead", "--step", "parser"))
    validate("cancel", output(keys, redis_url, "cancel", "mr-dead"))


async def test_operator_commands_print_their_shapes(redis: Any, keys: Keys, redis_url: str) -> None:
    """dlq list/show/replay/purge, top, costs, init, config, controller --check: valid."""
    sm = await machine(redis, keys)
    await start(sm, "mr-x", "u-2")
    await fail(sm, "router", FailAction.DEAD, cost=0.01)
    validate("dlq-letters", output(keys, redis_url, "dlq", "list"))
    validate("dlq-letters", output(keys, redis_url, "dlq", "show", "mr-x"))
    validate("dlq-replay", output(keys, redis_url, "dlq", "replay", "--dry-run"))
    validate("top", output(keys, redis_url, "top", "--once", "--interval", "0"))
    costs = output(keys, redis_url, "costs")
    validate("costs", costs)
    assert costs["total_usd"] == 0.01
    validate("init", output(keys, redis_url, "init"))
    validate("config", output(keys, redis_url, "config"))
    check = cli(keys, redis_url, "controller", "--check", "--json")  # exit 1 if a check fails
    validate("controller-check", json.loads(check.stdout))
    validate("dlq-purge", output(keys, redis_url, "dlq", "purge", "--yes"))


def test_server_status_prints_its_shape(tmp_path: Path) -> None:
    """saga server status --json (embedded server not running) is a valid document."""
    env = {k: v for k, v in os.environ.items() if k != "REDIS_URL"}
    env["SAGA_DATA_DIR"] = str(tmp_path)
    for action in ("status", "stop"):
        argv = [sys.executable, "-m", "saga.cli.main", "server", action, "--json"]
        res = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60, check=False)
        assert res.returncode == 0, res.stderr
        validate("server", json.loads(res.stdout))
