"""The per-user cap when a saga leaves its step other than by commit or fail: cancel,
compensate and retry free the user's slot at once (handing it to the user's oldest
deferred entry in the same script), and a claim drops a released entry of an older
epoch, or one whose saga was cancelled, handing its reserved slot on."""

from __future__ import annotations

from typing import Any

import pytest

from saga.state import operator
from saga.state.codes import RC
from saga.state.keys import Keys
from saga.state.machine import StateMachine
from saga.state.replies import text
from saga.state.requests import CommitRequest
from saga.state.requeue import requeue_idle
from tests.state.helpers import LEASE_MS, read_ready, snapshot
from tests.state.test_user_cap import CAP, behind, claim_all, started

pytestmark = pytest.mark.anyio


async def _members(redis: Any, key: str) -> list[str]:
    return [text(m) for m in await redis.zrange(key, 0, -1)]


async def _a1_running_a2_deferred(sm: StateMachine) -> Any:
    sm.user_caps["router"] = (CAP, LEASE_MS)
    await started(sm, ("a1", "a"), ("a2", "a"))
    out = await claim_all(sm)
    assert [(o.record_id, o.code) for o in out] == [("a1", RC.OK), ("a2", RC.DEFERRED)]
    return out[0].claim


@pytest.mark.parametrize("how", ["cancel", "compensate", "retry"])
async def test_leaving_the_step_hands_the_slot_on_at_once(
    sm: StateMachine, keys: Keys, redis: Any, how: str
) -> None:
    """a1 runs under a live lease (a's only slot), a2 waits deferred: cancelling,
    compensating or force-retrying a1 releases a2 now, its entry holding the slot for what
    was left of a1's term, instead of a2 waiting until a1's lease runs out."""
    first = await _a1_running_a2_deferred(sm)
    held = await redis.zscore(keys.inflight(0, "router"), "a|a1")
    if how == "cancel":
        await operator.cancel(sm, "a1")
    elif how == "compensate":
        assert (await operator.compensate(sm, "a1", ("router",))).state == "compensated"
    else:
        await operator.retry(sm, "a1", "router", "_input", force=True)
    assert await _members(redis, keys.deferred(0, "router")) == []
    assert await _members(redis, keys.inflight(0, "router")) == ["a|a2"]
    assert await redis.zscore(keys.inflight(0, "router"), "a|a2") <= held
    out = await claim_all(sm)
    assert ("a2", RC.OK) in [(o.record_id, o.code) for o in out]
    assert first is not None


async def test_a_released_entry_of_an_older_epoch_is_not_claimed(
    sm: StateMachine, keys: Keys, redis: Any
) -> None:
    """a2 deferred in epoch 1, retried (epoch 2) and deferred again: when its epoch-1
    deferral is released, the claim drops that entry as stale (it carries ep 1) and hands
    the slot it reserved to a2's epoch-2 deferral, whose entry is then claimed."""
    first = await _a1_running_a2_deferred(sm)
    await operator.retry(sm, "a2", "router", "_input")
    assert [(o.record_id, o.code) for o in await claim_all(sm)] == [("a2", RC.DEFERRED)]
    await sm.commit(first, CommitRequest(output=b"{}", next_step="parser"))  # releases ep 1
    entries = await read_ready(redis, keys, "router", "w1")
    await behind(sm)
    kw: Any = {"worker": "w1", "lease_ms": LEASE_MS, "max_lease_expiries": 3,
               "user_cap": CAP, "op": "op-stale"}  # fmt: skip
    [old] = [o for o in await sm.claim("router", 0, entries, **kw) if o.record_id == "a2"]
    assert (old.record_id, old.code) == ("a2", RC.STALE_ENTRY)
    assert text(await redis.hget(keys.saga("a2"), "state")) == "pending"
    before = await snapshot(redis, keys.prefix)  # a re-sent batch hands no slot on again
    await sm.claim("router", 0, entries, **kw)
    assert await snapshot(redis, keys.prefix) == before
    [(_, fields)] = await redis.xrevrange(keys.ready(0, "router"), count=1)
    assert fields[b"ep"] == b"2"  # the slot went to the epoch-2 deferral
    [new] = await claim_all(sm)
    assert (new.record_id, new.code) == ("a2", RC.OK) and new.claim is not None
    assert new.claim.epoch == 2
    assert await _members(redis, keys.deferred(0, "router")) == []


async def test_a_released_entry_of_an_older_epoch_is_not_requeued_as_the_sagas(
    sm: StateMachine, keys: Keys, redis: Any
) -> None:
    """The controller's requeue of a released entry (read, not claimed) of an older epoch
    drops it, as the claim would, and hands the slot reserved for it on at once: a2's
    epoch-2 deferral is released into it (not held until the slot's term ends); a re-sent
    requeue writes nothing."""
    first = await _a1_running_a2_deferred(sm)
    await operator.retry(sm, "a2", "router", "_input")
    assert [(o.record_id, o.code) for o in await claim_all(sm)] == [("a2", RC.DEFERRED)]
    await sm.commit(first, CommitRequest(output=b"{}", next_step="parser"))  # releases ep 1
    entries = [(e, r) for e, r in await read_ready(redis, keys, "router", "w1") if r == "a2"]
    [out] = await requeue_idle(sm, "router", 0, entries, min_idle_ms=0, op="op-rq")
    assert out.code == RC.STALE_ENTRY
    assert text(await redis.hget(keys.saga("a2"), "entry")) == ""
    assert await _members(redis, keys.deferred(0, "router")) == []
    assert await _members(redis, keys.inflight(0, "router")) == ["a|a2"]
    [(_, fields)] = await redis.xrevrange(keys.ready(0, "router"), count=1)
    assert (fields[b"rid"], fields[b"ep"]) == (b"a2", b"2")  # the epoch-2 deferral's entry
    before = await snapshot(redis, keys.prefix)
    await requeue_idle(sm, "router", 0, entries, min_idle_ms=0, op="op-rq")
    assert await snapshot(redis, keys.prefix) == before
    [new] = await claim_all(sm)
    assert (new.record_id, new.code) == ("a2", RC.OK) and new.claim is not None
    assert new.claim.epoch == 2


async def test_a_cancelled_sagas_released_entry_requeued_hands_its_slot_on(
    sm: StateMachine, keys: Keys, redis: Any
) -> None:
    """a2 and a3 wait deferred; a2 is cancelled and a1's commit releases it: the
    controller's requeue drops a2's entry and hands its slot to a3 at once."""
    first = await _a1_running_a2_deferred(sm)
    await started(sm, ("a3", "a"))
    assert [(o.record_id, o.code) for o in await claim_all(sm)] == [("a3", RC.DEFERRED)]
    await operator.cancel(sm, "a2")
    await sm.commit(first, CommitRequest(output=b"{}", next_step="parser"))
    entries = [(e, r) for e, r in await read_ready(redis, keys, "router", "w1") if r == "a2"]
    [out] = await requeue_idle(sm, "router", 0, entries, min_idle_ms=0, op="op-rq")
    assert (out.code, out.detail) == (RC.STALE_ENTRY, "cancelled")
    assert await _members(redis, keys.inflight(0, "router")) == ["a|a3"]
    assert await _members(redis, keys.deferred(0, "router")) == []


async def test_a_cancelled_sagas_released_entry_hands_its_slot_on(
    sm: StateMachine, keys: Keys, redis: Any
) -> None:
    """a2 and a3 wait deferred; a2 is cancelled; a1's commit releases a2 (the oldest): the
    claim drops a2's entry and hands the slot it reserved to a3 at once, instead of
    holding it for a cancelled saga until its term runs out."""
    first = await _a1_running_a2_deferred(sm)
    await started(sm, ("a3", "a"))
    assert [(o.record_id, o.code) for o in await claim_all(sm)] == [("a3", RC.DEFERRED)]
    await operator.cancel(sm, "a2")
    await sm.commit(first, CommitRequest(output=b"{}", next_step="parser"))
    [dropped] = await claim_all(sm)
    assert (dropped.record_id, dropped.code) == ("a2", RC.STALE_ENTRY)
    assert await _members(redis, keys.inflight(0, "router")) == ["a|a3"]
    assert await _members(redis, keys.deferred(0, "router")) == []
    [got] = await claim_all(sm)
    assert (got.record_id, got.code) == ("a3", RC.OK)


async def test_a_running_sagas_stale_entry_keeps_its_slot(
    sm: StateMachine, keys: Keys, redis: Any
) -> None:
    """A stale entry of a saga that runs at the step (a duplicate) is dropped, but the
    running attempt's slot stays its own."""
    first = await _a1_running_a2_deferred(sm)
    await redis.xadd(keys.ready(0, "router"), {"rid": "a1", "ep": 1, "v": 1})
    [dup] = [o for o in await claim_all(sm) if o.record_id == "a1"]
    assert dup.code == RC.STALE_ENTRY
    assert await _members(redis, keys.inflight(0, "router")) == ["a|a1"]
    assert first is not None
