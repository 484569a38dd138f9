"""Starting sagas from other languages: ``curl`` and a Node.js client written against the
OpenAPI document (tests/console/node/saga_client.mjs, global fetch, no npm packages),
each against a real console and server."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path
from typing import Any

import anyio
import pytest

from saga.console.tokens import Role, add_stored_token
from saga.state.keys import Keys
from saga.state.reads import get_saga
from tests.console.conftest import StartConsole
from tests.console.support import RunningConsole, console_signer

pytestmark = pytest.mark.anyio
NODE = shutil.which("node")
CURL = shutil.which("curl")
CLIENT = Path(__file__).parent / "node" / "saga_client.mjs"


@pytest.fixture
async def producer(redis: Any, keys: Keys) -> str:
    now = int(time.time() * 1000)
    signer = console_signer()
    return await add_stored_token(redis, keys, "clinic", Role.PRODUCER, signer=signer, now_ms=now)


async def run(*argv: str) -> str:
    done = await anyio.run_process(list(argv), check=False)
    assert done.returncode == 0, done.stderr.decode()
    return done.stdout.decode()


async def node(console: RunningConsole, token: str, *args: str) -> Any:
    assert NODE is not None
    return json.loads(await run(NODE, str(CLIENT), console.url, token, *args))


@pytest.mark.skipif(NODE is None, reason="needs node (Debian's nodejs)")
async def test_node_starts_idempotently_and_reads_state(
    console: RunningConsole, producer: str, redis: Any, keys: Keys
) -> None:
    """The Node client finds the operations in the OpenAPI document, starts a saga (201),
    starts it again (200, unchanged) and reads its state back."""
    first = await node(console, producer, "start", "mr-node", "u-9", '{"document": "a.pdf"}')
    assert first["status"] == 201, first
    assert first["location"] == "/api/v1/sagas/mr-node"
    assert first["body"]["created"] is True and first["body"]["saga"]["user_id"] == "u-9"
    again = await node(console, producer, "start", "mr-node", "u-9", '{"document": "b.pdf"}')
    assert again["status"] == 200 and again["body"]["created"] is False
    read = await node(console, producer, "get", "mr-node")
    assert read["status"] == 200 and read["body"]["saga"]["state"] == "pending"
    assert (await get_saga(redis, keys, "mr-node")).user_id == "u-9"
    missing = await node(console, producer, "get", "mr-none")
    assert missing["status"] == 404


@pytest.mark.skipif(NODE is None, reason="needs node (Debian's nodejs)")
async def test_node_sees_429_with_retry_after(start_console: StartConsole, producer: str) -> None:
    """A burst over the token's limit answers 429 with Retry-After to the Node client."""
    console = start_console(SAGA_CONSOLE_START_RATE="0.1", SAGA_CONSOLE_START_BURST="2")
    out = await node(console, producer, "burst", "4", "mr-b", "u-1")
    assert out["statuses"] == [201, 201, 429, 429], out
    assert int(out["retry_after"]) >= 1


@pytest.mark.skipif(CURL is None, reason="needs curl")
async def test_curl_starts_and_reads(console: RunningConsole, producer: str) -> None:
    """curl with a bearer token: 201, then 200 for the same record, then the saga's state;
    a wrong token is a 401."""
    assert CURL is not None

    async def post(token: str, body: dict[str, Any]) -> tuple[int, Any]:
        out = await run(CURL, "-sS", "-o", "-", "-w", "\n%{http_code}", "-X", "POST",
                        "-H", f"Authorization: Bearer {token}",
                        "-H", "Content-Type: application/json",
                        "--data", json.dumps(body), f"{console.url}/api/v1/sagas")  # fmt: skip
        text, _, code = out.rpartition("\n")
        return int(code), json.loads(text)

    body = {"record_id": "mr-curl", "user_id": "u-4"}
    assert (await post(producer, body))[0] == 201
    code, doc = await post(producer, body)
    assert code == 200 and doc["created"] is False
    read = json.loads(await run(CURL, "-sS", "-H", f"Authorization: Bearer {producer}",
                                f"{console.url}/api/v1/sagas/mr-curl"))  # fmt: skip
    assert read["saga"]["record_id"] == "mr-curl" and read["saga"]["state"] == "pending"
    code, doc = await post("saga_wrong", body)
    assert code == 401 and doc == {"error": "the token is unknown, expired or revoked"}
