"""Attempts that end by lease expiry have their own budget: a worker killed with -9 on
the last allowed attempt does not dead-letter a healthy saga (real worker processes)."""

from __future__ import annotations

import signal
from typing import Any

import pytest

from saga.api.client import SagaClient
from saga.state.keys import Keys
from saga.state.model import EventType
from tests.executor import pipelines
from tests.executor.conftest import SpawnWorker
from tests.executor.support import (
    assert_one_commit_per_step,
    saga_and_history,
    wait_claimed,
    wait_completed,
    wait_until,
)

pytestmark = pytest.mark.anyio


async def test_a_kill_on_the_last_allowed_attempt_does_not_dead_letter(
    spawn: SpawnWorker, sagas: SagaClient, redis: Any, keys: Keys
) -> None:
    """Max attempts 1: the worker running attempt 1 is killed mid-step; another takes the
    entry over when the lease lapses and the saga completes (before: LeaseExpired)."""
    env = {"SAGA_ROUTER_MAX_ATTEMPTS": "1", "SAGA_ROUTER_LEASE": "1"}
    a, b = spawn(**env), spawn(**env)
    await a.wait_ready()
    await b.wait_ready()
    await sagas.start("slow-2-last", "u1")
    victim = await wait_claimed(redis, keys, "slow-2-last", [a, b])
    victim.signal(signal.SIGKILL)
    await wait_completed(redis, keys, "slow-2-last", within=40)
    saga, events = await saga_and_history(redis, keys, "slow-2-last")
    assert_one_commit_per_step(saga, events, pipelines.STEPS)
    assert [e.event for e in events if e.step == "router"] == [
        EventType.STARTED,
        EventType.RECLAIMED,
        EventType.COMMITTED,
    ]
    assert (await redis.hget(keys.saga("slow-2-last"), "lx:router")) == b"1:1"


async def test_a_record_that_kills_its_worker_every_time_is_dead_lettered(
    spawn: SpawnWorker, sagas: SagaClient, redis: Any, keys: Keys
) -> None:
    """The expiry budget still ends a crash loop: SAGA_ROUTER_MAX_LEASE_EXPIRIES=2, the
    worker running it killed twice, and the saga is dead-lettered as LeaseExpired."""
    env = {"SAGA_ROUTER_LEASE": "1", "SAGA_ROUTER_MAX_LEASE_EXPIRIES": "2"}
    workers = [spawn(**env)]
    await workers[0].wait_ready()
    await sagas.start("hang-crash", "u1")
    for _ in range(2):
        workers.append(spawn(**env))
        await workers[-1].wait_ready()
        victim = await wait_claimed(redis, keys, "hang-crash", workers)
        victim.signal(signal.SIGKILL)
        workers.remove(victim)

    async def dead() -> bool:
        return (await redis.hget(keys.saga("hang-crash"), "state")) == b"failed"

    await wait_until(dead, within=40, what="the saga dead-lettered")
    saga, _ = await saga_and_history(redis, keys, "hang-crash")
    assert saga.error_class == "LeaseExpired" and "expired 2 times" in saga.error_message
