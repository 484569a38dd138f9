"""Every API answer is valid under the JSON Schema of the CLI `--json` document it
mirrors (saga/cli/schemas/, written from the CLI's Structs): one shape for both faces.
Skipped, saying so, on a tree whose CLI has no schemas yet."""

from __future__ import annotations

import json
from typing import Any

import jsonschema
import pytest

from saga.console.tokens import Role
from saga.state.machine import StateMachine
from tests.cli.inspect_support import start
from tests.console.sagas import dead, flagged
from tests.console.support import REPO, RunningConsole

pytestmark = pytest.mark.anyio
SCHEMAS = REPO / "saga" / "cli" / "schemas"

READS = {  # (API path, role) -> the CLI command's schema
    ("/sagas", Role.VIEWER): "list",
    ("/sagas/mr-flag", Role.VIEWER): "show",
    ("/sagas/mr-flag", Role.OPERATOR): "show-output",
    ("/queues", Role.VIEWER): "top",
    ("/dead-letters", Role.VIEWER): "dlq-letters",
    ("/costs", Role.VIEWER): "costs",
}
ACTIONS = [  # (API path, body) -> schema, in an order that leaves each one something to do
    ("/dead-letters/replay", {"dry_run": True}, "dlq-replay"),
    ("/sagas/mr-dead/retry", {"step": "parser"}, "retry"),
    ("/sagas/mr-new/cancel", {}, "cancel"),
    ("/sagas/mr-flag/review/accept", {"note": "ok"}, "review-accept"),
    ("/dead-letters/purge", {}, "dlq-purge"),
]


def validate(name: str, data: Any) -> None:
    schema = json.loads((SCHEMAS / f"{name}.json").read_text())
    jsonschema.Draft202012Validator(schema).validate(data)


async def test_api_answers_are_valid_cli_documents(
    sm: StateMachine, console: RunningConsole, tokens: dict[Role, str]
) -> None:
    """Reads and actions, as each role gets them, validate against the CLI's schemas."""
    await dead(sm, "mr-dead", "u-1")
    await flagged(sm, "mr-flag", "u-1")
    await start(sm, "mr-new", "u-1")
    for (path, role), name in READS.items():
        async with console.client(tokens[role]) as http:
            res = await http.get(f"/api/v1{path}")
        assert res.status_code == 200, res.text
        validate(name, res.json())
    async with console.client(tokens[Role.OPERATOR]) as http:
        for path, body, name in ACTIONS:
            res = await http.post(f"/api/v1{path}", json=body)
            assert res.status_code == 200, (path, res.text)
            validate(name, res.json())
