"""Per-user fairness through a real worker: with SAGA_USER_MAX_INFLIGHT, a user who
floods the router does not make another user's few sagas wait behind the backlog, and
the flood still finishes (deferred entries come back as slots free and when idle)."""

from __future__ import annotations

import time
import uuid
from typing import Any

import pytest

from saga.api.client import SagaClient
from saga.state.keys import Keys
from saga.state.replies import text
from tests.executor.conftest import SpawnWorker
from tests.executor.support import wait_until

pytestmark = pytest.mark.anyio

FLOOD, SMALL = 200, 5


async def completed(redis: Any, keys: Keys, rids: list[str]) -> int:
    pipe = redis.pipeline(transaction=False)
    for rid in rids:
        pipe.hget(keys.saga(rid), "state")
    return sum(text(s) == "completed" for s in await pipe.execute())


@pytest.mark.parametrize("cap", [0, 2])
async def test_a_small_user_does_not_wait_behind_a_flood(
    spawn: SpawnWorker, sagas: SagaClient, redis: Any, keys: Keys, cap: int
) -> None:
    """200 router steps of 50 ms from one user, then 5 from another, 4 router slots: with a
    cap of 2 per user the small user's sagas finish while most of the flood still waits;
    without it (cap 0, as before) they finish behind nearly all of it. Both floods finish."""
    worker = spawn(SAGA_USER_MAX_INFLIGHT=str(cap), SAGA_ROUTER_CONCURRENCY="4")
    await worker.wait_ready(within=120)
    tag = uuid.uuid4().hex[:6]
    flood = [f"slow-0.05-f{i:04d}{tag}" for i in range(FLOOD)]
    small = [f"slow-0.05-s{i}{tag}" for i in range(SMALL)]
    for rid in flood:
        await sagas.start(rid, "flood")
    if cap:  # the flood is under way, and partly set aside, before the small user comes

        async def deferring() -> bool:
            return bool(await redis.zcard(keys.deferred(0, "router")))

        await wait_until(deferring, within=30, what="flood entries deferred")
    for rid in small:
        await sagas.start(rid, "small")
    began = time.monotonic()

    async def small_done() -> bool:
        return await completed(redis, keys, small) == SMALL

    await wait_until(small_done, within=120, what="the small user's sagas")
    waited, flood_done = time.monotonic() - began, await completed(redis, keys, flood)
    print(f"cap={cap}: small user done in {waited:.2f}s, flood done then: {flood_done}/{FLOOD}")
    if cap:
        assert flood_done < FLOOD // 2
    else:
        assert flood_done > FLOOD * 3 // 4

    async def flood_finished() -> bool:
        return await completed(redis, keys, flood) == FLOOD

    await wait_until(flood_finished, within=180, what="the whole flood")
    keys_left = [keys.deferred(0, "router"), keys.inflight(0, "router")]
    assert [await redis.zcard(k) for k in keys_left] == [0, 0]
