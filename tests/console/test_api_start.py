"""``POST /api/v1/sagas`` against a real console and server: idempotent starts (201 then
200), the producer role's bounds (no lists, no outputs, no actions), other saga types,
bad input in one sentence, and the per-token rate limit (429 with Retry-After)."""

from __future__ import annotations

import time
from typing import Any

import pytest

from saga.console.tokens import Role, add_stored_token
from saga.state.keys import Keys
from saga.state.machine import StateMachine
from saga.state.reads import get_saga, get_saga_and_history
from tests.console.conftest import StartConsole
from tests.console.sagas import NAME_IN_OUTPUT, SECRET_DOC, flagged
from tests.console.support import RunningConsole, check_schema, console_signer, walk

pytestmark = pytest.mark.anyio


@pytest.fixture
async def producer(redis: Any, keys: Keys) -> str:
    """A stored producer token named ``clinic``."""
    now = int(time.time() * 1000)
    signer = console_signer()
    return await add_stored_token(redis, keys, "clinic", Role.PRODUCER, signer=signer, now_ms=now)


async def start(console: RunningConsole, token: str, **body: Any) -> Any:
    async with console.client(token) as http:
        return await http.post("/api/v1/sagas", json=body)


async def test_a_start_is_201_then_200_and_reads_back(
    sm: StateMachine, console: RunningConsole, producer: str, redis: Any, keys: Keys
) -> None:
    """The first start creates the saga (201, Location, the start document); the same start
    again changes nothing (200, same epoch); GET returns its state; history names nobody
    but the user, and the audit log has the token's name."""
    body = {"record_id": "mr-api-1", "user_id": "u-7", "input": {"document": "x.pdf"}}
    first = await start(console, producer, **body)
    assert first.status_code == 201, first.text
    assert first.headers["location"] == "/api/v1/sagas/mr-api-1"
    doc = first.json()
    check_schema("StartDocument", doc)
    assert doc["created"] is True
    assert (doc["saga"]["record_id"], doc["saga"]["user_id"]) == ("mr-api-1", "u-7")
    assert doc["saga"]["state"] == "pending" and doc["saga"]["step"] == "router"
    again = await start(console, producer, **body)
    assert again.status_code == 200, again.text
    assert again.json()["created"] is False
    assert again.json()["saga"]["epoch"] == doc["saga"]["epoch"] == 1
    saga, events = await get_saga_and_history(redis, keys, "mr-api-1")
    assert saga.user_id == "u-7" and [e.event.value for e in events] == ["started"]
    async with console.client(producer) as http:
        read = await http.get("/api/v1/sagas/mr-api-1")
    assert read.status_code == 200, read.text
    check_schema("ShowDocument", read.json())
    assert read.json()["saga"]["state"] == "pending"


async def test_another_users_record_is_a_409_and_stays_theirs(
    console: RunningConsole, producer: str, redis: Any, keys: Keys
) -> None:
    """A record owned by one user cannot be started for another: 409 without the owner's
    id, and nothing changes."""
    assert (await start(console, producer, record_id="mr-own", user_id="u-1")).status_code == 201
    res = await start(console, producer, record_id="mr-own", user_id="u-2")
    assert res.status_code == 409, res.text
    assert res.json() == {
        "error": "record mr-own has a saga of another user; pick another record id"
    }
    assert (await get_saga(redis, keys, "mr-own")).user_id == "u-1"


async def test_bad_input_is_one_sentence(console: RunningConsole, producer: str) -> None:
    """Each bad body is a 400 with one sentence saying what is wrong."""
    cases: list[tuple[dict[str, Any], str]] = [
        ({"user_id": "u-1"}, "record_id is required"),
        ({"record_id": "a b", "user_id": "u-1"}, "record id 'a b' contains ' '"),
        ({"record_id": "r1", "user_id": "u-1", "input": [1]}, "input must be a JSON object"),
        ({"record_id": "r1", "user_id": "u-1", "priority": "high"}, "priority must be"),
        ({"record_id": "r1", "user_id": "u-1", "priority": 11}, "priority must be"),
        ({"record_id": "r1", "user_id": "u-1", "priority": True}, "priority must be"),
        ({"record_id": "r1", "user_id": "u-1", "colour": "red"}, "unknown field 'colour'"),
        ({"record_id": "r1", "user_id": "u-1", "type": "nope"}, "no saga type 'nope'"),
        ({"record_id": "r1", "user_id": "u-1", "input": {"pages": 3}}, "reads no field 'pages'"),
    ]
    for body, says in cases:
        res = await start(console, producer, **body)
        assert res.status_code == 400, (body, res.text)
        assert says in res.json()["error"], (body, res.json())
        assert "Traceback" not in res.text
    async with console.client(producer) as http:
        res = await http.post("/api/v1/sagas", content=b"{not json", headers={
            "Content-Type": "application/json"})  # fmt: skip
    assert res.status_code == 400 and res.json() == {"error": "the request body is not valid JSON"}


async def test_a_producer_cannot_list_read_outputs_or_act(
    sm: StateMachine, console: RunningConsole, producer: str, tokens: dict[Role, str]
) -> None:
    """A producer reads one saga as a viewer does (no document, no outputs), and every
    list, cost, queue and action route is a 403 for it; a viewer cannot start."""
    await flagged(sm, "mr-flag", "u-3")
    async with console.client(producer) as http:
        read = await http.get("/api/v1/sagas/mr-flag")
        assert read.status_code == 200, read.text
        check_schema("ShowDocument", read.json())
        assert "outputs" not in read.json()
        assert not any(SECRET_DOC in s or NAME_IN_OUTPUT in s for s in walk(read.json()))
        for path in ("/sagas", "/counts", "/queues", "/dead-letters", "/costs", "/budgets"):
            res = await http.get(f"/api/v1{path}")
            assert res.status_code == 403, (path, res.text)
        for path in ("/sagas/mr-flag/retry", "/sagas/mr-flag/cancel", "/dead-letters/purge",
                     "/sagas/mr-flag/review/accept"):  # fmt: skip
            res = await http.post(f"/api/v1{path}", json={})
            assert res.status_code == 403, (path, res.text)
            # the review routes are a reviewer's first: a producer is refused there earlier
            need = "needs the" if "/review/" in path else "needs the operator role"
            assert need in res.json()["error"], (path, res.text)
        me = await http.get("/api/v1/me")
        assert me.json() == {"subject": "clinic", "role": "producer", "via": "token"}
    res = await start(console, tokens[Role.VIEWER], record_id="mr-v", user_id="u-1")
    assert res.status_code == 403
    assert res.json()["error"] == (
        "this needs the producer or operator role; you are signed in as viewer"
    )
    operator = await start(console, tokens[Role.OPERATOR], record_id="mr-o", user_id="u-1")
    assert operator.status_code == 201, operator.text


async def test_a_start_of_another_registered_type(
    console: RunningConsole, producer: str, redis: Any, keys: Keys
) -> None:
    """``type`` starts a saga of another registered type, whose first step gets the input."""
    from saga.state.types import TypeInfo, register_type

    await register_type(redis, keys, TypeInfo(name="labs", steps=("fetch", "score")))
    body = {"record_id": "lab-1", "user_id": "u-1", "type": "labs", "input": {"panel": "cbc"}}
    res = await start(console, producer, **body)
    assert res.status_code == 201, res.text
    assert res.json()["saga"]["step"] == "fetch"
    assert res.headers["location"] == "/api/v1/sagas/lab-1?type=labs"
    assert (await get_saga(redis, keys.of_type("labs"), "lab-1")).step == "fetch"
    async with console.client(producer) as http:
        read = await http.get(res.headers["location"])
    assert read.status_code == 200 and read.json()["saga"]["record_id"] == "lab-1"


async def test_the_rate_limit_is_per_token_with_retry_after(
    start_console: StartConsole, producer: str, redis: Any, keys: Keys
) -> None:
    """Over its burst a token gets 429 with Retry-After and nothing is started; another
    token still gets through."""
    console = start_console(SAGA_CONSOLE_START_RATE="0.2", SAGA_CONSOLE_START_BURST="3")
    codes = [(await start(console, producer, record_id=f"mr-r{i}", user_id="u-1")).status_code
             for i in range(3)]  # fmt: skip
    assert codes == [201, 201, 201]
    over = await start(console, producer, record_id="mr-r3", user_id="u-1")
    assert over.status_code == 429, over.text
    assert 1 <= int(over.headers["retry-after"]) <= 5
    assert "over its rate" in over.json()["error"]
    assert await redis.exists(keys.saga("mr-r3")) == 0
    async with console.client(producer) as http:
        assert (await http.get("/api/v1/sagas/mr-r0")).status_code == 429
    other = await add_stored_token(redis, keys, "lab", Role.PRODUCER, signer=console_signer(),
                                   now_ms=int(time.time() * 1000))  # fmt: skip
    assert (await start(console, other, record_id="mr-r3", user_id="u-1")).status_code == 201


async def test_a_start_carries_its_priority(
    console: RunningConsole, producer: str, redis: Any, keys: Keys
) -> None:
    """``priority`` reaches the saga: stored with it, and listed as urgent at its first step."""
    res = await start(console, producer, record_id="mr-urgent", user_id="u-1", priority=7)
    assert res.status_code == 201, res.text
    assert await redis.hget(keys.saga("mr-urgent"), "pri") == b"7"
    assert await redis.zscore(keys.urgent(0, "router"), "mr-urgent") is not None
