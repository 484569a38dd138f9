"""SIGTERM: stop reading at once, let in-flight steps finish within SAGA_DRAIN_SECONDS and
commit them, exit 0; a step that cannot finish in time is left pending for another worker."""

from __future__ import annotations

import signal
import uuid
from typing import Any

import pytest

from saga.api.client import SagaClient
from saga.state.keys import Keys
from saga.state.model import EventType
from tests.executor import pipelines
from tests.executor.conftest import SpawnWorker
from tests.executor.support import (
    assert_one_commit_per_step,
    pending_entries,
    saga_and_history,
    status,
    wait_claimed,
    wait_completed,
    wait_until,
)

pytestmark = pytest.mark.anyio


async def test_sigterm_with_long_grace_finishes_and_commits(
    spawn: SpawnWorker, sagas: SagaClient, redis: Any, keys: Keys
) -> None:
    """With a 10 s grace the in-flight step commits, nothing new is read, the worker exits 0."""
    a = spawn(SAGA_DRAIN_SECONDS="10", SAGA_ROUTER_LEASE="1")
    await a.wait_ready()
    rid = f"slow-1.5-{uuid.uuid4().hex[:8]}"
    await sagas.start(rid, "u1")
    assert await wait_claimed(redis, keys, rid, [a]) is a
    a.signal(signal.SIGTERM)

    async def draining() -> bool:  # not ready while it drains, so no new traffic is sent
        assert a.alive(), "the worker exited before its step could finish"
        return await status(a.port, "/readyz") == 503

    await wait_until(draining, within=5, what="/readyz 503 while draining")
    assert await a.wait_exit(within=15) == 0

    saga, events = await saga_and_history(redis, keys, rid)
    commits = [(e.step, e.worker) for e in events if e.event == EventType.COMMITTED]
    assert len(commits) == 1 and commits[0][0] == "router" and a.owns(commits[0][1])
    # it stopped reading at once: the parser entry its commit enqueued waits for others
    assert saga.state.value == "pending" and saga.step == "parser"
    assert a.logged("worker_draining") and not a.logged("drain_timeout")

    b = spawn(SAGA_ROUTER_LEASE="1")
    await wait_completed(redis, keys, rid)
    saga, events = await saga_and_history(redis, keys, rid)
    assert_one_commit_per_step(saga, events, pipelines.STEPS)
    assert all(
        b.owns(e.worker) for e in events if e.event == EventType.COMMITTED and e.step != "router"
    )


async def test_sigterm_with_short_grace_leaves_the_entry_for_another_worker(
    spawn: SpawnWorker, sagas: SagaClient, redis: Any, keys: Keys
) -> None:
    """With a 0.5 s grace the unfinished step stays pending; another worker commits it once."""
    env = {"SAGA_DRAIN_SECONDS": "0.5", "SAGA_ROUTER_LEASE": "1"}
    a = spawn(**env)
    await a.wait_ready()
    rid = f"slow-2-{uuid.uuid4().hex[:8]}"
    await sagas.start(rid, "u1")
    assert await wait_claimed(redis, keys, rid, [a]) is a
    a.signal(signal.SIGTERM)
    assert await a.wait_exit(within=10) == 0
    assert a.logged("drain_timeout")

    saga, events = await saga_and_history(redis, keys, rid)
    assert not [e for e in events if e.event == EventType.COMMITTED]
    assert saga.state.value == "running" and saga.step == "router"
    [entry] = await pending_entries(redis, keys.ready(0, "router"))
    assert a.owns(entry["consumer"]) and entry["id"] == saga.entry

    b = spawn(**env)
    await wait_completed(redis, keys, rid)
    saga, events = await saga_and_history(redis, keys, rid)
    assert_one_commit_per_step(saga, events, pipelines.STEPS)
    [router] = [e for e in events if e.event == EventType.COMMITTED and e.step == "router"]
    assert b.owns(router.worker) and router.attempt == 2
    # The reclaim names the attempt whose lease expired: the drained worker's.
    [reclaim] = [e for e in events if e.event == EventType.RECLAIMED]
    assert (reclaim.step, reclaim.attempt, reclaim.previous_attempt) == ("router", 2, 1)
    assert a.owns(reclaim.previous_worker) and b.owns(reclaim.worker)
    assert 0 < reclaim.previous_claimed_ms < reclaim.at_ms
    assert await pending_entries(redis, keys.ready(0, "router")) == []
