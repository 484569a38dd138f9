"""Chaos: workers SIGKILLed mid-step while many sagas run, replacements started; every
saga completes with exactly one commit per step."""

from __future__ import annotations

import signal
from collections import Counter
from typing import Any

import pytest

from saga.api.client import SagaClient
from saga.state.keys import Keys
from saga.state.replies import text
from tests.executor import pipelines
from tests.executor.conftest import SpawnWorker
from tests.executor.support import (
    SOAK,
    Worker,
    assert_one_commit_per_step,
    count_committed,
    saga_and_history,
    states,
    wait_until,
)

pytestmark = pytest.mark.anyio

ENV = {
    "SAGA_ROUTER_LEASE": "1",
    "SAGA_PARSER_LEASE": "1",
    "SAGA_GROUPER_LEASE": "1",
    "SAGA_RECOVERY_INTERVAL": "0.5",
}


async def busiest(redis: Any, keys: Keys, rids: list[str], workers: list[Worker]) -> Worker:
    """The live worker running the most steps right now (so a kill lands mid-step)."""
    box: list[Worker] = []

    async def found() -> bool:
        pipe = redis.pipeline(transaction=False)
        for rid in rids:
            pipe.hmget(keys.saga(rid), "state", "worker")
        running = Counter(
            text(name) for state, name in await pipe.execute() if text(state) == "running"
        )
        owners = [(sum(n for c, n in running.items() if w.owns(c)), w) for w in workers]
        best = max(owners, key=lambda pair: pair[0])
        box[:] = [best[1]] if best[0] else []
        return bool(box)

    await wait_until(found, within=20, what="a worker running a step", every=0.01)
    return box[0]


async def run_chaos(
    spawn: SpawnWorker, sagas: SagaClient, redis: Any, keys: Keys, *, n: int, kills: int
) -> None:
    workers = [spawn(**ENV) for _ in range(3)]
    for w in workers:
        await w.wait_ready()
    rids = [f"slow-0.2-{i:05d}" if i % 2 == 0 else f"c-{i:05d}" for i in range(n)]
    for rid in rids:
        await sagas.start(rid, "u1")
    for k in range(kills):

        async def progressed(k: int = k) -> bool:
            return await count_committed(redis, keys, "grouper") >= n * (k + 1) // (kills + 2)

        await wait_until(progressed, within=120, what="sagas to progress", every=0.02)
        victim = await busiest(redis, keys, rids, [w for w in workers if w.alive()])
        victim.signal(signal.SIGKILL)
        workers.remove(victim)
        workers.append(spawn(**ENV))  # the Deployment's replacement pod
        assert await count_committed(redis, keys, "grouper") < n, "the kill came too late"

    async def all_done() -> bool:
        return set(await states(redis, keys, rids)) == {"completed"}

    await wait_until(all_done, within=180, what="every saga to complete", every=0.1)
    reclaimed = 0
    for rid in rids:
        saga, events = await saga_and_history(redis, keys, rid)
        assert_one_commit_per_step(saga, events, pipelines.STEPS)
        reclaimed += sum(1 for e in events if e.event.value == "reclaimed")
    assert reclaimed >= kills  # every kill interrupted at least one step
    assert all(w.alive() for w in workers)
    print(
        f"\n{n} sagas; workers SIGKILLed mid-step: {kills}; steps reclaimed: {reclaimed}; "
        "one commit per step"
    )


async def test_workers_killed_mid_run(
    spawn: SpawnWorker, sagas: SagaClient, redis: Any, keys: Keys
) -> None:
    """50 sagas on three workers, one SIGKILLed mid-step and replaced: one commit per step."""
    await run_chaos(spawn, sagas, redis, keys, n=50, kills=1)


@pytest.mark.slow
async def test_workers_killed_mid_run_soak(
    spawn: SpawnWorker, sagas: SagaClient, redis: Any, keys: Keys
) -> None:
    """500 sagas (5,000 with SAGA_SOAK=1) through 4 (10) worker kills: one commit per step."""
    await run_chaos(spawn, sagas, redis, keys, n=5000 if SOAK else 500, kills=10 if SOAK else 4)
