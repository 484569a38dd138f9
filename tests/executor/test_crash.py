"""Workers that die or freeze mid-step: the step is reclaimed after the lease and
committed exactly once; a frozen worker's late commit is fenced."""

from __future__ import annotations

import signal
import time
import uuid
from typing import Any

import pytest

from saga.api.client import SagaClient
from saga.state.keys import Keys
from saga.state.model import EventType
from tests.executor.conftest import SpawnWorker
from tests.executor.support import (
    assert_one_commit_per_step,
    claimed_by,
    saga_and_history,
    server_ms,
    wait_claimed,
    wait_completed,
    wait_event,
    wait_until,
)

pytestmark = pytest.mark.anyio

LEASE = {"SAGA_ROUTER_LEASE": "1", "SAGA_RECOVERY_INTERVAL": "0.5"}


async def test_kill_9_mid_step_is_reclaimed_and_committed_once(
    spawn: SpawnWorker, sagas: SagaClient, redis: Any, keys: Keys
) -> None:
    """SIGKILL of the worker running a step: another reclaims it after the lease, one commit."""
    a, b = spawn(**LEASE), spawn(**LEASE)
    await a.wait_ready()
    await b.wait_ready()
    rid = f"slow-2-{uuid.uuid4().hex[:8]}"
    await sagas.start(rid, "u1")
    victim = await wait_claimed(redis, keys, rid, [a, b])
    survivor = b if victim is a else a
    killed_ms = await server_ms(redis)
    t0 = time.monotonic()
    victim.signal(signal.SIGKILL)

    reclaimed = await wait_event(
        redis,
        keys,
        rid,
        lambda e: e.event == EventType.RECLAIMED and survivor.owns(e.worker),
        "the survivor to reclaim the step",
    )
    reclaim_s = (reclaimed.at_ms - killed_ms) / 1000
    await wait_completed(redis, keys, rid)
    done_s = time.monotonic() - t0
    saga, events = await saga_and_history(redis, keys, rid)
    assert_one_commit_per_step(saga, events, ("router", "parser", "grouper"))
    router = next(e for e in events if e.event == EventType.COMMITTED and e.step == "router")
    assert survivor.owns(router.worker) and router.attempt == 2
    # lease 1 s, heartbeat every 1/3 s, reclaim past lease + 1 s, recovery every 0.5 s
    assert 1.0 < reclaim_s < 4.0, reclaim_s
    print(
        f"\nkilled worker's step reclaimed {reclaim_s:.2f}s after SIGKILL "
        f"(lease 1s, recovery every 0.5s); saga completed {done_s:.2f}s after it "
        "(the reclaimed router step sleeps 2s)"
    )


async def test_zombie_commit_after_sigcont_is_fenced(
    spawn: SpawnWorker, sagas: SagaClient, redis: Any, keys: Keys
) -> None:
    """SIGSTOP past the lease, another worker commits, SIGCONT: the late commit is refused."""
    a, b = spawn(**LEASE), spawn(**LEASE)
    await a.wait_ready()
    await b.wait_ready()
    # The step (0.25 s) ends before the first heartbeat (1/3 s): once resumed the zombie
    # reaches its commit rather than learning of the lost lease from a heartbeat. If the
    # stop lands after the commit (a slow box), try again with another record.
    for _ in range(5):
        rid = f"slow-0.25-{uuid.uuid4().hex[:8]}"
        await sagas.start(rid, "u1")
        zombie = await wait_claimed(redis, keys, rid, [a, b])
        zombie.signal(signal.SIGSTOP)
        if await claimed_by(redis, keys, rid, [zombie]) is zombie:
            break
        zombie.signal(signal.SIGCONT)
        await wait_completed(redis, keys, rid)
    else:
        pytest.fail("could not stop a worker mid-step in 5 tries")
    other = b if zombie is a else a

    await wait_event(
        redis,
        keys,
        rid,
        lambda e: e.event == EventType.COMMITTED and e.step == "router" and other.owns(e.worker),
        "the other worker to commit the router step",
    )
    zombie.signal(signal.SIGCONT)
    fenced = await wait_event(
        redis,
        keys,
        rid,
        lambda e: e.event == EventType.FENCED and zombie.owns(e.worker),
        "the zombie's commit to be fenced",
    )
    assert fenced.step == "router"
    await wait_completed(redis, keys, rid)
    saga, events = await saga_and_history(redis, keys, rid)
    assert_one_commit_per_step(saga, events, ("router", "parser", "grouper"))
    assert [e for e in events if e.event == EventType.FENCED] == [fenced]

    async def logged() -> bool:
        return any(e.get("record_id") == rid for e in zombie.logged("lease_lost"))

    await wait_until(logged, within=5, what="the zombie to log lease_lost")
    assert zombie.alive() and other.alive()
