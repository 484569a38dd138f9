"""The per-user in-flight cap: claim_steps defers a user's entries over the cap, commit
and fail hand the freed slot to that user's oldest deferred entry, release_deferred
sends deferred entries back as slots free (or all of them when the workers are idle)."""

from __future__ import annotations

from typing import Any

import pytest

from saga.state import operator
from saga.state.codes import RC
from saga.state.keys import Keys
from saga.state.machine import StateMachine
from saga.state.model import FailAction, SagaState
from saga.state.recovery import quarantine
from saga.state.replies import text
from saga.state.requests import CommitRequest, FailRequest
from saga.state.requeue import requeue_idle
from tests.state.helpers import LEASE_MS, MAX_LEASE_EXPIRIES, read_ready, wait_lease_expired

pytestmark = pytest.mark.anyio

CAP = 1


async def behind(sm: StateMachine) -> None:
    """An entry left undelivered behind the batch: the cap applies only while work waits.
    (It names no saga: a later read quarantines it; claim_all leaves it out.)"""
    await sm.client.xadd(sm.keys.ready(0, "router"), {"rid": "zz-behind", "ep": 1, "v": 1})


async def claim_all(
    sm: StateMachine, worker: str = "w1", op: str | None = None, *, backlog: bool = True
) -> list[Any]:
    entries = await read_ready(sm.client, sm.keys, "router", worker, count=50)
    if backlog:
        await behind(sm)
    out = await sm.claim("router", 0, entries, worker=worker, lease_ms=LEASE_MS,
                         max_lease_expiries=MAX_LEASE_EXPIRIES, user_cap=CAP, op=op)  # fmt: skip
    return [o for o in out if o.record_id != "zz-behind"]


async def started(sm: StateMachine, *pairs: tuple[str, str]) -> None:
    for record, user in pairs:
        await sm.start(record, user, "router")


async def test_entries_over_the_cap_are_deferred_and_others_users_claimed(
    sm: StateMachine, keys: Keys, redis: Any
) -> None:
    """Cap 1: a's first entry is claimed, a's others deferred (acknowledged, saga pending
    with no entry), b's claimed; the slots and the deferred set say so."""
    await started(sm, ("a1", "a"), ("a2", "a"), ("a3", "a"), ("b1", "b"))
    out = await claim_all(sm)
    assert [(o.record_id, o.code) for o in out] == [
        ("a1", RC.OK), ("a2", RC.DEFERRED), ("a3", RC.DEFERRED), ("b1", RC.OK)]  # fmt: skip
    assert await redis.hmget(keys.saga("a2"), ["state", "entry"]) == [b"pending", b""]
    assert (await redis.xpending(keys.ready(0, "router"), "executors"))["pending"] == 2
    slots = await redis.zrange(keys.inflight(0, "router"), 0, -1)
    assert sorted(map(text, slots)) == ["a|a1", "b|b1"]
    deferred = [text(m) for m in await redis.zrange(keys.deferred(0, "router"), 0, -1)]
    assert [m.split("|")[2] for m in deferred] == ["a2", "a3"]


async def test_without_entries_waiting_the_cap_defers_nothing(sm: StateMachine) -> None:
    """Nothing undelivered behind the batch: a user over the cap takes the slots (nobody
    is kept waiting, and a user alone keeps every slot busy)."""
    await started(sm, ("a1", "a"), ("a2", "a"), ("a3", "a"))
    out = await claim_all(sm, backlog=False)
    assert [o.code for o in out] == [RC.OK, RC.OK, RC.OK]


async def test_a_resent_claim_batch_defers_once(sm: StateMachine, keys: Keys, redis: Any) -> None:
    """The same batch sent again (same op id, as after a lost reply) answers DEFERRED and
    adds no second deferred member."""
    await started(sm, ("a1", "a"), ("a2", "a"))
    entries = await read_ready(sm.client, sm.keys, "router", "w1", count=50)
    await behind(sm)

    async def claim() -> list[Any]:
        return await sm.claim("router", 0, entries, worker="w1", lease_ms=LEASE_MS,
                              max_lease_expiries=MAX_LEASE_EXPIRIES, user_cap=CAP,
                              op="op-1")  # fmt: skip

    first, again = await claim(), await claim()
    assert [o.code for o in first] == [RC.OK, RC.DEFERRED]
    assert [o.code for o in again] == [RC.DUPLICATE, RC.DEFERRED]
    assert await redis.zcard(keys.deferred(0, "router")) == 1


async def test_commit_and_fail_hand_the_slot_to_the_oldest_deferred(
    sm: StateMachine, keys: Keys, redis: Any
) -> None:
    """a1's commit releases a2 (its new entry is claimed for the pending saga, holding the
    slot); a2's failure releases a3; without the cap flag a commit releases nothing."""
    sm.user_caps["router"] = (CAP, LEASE_MS)
    await started(sm, ("a1", "a"), ("a2", "a"), ("a3", "a"))
    first = (await claim_all(sm))[0].claim
    assert first is not None
    await sm.commit(first, CommitRequest(output=b"{}", next_step="parser"))
    [second] = await claim_all(sm)
    assert (second.record_id, second.code) == ("a2", RC.OK) and second.claim is not None
    assert text(await redis.hget(keys.saga("a2"), "entry")) == second.entry_id
    fail = FailRequest(action=FailAction.RETRY, error_class="E", error_message="m", delay_ms=60_000)
    await sm.fail(second.claim, fail)
    [third] = await claim_all(sm)
    assert (third.record_id, third.code) == ("a3", RC.OK)
    assert await redis.zcard(keys.deferred(0, "router")) == 0
    assert [text(m) for m in await redis.zrange(keys.inflight(0, "router"), 0, -1)] == ["a|a3"]


async def test_release_deferred_honours_the_cap_unless_idle(
    sm: StateMachine, keys: Keys, redis: Any
) -> None:
    """With a's slot held, a plain release sends nothing; an idle release sends up to `most`
    regardless; a released entry is claimed though a holds the slot (its reservation)."""
    await started(sm, ("a1", "a"), ("a2", "a"), ("a3", "a"), ("a4", "a"))
    await claim_all(sm)
    release = sm.release_deferred
    assert await release("router", 0, cap=CAP, lease_ms=LEASE_MS, most=10, idle=False) == 0
    assert await release("router", 0, cap=CAP, lease_ms=LEASE_MS, most=2, idle=True) == 2
    out = await claim_all(sm)
    assert [(o.record_id, o.code) for o in out] == [("a2", RC.OK), ("a3", RC.OK)]
    assert await redis.zcard(keys.deferred(0, "router")) == 1
    # The cap turned off (0): every deferred entry goes.
    assert await release("router", 0, cap=0, lease_ms=LEASE_MS, most=10, idle=False) == 1


async def test_expired_slots_free_themselves(sm: StateMachine, keys: Keys, redis: Any) -> None:
    """A slot whose lease passed (its worker died) no longer counts: the next release
    sends the deferred entry and its claim takes over the expired attempt's place."""
    await started(sm, ("a1", "a"), ("a2", "a"))
    entries = await read_ready(sm.client, sm.keys, "router", "w1", count=50)
    await behind(sm)
    out = await sm.claim("router", 0, entries, worker="w1", lease_ms=1,
                         max_lease_expiries=MAX_LEASE_EXPIRIES, user_cap=CAP)  # fmt: skip
    assert [o.code for o in out] == [RC.OK, RC.DEFERRED]
    assert out[0].claim is not None
    await wait_lease_expired(redis, out[0].claim.lease_until_ms)
    n = await sm.release_deferred("router", 0, cap=CAP, lease_ms=LEASE_MS, most=10, idle=False)
    assert n == 1
    assert [o.record_id for o in await claim_all(sm)] == ["a2"]


async def test_cancel_and_retry_of_a_deferred_saga(sm: StateMachine, keys: Keys) -> None:
    """A deferred saga can be cancelled or retried like any pending one; its later release
    is then a stale entry, dropped, and the slot it reserved goes on to the next deferral
    (a retried saga's release of its older epoch included: test_cap_exits)."""
    sm.user_caps["router"] = (CAP, LEASE_MS)
    await started(sm, ("a1", "a"), ("a2", "a"), ("a3", "a"))
    first = (await claim_all(sm))[0].claim
    assert first is not None
    assert await operator.cancel(sm, "a2") == SagaState.PENDING.value
    retried = await operator.retry(sm, "a3", "router", "_input")
    assert retried.epoch == 2
    out = await claim_all(sm)  # a3's retry entry: a holds the slot, so deferred again
    assert [(o.record_id, o.code) for o in out] == [("a3", RC.DEFERRED)]
    await sm.commit(first, CommitRequest(output=b"{}", next_step="parser"))
    out = await claim_all(sm)  # the oldest deferred (a2's, cancelled) went first: stale
    assert [(o.record_id, o.code) for o in out] == [("a2", RC.STALE_ENTRY)]
    # Its reserved slot went on to a3's epoch-1 deferral; the idle release sends the other.
    n = await sm.release_deferred("router", 0, cap=CAP, lease_ms=LEASE_MS, most=10, idle=True)
    assert n == 1
    out = await claim_all(sm)  # epoch 1's entry is stale, the retry's (epoch 2) is claimed
    assert [(o.record_id, o.code) for o in out] == [("a3", RC.STALE_ENTRY), ("a3", RC.OK)]
    assert out[1].claim is not None and out[1].claim.epoch == 2


async def test_a_heartbeat_keeps_a_long_attempts_slot(
    sm: StateMachine, keys: Keys, redis: Any
) -> None:
    """The slot's deadline follows the lease: a step running past its first lease keeps
    its slot (no second attempt of its user slips in), without the cap nothing is kept."""
    sm.user_caps["router"] = (CAP, LEASE_MS)
    await started(sm, ("a1", "a"))
    [out] = await claim_all(sm)
    assert out.claim is not None
    before = await redis.zscore(keys.inflight(0, "router"), "a|a1")
    until = await sm.heartbeat(out.claim, worker="w1", lease_ms=10 * LEASE_MS)
    assert await redis.zscore(keys.inflight(0, "router"), "a|a1") == until > before
    sm.user_caps.clear()
    await sm.heartbeat(out.claim, worker="w1", lease_ms=20 * LEASE_MS)
    assert await redis.zscore(keys.inflight(0, "router"), "a|a1") == until


async def test_another_users_earlier_slot_does_not_hide_the_users_own(
    sm: StateMachine, keys: Keys, redis: Any
) -> None:
    """The slots' scores are deadlines: b's slot with an earlier deadline (sorting after
    'a|') must not make a's held slot invisible (a lexical range over unequal scores did,
    and a's second entry was claimed past the cap; found by the stateful model)."""
    await started(sm, ("b1", "b"), ("a1", "a"), ("a2", "a"))
    entries = await read_ready(sm.client, sm.keys, "router", "w1", count=2)
    await behind(sm)
    out = await sm.claim("router", 0, entries, worker="w1", lease_ms=LEASE_MS,
                         max_lease_expiries=MAX_LEASE_EXPIRIES, user_cap=CAP)  # fmt: skip
    assert [(o.record_id, o.code) for o in out] == [("b1", RC.OK), ("a1", RC.OK)]
    await redis.zadd(keys.inflight(0, "router"), {"b|b1": 1}, xx=True)  # b's lease lapsed
    [a2] = [o for o in await claim_all(sm) if o.record_id == "a2"]
    assert a2.code == RC.DEFERRED


async def _released(sm: StateMachine) -> tuple[str, str]:
    """a2 deferred behind a1, then released by a1's failure: its new entry, read (pending,
    not yet claimed, as when a worker dies between its read and its claim)."""
    sm.user_caps["router"] = (CAP, LEASE_MS)
    await started(sm, ("a1", "a"), ("a2", "a"))
    first = (await claim_all(sm))[0].claim
    assert first is not None
    fail = FailRequest(action=FailAction.RETRY, error_class="E", error_message="m", delay_ms=60_000)
    await sm.fail(first, fail)
    entries = await read_ready(sm.client, sm.keys, "router", "w1", count=50)
    [(entry, rid)] = [(e, r) for e, r in entries if r == "a2"]
    return entry, rid


async def test_a_released_entry_requeued_stays_its_sagas(sm: StateMachine, redis: Any) -> None:
    """The controller's requeue of a released entry (read, never claimed) gives the deferred
    saga a new entry instead of dropping it as stale (which stranded the saga)."""
    entry, rid = await _released(sm)
    [out] = await requeue_idle(sm, "router", 0, [(entry, rid)], min_idle_ms=0, op="op-rq")
    assert out.code == RC.OK
    assert text(await redis.hget(sm.keys.saga(rid), "entry")) == out.detail


async def test_a_released_entry_quarantined_dead_letters_its_saga(
    sm: StateMachine, redis: Any
) -> None:
    """Quarantining a deferred saga's released entry dead-letters the saga (visible,
    retryable) instead of leaving it pending with no entry anywhere."""
    entry, rid = await _released(sm)
    await quarantine(sm, "router", 0, entry, "malformed (test)", {}, rid)
    assert text(await redis.hget(sm.keys.saga(rid), "state")) == SagaState.FAILED.value
