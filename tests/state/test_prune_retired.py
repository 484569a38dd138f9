"""Completed sagas leave every index once their retention has passed."""

from __future__ import annotations

from typing import Any

import pytest

from saga.state import operator
from saga.state.keys import Keys
from saga.state.limits import Retention, StateLimits
from saga.state.machine import StateMachine
from saga.state.model import SagaState
from saga.state.requests import CommitRequest
from saga.state.retention import prune_retired
from tests.state.helpers import claim_next, server_ms, wait_until

pytestmark = pytest.mark.anyio


async def _complete(sm: StateMachine, rid: str, user: str) -> None:
    await sm.start(rid, user, "router")
    claim = await claim_next(sm, "router", "w1")
    await sm.commit(claim, CommitRequest(output=b"{}"))


async def _indexed(redis: Any, keys: Keys, rid: str, user: str) -> list[bool]:
    idx = [
        keys.created_index(0),
        keys.user_index(0, user),
        keys.state_index(0, SagaState.COMPLETED),
    ]
    return [await redis.zscore(k, rid) is not None for k in idx]


async def test_sagas_past_their_retention_are_deleted_with_their_entries(
    redis: Any, keys: Keys
) -> None:
    """At the end of its retention the sweep deletes a completed saga's hash and history
    and drops its created, user and state index entries; before it, nothing."""
    await redis.xgroup_create(keys.ready(0, "router"), "executors", id="0", mkstream=True)
    sm = StateMachine(redis, keys, StateLimits(retention=Retention(completed_s=1)))
    await _complete(sm, "r1", "u1")
    assert await _indexed(redis, keys, "r1", "u1") == [True, True, True]
    assert await prune_retired(sm, 0) == 0  # not yet due
    assert await redis.exists(keys.saga("r1"), keys.history("r1")) == 2
    due = int(await redis.hget(keys.saga("r1"), "ret"))

    async def past_due() -> bool:
        return await server_ms(redis) > due

    await wait_until(past_due, within=10)
    assert await redis.exists(keys.saga("r1"), keys.history("r1")) == 2  # no TTL: the sweep
    assert await prune_retired(sm, 0) == 1
    assert await redis.exists(keys.saga("r1"), keys.history("r1")) == 0
    assert await _indexed(redis, keys, "r1", "u1") == [False, False, False]
    assert await redis.zcard(keys.retired(0)) == 0


async def test_a_saga_an_earlier_release_let_expire_leaves_the_indexes(
    redis: Any, keys: Keys
) -> None:
    """A saga completed by a release that set a TTL: its hash is gone when it is due, and
    the sweep drops its index entries (and any history left)."""
    await redis.xgroup_create(keys.ready(0, "router"), "executors", id="0", mkstream=True)
    sm = StateMachine(redis, keys, StateLimits(retention=Retention(completed_s=1)))
    await _complete(sm, "r1", "u1")
    await redis.hdel(keys.saga("r1"), "ret")
    await redis.delete(keys.saga("r1"))  # as its TTL would have
    due = await redis.zscore(keys.retired(0), "u1|r1")

    async def past_due() -> bool:
        return await server_ms(redis) > due

    await wait_until(past_due, within=10)
    assert await prune_retired(sm, 0) == 1
    assert await redis.exists(keys.history("r1")) == 0
    assert await _indexed(redis, keys, "r1", "u1") == [False, False, False]


async def test_a_saga_rerun_after_completion_keeps_its_entries(redis: Any, keys: Keys) -> None:
    """A completed saga an operator re-ran is alive again: its entries stay."""
    await redis.xgroup_create(keys.ready(0, "router"), "executors", id="0", mkstream=True)
    sm = StateMachine(redis, keys, StateLimits(retention=Retention(completed_s=1)))
    await _complete(sm, "r1", "u1")
    await operator.retry(sm, "r1", "router", "_input")
    due = await redis.zscore(keys.retired(0), "u1|r1")

    async def past_due() -> bool:
        return await server_ms(redis) > due

    await wait_until(past_due, within=10)
    assert await prune_retired(sm, 0) == 0
    assert await redis.zscore(keys.created_index(0), "r1") is not None
    assert await redis.zscore(keys.user_index(0, "u1"), "r1") is not None


async def test_one_pass_deletes_every_due_saga_past_a_thousand(redis: Any, keys: Keys) -> None:
    """A pass keeps going while sagas are due (a time budget, not a count): 1,200 due
    sagas are all deleted by one call, the earlier cap of 1,000 a pass notwithstanding."""
    await redis.xgroup_create(keys.ready(0, "router"), "executors", id="0", mkstream=True)
    sm = StateMachine(redis, keys, StateLimits(retention=Retention(completed_s=1)))
    n = 1200
    for i in range(n):
        await sm.start(f"r{i}", "u1", "router")
    while rows := await redis.xreadgroup(
        "executors", "w", {keys.ready(0, "router"): ">"}, count=100
    ):
        entries = [(e.decode(), f[b"rid"].decode()) for e, f in rows[0][1]]
        outs = await sm.claim("router", 0, entries, worker="w", lease_ms=60_000,
                              max_lease_expiries=3)  # fmt: skip
        await sm.finish_many([(o.claim, CommitRequest(output=b"{}")) for o in outs])
    [(_, last)] = await redis.zrange(keys.retired(0), -1, -1, withscores=True)

    async def all_due() -> bool:
        return await server_ms(redis) > last + 1000  # past the sweep's slack too

    await wait_until(all_due, within=10)
    assert await prune_retired(sm, 0) == n
    assert await redis.zcard(keys.retired(0)) == 0
    assert await redis.exists(keys.saga("r0"), keys.saga(f"r{n - 1}")) == 0
