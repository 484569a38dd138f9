"""start_saga: create a saga and enqueue its first step; idempotent per (record, user)."""

from __future__ import annotations

from typing import Any

import pytest

from saga.state.errors import InvalidIdError, SagaExistsError
from saga.state.keys import Keys
from saga.state.machine import StateMachine
from saga.state.model import SagaState
from tests.state.helpers import events, history, keys_under, saga_hash, snapshot, stream_rows

pytestmark = pytest.mark.anyio

BAD_IDS = ["a{b", "a}b", "{p0}", "a b", "a\nb", "a\x00b", "a\tb", "", "x" * 129, "é"]


async def test_start_creates_saga_and_enqueues_first_step(sm: StateMachine, keys: Keys) -> None:
    """A new record gets a pending saga at its first step, one ready entry and a 'started' event."""
    res = await sm.start("r1", "u1", "router", input_json=b'{"doc":1}', document="file:///x")
    assert res.created and res.state == SagaState.PENDING and res.step == "router"
    assert res.epoch == 1
    h = await saga_hash(sm.client, keys, "r1")
    assert h["state"] == "pending" and h["step"] == "router" and h["uid"] == "u1"
    assert h["out:_input"] == '{"doc":1}' and h["doc"] == "file:///x" and h["v"] == "1"
    rows = await stream_rows(sm.client, keys.ready(0, "router"))
    assert rows == [(h["entry"], {"rid": "r1", "ep": "1", "v": "1"})]
    hist = await history(sm.client, keys, "r1")
    assert [(e["e"], e["s"], e["ep"], e["x"]) for e in hist] == [("started", "router", "1", "u1")]
    assert await sm.client.zscore(keys.state_index(0, SagaState.PENDING), "r1") is not None
    assert await sm.client.zscore(keys.created_index(0), "r1") is not None
    assert await sm.client.zscore(keys.user_index(0, "u1"), "r1") is not None


async def test_start_same_user_is_duplicate_and_writes_nothing(
    sm: StateMachine, keys: Keys
) -> None:
    """Starting the same record for the same user returns the existing saga and writes nothing."""
    first = await sm.start("r1", "u1", "router")
    before = await snapshot(sm.client, keys.prefix)
    again = await sm.start("r1", "u1", "router", op="another-op")
    assert not again.created
    assert (again.state, again.step, again.epoch, again.created_ms) == (
        first.state,
        first.step,
        first.epoch,
        first.created_ms,
    )
    assert await snapshot(sm.client, keys.prefix) == before


async def test_start_other_user_raises_saga_exists(sm: StateMachine, keys: Keys) -> None:
    """Starting an existing record for another user raises SagaExistsError and writes nothing."""
    await sm.start("r1", "u1", "router")
    before = await snapshot(sm.client, keys.prefix)
    with pytest.raises(SagaExistsError, match="another user"):
        await sm.start("r1", "u2", "router")
    assert await snapshot(sm.client, keys.prefix) == before
    assert await events(sm.client, keys, "r1") == ["started"]


@pytest.mark.parametrize("bad", BAD_IDS, ids=repr)
@pytest.mark.parametrize("which", ["record", "user"])
async def test_start_refuses_invalid_ids_before_writing(
    redis: Any, keys: Keys, bad: str, which: str
) -> None:
    """An id that could break a key or a hash tag is refused before any key is written."""
    sm = StateMachine(redis, keys)
    record, user = (bad, "u1") if which == "record" else ("r1", bad)
    with pytest.raises(InvalidIdError):
        await sm.start(record, user, "router")
    assert await keys_under(redis, keys.prefix) == []


async def test_start_accepts_an_id_of_exactly_128_characters(sm: StateMachine) -> None:
    """The length limit is inclusive: 128 characters are a valid record id."""
    res = await sm.start("r" * 128, "u" * 128, "router")
    assert res.created
