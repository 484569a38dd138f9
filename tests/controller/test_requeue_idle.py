"""requeue_idle: entries idle past the lease go back to the stream as new entries, once,
and only when the saga still expects them and no live lease holds them."""

from __future__ import annotations

import pytest

from saga.state.codes import RC
from saga.state.keys import GROUP, Keys
from saga.state.machine import StateMachine
from saga.state.model import SagaState
from saga.state.requeue import idle_pending, requeue_idle
from tests.state.helpers import (
    claim_next,
    events,
    pending_ids,
    read_ready,
    saga_hash,
    snapshot,
    stream_rows,
    wait_lease_expired,
)

pytestmark = pytest.mark.anyio

READY = "router"


async def delivered(sm: StateMachine, record: str) -> str:
    """Start ``record`` and deliver its router entry to a worker that then vanishes."""
    await sm.start(record, "u1", READY)
    [(entry, rid)] = await read_ready(sm.client, sm.keys, READY, "w-gone", count=1)
    assert rid == record
    return entry


async def lag(sm: StateMachine) -> int:
    groups = await sm.client.xinfo_groups(sm.keys.ready(0, READY))
    return int(next(g for g in groups if g["name"] == GROUP.encode())["lag"])


async def test_delivered_but_unclaimed_entry_is_requeued(sm: StateMachine, keys: Keys) -> None:
    """A pending saga's idle entry is acked and re-added: lag rises, the saga points at it."""
    old = await delivered(sm, "r1")
    assert await lag(sm) == 0
    [out] = await requeue_idle(sm, READY, 0, [(old, "r1")], min_idle_ms=0)
    assert out.code == RC.OK and out.entry_id == old
    new = out.detail
    assert await pending_ids(sm.client, keys.ready(0, READY)) == set()
    assert await lag(sm) == 1
    rows = dict(await stream_rows(sm.client, keys.ready(0, READY)))
    assert rows[new] == {"rid": "r1", "ep": "1", "v": "1", "rq": old}  # the one it replaces
    h = await saga_hash(sm.client, keys, "r1")
    assert (h["state"], h["entry"]) == ("pending", new)
    # The next reader claims it like any entry.
    claim = await claim_next(sm, READY, "w-new")
    assert (claim.entry_id, claim.attempt) == (new, 1)


async def test_expired_lease_is_requeued_and_the_claim_takes_it_over(
    sm: StateMachine, keys: Keys
) -> None:
    """A running saga whose lease expired stays running; the new entry's claim reclaims it."""
    await sm.start("r1", "u1", READY)
    dead = await claim_next(sm, READY, "w-gone", lease_ms=1)
    await wait_lease_expired(sm.client, dead.lease_until_ms)
    [out] = await requeue_idle(sm, READY, 0, [(dead.entry_id, "r1")], min_idle_ms=0)
    assert out.code == RC.OK
    assert (await saga_hash(sm.client, keys, "r1"))["state"] == SagaState.RUNNING
    claim = await claim_next(sm, READY, "w-new")
    assert (claim.entry_id, claim.attempt) == (out.detail, 2)
    assert (await events(sm.client, keys, "r1"))[-1] == "reclaimed"


async def test_entry_not_idle_enough_is_left_alone(sm: StateMachine, keys: Keys) -> None:
    """BUSY: an entry idle less than the threshold (a worker has it) is not touched."""
    old = await delivered(sm, "r1")
    before = await snapshot(sm.client, keys.prefix)
    [out] = await requeue_idle(sm, READY, 0, [(old, "r1")], min_idle_ms=600_000)
    assert out.code == RC.BUSY
    assert await snapshot(sm.client, keys.prefix) == before


async def test_live_lease_is_left_pending(sm: StateMachine, keys: Keys) -> None:
    """LEASE_HELD: a saga whose lease is live keeps its entry pending, untouched."""
    await sm.start("r1", "u1", READY)
    claim = await claim_next(sm, READY, "w-alive")
    before = await snapshot(sm.client, keys.prefix)
    [out] = await requeue_idle(sm, READY, 0, [(claim.entry_id, "r1")], min_idle_ms=0)
    assert (out.code, out.detail) == (RC.LEASE_HELD, "w-alive")
    assert await snapshot(sm.client, keys.prefix) == before


async def test_superseded_entry_is_acknowledged_and_dropped(sm: StateMachine, keys: Keys) -> None:
    """STALE_ENTRY: an entry the saga does not point at (a stray copy) is acknowledged."""
    await sm.start("r1", "u1", READY)
    await sm.client.xadd(keys.ready(0, READY), {"rid": "r1", "ep": "1", "v": "1"})
    [(_, _), (stray, _)] = await read_ready(sm.client, keys, READY, "w-gone", count=2)
    length = await sm.client.xlen(keys.ready(0, READY))
    [out] = await requeue_idle(sm, READY, 0, [(stray, "r1")], min_idle_ms=0)
    assert (out.code, out.detail) == (RC.STALE_ENTRY, "pending")
    assert stray not in await pending_ids(sm.client, keys.ready(0, READY))
    assert await sm.client.xlen(keys.ready(0, READY)) == length


async def test_entry_of_a_missing_saga_is_quarantined(sm: StateMachine, keys: Keys) -> None:
    """NOT_FOUND: no saga for the entry: it moves to the quarantine stream, acknowledged."""
    await sm.client.xadd(keys.ready(0, READY), {"rid": "ghost", "ep": "1", "v": "1"})
    [(entry, _)] = await read_ready(sm.client, keys, READY, "w-gone", count=1)
    [out] = await requeue_idle(sm, READY, 0, [(entry, "ghost")], min_idle_ms=0)
    assert out.code == RC.NOT_FOUND
    [(_, row)] = await stream_rows(sm.client, keys.quarantine(0))
    assert (row["entry"], row["rid"], row["reason"]) == (entry, "ghost", "saga not found")
    assert await pending_ids(sm.client, keys.ready(0, READY)) == set()


async def test_saga_of_a_newer_release_is_left_pending(sm: StateMachine, keys: Keys) -> None:
    """SCHEMA_NEWER: a saga written by a newer release is not touched."""
    old = await delivered(sm, "r1")
    await sm.client.hset(keys.saga("r1"), "v", 99)
    before = await snapshot(sm.client, keys.prefix)
    [out] = await requeue_idle(sm, READY, 0, [(old, "r1")], min_idle_ms=0)
    assert out.code == RC.SCHEMA_NEWER
    assert await snapshot(sm.client, keys.prefix) == before


async def test_resent_call_is_answered_from_the_record(sm: StateMachine, keys: Keys) -> None:
    """DUPLICATE: the same op id again writes nothing and returns the first new entry."""
    old = await delivered(sm, "r1")
    [first] = await requeue_idle(sm, READY, 0, [(old, "r1")], min_idle_ms=0, op="op-1")
    before = await snapshot(sm.client, keys.prefix)
    [again] = await requeue_idle(sm, READY, 0, [(old, "r1")], min_idle_ms=0, op="op-1")
    assert (again.code, again.detail) == (RC.DUPLICATE, first.detail)
    assert await snapshot(sm.client, keys.prefix) == before


async def test_idle_pending_lists_deleted_entries_without_fields(
    sm: StateMachine, keys: Keys
) -> None:
    """idle_pending reports each idle entry with its fields, and None for one deleted."""
    kept = await delivered(sm, "r1")
    gone = await delivered(sm, "r2")
    await sm.client.xdel(keys.ready(0, READY), gone)
    found = {
        e.entry_id: e.fields
        for e in await idle_pending(sm.client, keys.ready(0, READY), min_idle_ms=0)
    }
    assert found[gone] is None
    assert found[kept] is not None and found[kept][b"rid"] == b"r1"
    assert await idle_pending(sm.client, keys.ready(0, READY), min_idle_ms=600_000) == []


async def test_more_than_a_hundred_entries_are_refused(sm: StateMachine) -> None:
    """A call is bounded: over 100 entries is refused before anything is sent."""
    with pytest.raises(ValueError, match="at most 100"):
        await requeue_idle(sm, READY, 0, [(f"1-{i}", f"r{i}") for i in range(101)], min_idle_ms=0)
