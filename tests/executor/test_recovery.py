"""Recovery in one process: entries left by a dead consumer are reclaimed and finished."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import msgspec
import pytest

from saga.api.client import SagaClient
from saga.config.settings import Settings
from saga.state.keys import GROUP, Keys
from saga.state.machine import StateMachine
from saga.state.model import EventType
from saga.worker.executor import Executor
from saga.worker.ports import NullPorts
from tests.executor import pipelines
from tests.executor.support import (
    assert_one_commit_per_step,
    running,
    saga_and_history,
    states,
    wait_until,
)

pytestmark = pytest.mark.anyio

FAST = Settings(block_ms=100, recovery_interval_s=0.2, promote_interval_s=0.1, drain_s=2.0)


def short_lease_pipeline(lease_s: float = 0.3) -> Any:
    return pipelines.pipeline().with_overrides(lambda s: replace(s, lease_s=lease_s))


async def left_by_a_dead_consumer(redis: Any, keys: Keys, settings: Settings, rid: str) -> Executor:
    """Start ``rid``; a consumer reads and claims its entry, then dies without a trace.
    Returns a live executor (not yet running) that should take it over."""
    pipe = short_lease_pipeline()
    await SagaClient(redis, keys, pipe, settings).start(rid, "u1")
    reply = await redis.xreadgroup(GROUP, "dead-pod", {keys.ready(0, "router"): ">"}, count=1)
    entry_id = reply[0][1][0][0].decode()
    [out] = await StateMachine(redis, keys).claim(
        "router", 0, [(entry_id, rid)], worker="dead-pod", lease_ms=300, max_lease_expiries=5
    )
    assert out.claim is not None
    return Executor(
        client=redis,
        keys=keys,
        settings=settings,
        pipeline=pipe,
        steps=pipelines.STEPS,
        ports=NullPorts(),
        worker="live-pod",
    )


async def test_idle_entry_of_a_dead_consumer_is_reclaimed_by_a_live_reader(
    redis: Any, keys: Keys
) -> None:
    """A dead consumer's entry is reclaimed while the reader blocks holding every free slot."""
    async with running(await left_by_a_dead_consumer(redis, keys, FAST, "r-dead-1")):

        async def completed() -> bool:
            return await states(redis, keys, ["r-dead-1"]) == ["completed"]

        await wait_until(completed, within=10, what="the dead consumer's saga to complete")
    saga, events = await saga_and_history(redis, keys, "r-dead-1")
    assert_one_commit_per_step(saga, events, pipelines.STEPS)
    reclaimed = [e for e in events if e.event == EventType.RECLAIMED]
    assert [(e.step, e.worker, e.attempt) for e in reclaimed] == [("router", "live-pod", 2)]


async def test_an_idle_reader_wakes_up_for_recovery_sooner_than_its_block_time(
    redis: Any, keys: Keys
) -> None:
    """Recovery runs every SAGA_RECOVERY_INTERVAL even when a blocking read waits
    longer (SAGA_BLOCK_MS): before, an idle worker recovered only every block time."""
    slow_reads = msgspec.structs.replace(FAST, block_ms=30_000, recovery_interval_s=0.2)
    async with running(await left_by_a_dead_consumer(redis, keys, slow_reads, "r-dead-2")):

        async def completed() -> bool:
            return await states(redis, keys, ["r-dead-2"]) == ["completed"]

        # Idle long enough after ~1.3 s (lease + 1 s); a 30 s block would hold it to 30 s.
        await wait_until(completed, within=10, what="recovery while the reader blocks")
