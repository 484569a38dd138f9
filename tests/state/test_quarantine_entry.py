"""quarantine_entry: move a malformed entry aside with its reason and raw fields, and ack it."""

from __future__ import annotations

import base64
import json

import pytest

from saga.state.keys import GROUP, Keys
from saga.state.machine import StateMachine
from saga.state.model import SagaState
from saga.state.recovery import quarantine
from tests.state.helpers import pending, stream_rows

pytestmark = pytest.mark.anyio


async def test_quarantine_moves_entry_with_reason_and_raw_fields(
    sm: StateMachine, keys: Keys
) -> None:
    """The entry lands in the quarantine with its raw fields (non-UTF-8 as base64) and is acked."""
    stream = keys.ready(0, "router")
    raw_fields = {b"rid": b"\xff\xfe bad", b"note": "ünïcode".encode()}
    entry = (await sm.client.xadd(stream, raw_fields)).decode()
    [[_, [(got_id, got_fields)]]] = await sm.client.xreadgroup(GROUP, "w-a", {stream: ">"}, count=1)
    assert got_id.decode() == entry
    qid = await quarantine(sm, "router", 0, entry, "rid is not UTF-8", got_fields)
    [(row_id, row)] = await stream_rows(sm.client, keys.quarantine(0))
    assert row_id == qid
    assert (row["entry"], row["stream"], row["reason"]) == (entry, stream, "rid is not UTF-8")
    assert json.loads(row["raw"]) == {
        "rid": "base64:" + base64.b64encode(b"\xff\xfe bad").decode(),
        "note": "ünïcode",
    }
    assert await pending(sm.client, stream) == []


async def test_quarantine_resent_writes_one_entry(sm: StateMachine, keys: Keys) -> None:
    """A re-sent quarantine (the reply was lost) finds the entry acknowledged: no second row."""
    stream = keys.ready(0, "router")
    entry = (await sm.client.xadd(stream, {b"junk": b"1"})).decode()
    await sm.client.xreadgroup(GROUP, "w-a", {stream: ">"}, count=1)
    first = await quarantine(sm, "router", 0, entry, "entry lacks field(s) rid, ep, v", {})
    again = await quarantine(sm, "router", 0, entry, "entry lacks field(s) rid, ep, v", {})
    assert first and again == ""
    assert [row_id for row_id, _ in await stream_rows(sm.client, keys.quarantine(0))] == [first]


async def test_an_entry_never_delivered_is_not_quarantined(sm: StateMachine, keys: Keys) -> None:
    stream = keys.ready(0, "router")
    entry = (await sm.client.xadd(stream, {b"junk": b"1"})).decode()
    assert await quarantine(sm, "router", 0, entry, "not read by anyone", {}) == ""
    assert await stream_rows(sm.client, keys.quarantine(0)) == []


async def test_quarantining_a_sagas_current_entry_dead_letters_it(
    sm: StateMachine, keys: Keys
) -> None:
    """A saga whose own entry is quarantined is dead-lettered ('Quarantined'), not left
    pending forever; an entry the saga no longer waits on leaves it alone."""
    await sm.start("q-1", "u1", "router")
    stream = keys.ready(0, "router")
    [[_, [(entry, _)]]] = await sm.client.xreadgroup(GROUP, "w-a", {stream: ">"}, count=1)
    stray = (await sm.client.xadd(stream, {b"rid": b"q-1", b"ep": b"x", b"v": b"1"})).decode()
    await sm.client.xreadgroup(GROUP, "w-a", {stream: ">"}, count=1)
    await quarantine(sm, "router", 0, stray, "epoch 'x' is not a number", {}, "q-1")
    assert (await sm.client.hget(keys.saga("q-1"), "state")) == b"pending"
    await quarantine(sm, "router", 0, entry.decode(), "epoch 'x' is not a number", {}, "q-1")
    saga = await sm.client.hgetall(keys.saga("q-1"))
    assert (saga[b"state"], saga[b"ec"]) == (b"failed", b"Quarantined")
    [(_, dead)] = await stream_rows(sm.client, keys.dead(0, "router"))
    assert dead["rid"] == "q-1" and "was quarantined" in dead["em"]
    assert await sm.client.zscore(keys.state_index(0, SagaState.FAILED), "q-1") is not None
    history = [row["e"] for _, row in await stream_rows(sm.client, keys.history("q-1"))]
    assert history == ["started", "dead_lettered"]
    assert await pending(sm.client, stream) == []
