"""The per-user cap when a released entry is dropped without being claimed: its saga is
gone (a claim, the controller's requeue or a quarantine finds no hash), so the slot
reserved for it is found by its record and handed on; and the quarantine of a released
entry, which fails a deferred saga only if the entry is of the saga's epoch (or has none
readable), and hands the slot reserved for it on either way."""

from __future__ import annotations

from typing import Any

import pytest

from saga.state import operator
from saga.state.codes import RC
from saga.state.keys import Keys
from saga.state.machine import StateMachine
from saga.state.recovery import quarantine
from saga.state.replies import text
from saga.state.requests import CommitRequest
from saga.state.requeue import requeue_idle
from tests.state.helpers import LEASE_MS, read_ready, snapshot, stream_rows
from tests.state.test_user_cap import CAP, behind, claim_all, started

pytestmark = pytest.mark.anyio


async def _members(redis: Any, key: str) -> list[str]:
    return [text(m) for m in await redis.zrange(key, 0, -1)]


async def _a2_released_a3_deferred(sm: StateMachine) -> None:
    """a1 runs (a's only slot), a2 and a3 wait deferred; a1's commit releases a2, whose
    entry now holds the slot."""
    sm.user_caps["router"] = (CAP, LEASE_MS)
    await started(sm, ("a1", "a"), ("a2", "a"), ("a3", "a"))
    out = await claim_all(sm)
    assert [(o.record_id, o.code) for o in out] == [
        ("a1", RC.OK), ("a2", RC.DEFERRED), ("a3", RC.DEFERRED)]  # fmt: skip
    assert out[0].claim is not None
    await sm.commit(out[0].claim, CommitRequest(output=b"{}", next_step="parser"))
    assert await _members(sm.client, sm.keys.inflight(0, "router")) == ["a|a2"]


async def test_a_claim_that_finds_the_saga_gone_hands_its_slot_on(
    sm: StateMachine, keys: Keys, redis: Any
) -> None:
    """a2's saga is deleted while its released entry waits: the claim quarantines the
    entry (NOT_FOUND) and hands the slot reserved for it to a3 at once, though the user
    left with the hash; a re-sent batch writes nothing."""
    await _a2_released_a3_deferred(sm)
    await redis.delete(keys.saga("a2"))
    entries = await read_ready(redis, keys, "router", "w1")
    await behind(sm)
    kw: Any = {"worker": "w1", "lease_ms": LEASE_MS, "max_lease_expiries": 3,
               "user_cap": CAP, "op": "op-gone"}  # fmt: skip
    got = [(o.record_id, o.code) for o in await sm.claim("router", 0, entries, **kw)]
    assert ("a2", RC.NOT_FOUND) in got
    assert await _members(redis, keys.inflight(0, "router")) == ["a|a3"]
    assert await _members(redis, keys.deferred(0, "router")) == []
    before = await snapshot(redis, keys.prefix)
    await sm.claim("router", 0, entries, **kw)
    assert await snapshot(redis, keys.prefix) == before
    assert ("a3", RC.OK) in [(o.record_id, o.code) for o in await claim_all(sm)]


async def test_a_requeue_that_finds_the_saga_gone_hands_its_slot_on(
    sm: StateMachine, keys: Keys, redis: Any
) -> None:
    """The controller's requeue of a released entry whose saga is gone quarantines it and
    hands its reserved slot to a3, as the claim does."""
    await _a2_released_a3_deferred(sm)
    await redis.delete(keys.saga("a2"))
    entries = [(e, r) for e, r in await read_ready(redis, keys, "router", "w1") if r == "a2"]
    [out] = await requeue_idle(sm, "router", 0, entries, min_idle_ms=0, op="op-rq")
    assert out.code == RC.NOT_FOUND
    assert await _members(redis, keys.inflight(0, "router")) == ["a|a3"]
    assert await _members(redis, keys.deferred(0, "router")) == []
    [(_, row)] = await stream_rows(redis, keys.quarantine(0))
    assert (row["rid"], row["reason"]) == ("a2", "saga not found")


async def test_a_lapsed_slot_of_a_saga_gone_is_only_dropped(
    sm: StateMachine, keys: Keys, redis: Any
) -> None:
    """A reserved slot whose term has ended no longer counts: the claim finding its saga
    gone drops it and releases nothing (the release pass fills a lapsed slot)."""
    await _a2_released_a3_deferred(sm)
    await redis.zadd(keys.inflight(0, "router"), {"a|a2": 0}, xx=True)
    await redis.delete(keys.saga("a2"))
    got = [(o.record_id, o.code) for o in await claim_all(sm)]
    assert ("a2", RC.NOT_FOUND) in got
    assert await _members(redis, keys.inflight(0, "router")) == []
    assert [m.split("|")[2] for m in await _members(redis, keys.deferred(0, "router"))] == ["a3"]


async def _read_release(sm: StateMachine, record: str) -> str:
    [entry] = [e for e, r in await read_ready(sm.client, sm.keys, "router", "w1") if r == record]
    return entry


async def test_quarantining_an_older_epochs_release_leaves_the_saga_deferred(
    sm: StateMachine, keys: Keys, redis: Any
) -> None:
    """a2 deferred in epoch 1, retried and deferred again in epoch 2: quarantining its
    epoch-1 release does not fail it, and hands the slot reserved for that release to
    its epoch-2 deferral at once; quarantining that release (of its own epoch) fails it
    and frees the slot (no deferral is left to take it)."""
    sm.user_caps["router"] = (CAP, LEASE_MS)
    await started(sm, ("a1", "a"), ("a2", "a"))
    first = (await claim_all(sm))[0].claim
    await operator.retry(sm, "a2", "router", "_input")
    assert [(o.record_id, o.code) for o in await claim_all(sm)] == [("a2", RC.DEFERRED)]
    await sm.commit(first, CommitRequest(output=b"{}", next_step="parser"))  # releases ep 1
    old = await _read_release(sm, "a2")
    await quarantine(sm, "router", 0, old, "malformed (test)", {}, "a2")
    assert await redis.hmget(keys.saga("a2"), ["state", "entry"]) == [b"pending", b""]
    assert await stream_rows(redis, keys.dead(0, "router")) == []
    assert await _members(redis, keys.deferred(0, "router")) == []  # epoch 2's released
    assert await _members(redis, keys.inflight(0, "router")) == ["a|a2"]
    own = await _read_release(sm, "a2")
    [(_, fields)] = await redis.xrange(keys.ready(0, "router"), own, own)
    assert fields[b"ep"] == b"2"
    await quarantine(sm, "router", 0, own, "malformed (test)", {}, "a2")
    assert await redis.hmget(keys.saga("a2"), ["state", "ec"]) == [b"failed", b"Quarantined"]
    assert await _members(redis, keys.inflight(0, "router")) == []


async def test_quarantining_a_release_whose_saga_is_gone_hands_its_slot_on(
    sm: StateMachine, keys: Keys, redis: Any
) -> None:
    """A released entry quarantined (by a worker or the controller) after its saga was
    deleted: the slot reserved for it goes to a3, found by the record."""
    await _a2_released_a3_deferred(sm)
    await redis.delete(keys.saga("a2"))
    entry = await _read_release(sm, "a2")
    await quarantine(sm, "router", 0, entry, "malformed (test)", {}, "a2")
    assert await _members(redis, keys.inflight(0, "router")) == ["a|a3"]
    assert await _members(redis, keys.deferred(0, "router")) == []


@pytest.mark.parametrize(
    "fields",
    [{"rid": "a2", "v": "1"}, {"rid": "a2", "ep": "x", "v": "1"}],
    ids=["no-ep", "ep-not-a-number"],
)
async def test_a_release_with_no_readable_epoch_is_taken_as_the_deferred_sagas(
    sm: StateMachine, keys: Keys, redis: Any, fields: dict[str, str]
) -> None:
    """An entry naming a deferred saga whose epoch cannot be read may be its release: its
    quarantine fails the saga (visible, retryable) rather than leave it waiting unseen."""
    sm.user_caps["router"] = (CAP, LEASE_MS)
    await started(sm, ("a1", "a"), ("a2", "a"))
    assert [o.code for o in await claim_all(sm)] == [RC.OK, RC.DEFERRED]
    await redis.xadd(keys.ready(0, "router"), fields)
    entry = await _read_release(sm, "a2")
    await quarantine(sm, "router", 0, entry, "malformed (test)", {}, "a2")
    assert await redis.hmget(keys.saga("a2"), ["state", "ec"]) == [b"failed", b"Quarantined"]
