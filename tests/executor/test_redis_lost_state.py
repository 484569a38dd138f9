"""Redis losing what workers set up — a consumer group destroyed, everything flushed, the
script cache flushed over and over — under real worker processes: the workers stay up,
recreate what is missing, and every saga completes with one commit per step."""

from __future__ import annotations

import uuid
from typing import Any

import anyio
import pytest

from saga.adapters.embedded_redis import EmbeddedServer
from saga.api.client import SagaClient
from saga.config.settings import Settings
from saga.state.connection import connect
from saga.state.keys import GROUP, Keys
from tests.executor import pipelines
from tests.executor.conftest import SpawnWorker
from tests.executor.support import (
    assert_one_commit_per_step,
    saga_and_history,
    states,
    wait_completed,
    wait_until,
)

pytestmark = pytest.mark.anyio


async def test_destroyed_group_is_recreated_and_work_goes_on(
    spawn: SpawnWorker, sagas: SagaClient, redis: Any, keys: Keys
) -> None:
    """XGROUP DESTROY under a running worker: a warning once, the group back at 0, and a
    saga enqueued meanwhile is processed; the worker never exits."""
    w = spawn()
    await w.wait_ready()
    await sagas.start("before-destroy", "u1")
    await wait_completed(redis, keys, "before-destroy")
    await redis.xgroup_destroy(keys.ready(0, "router"), GROUP)
    await sagas.start("after-destroy", "u1")
    await wait_completed(redis, keys, "after-destroy", within=30)
    assert w.alive(), w.tail()
    saga, events = await saga_and_history(redis, keys, "after-destroy")
    assert_one_commit_per_step(saga, events, pipelines.STEPS)
    [missing] = w.logged("consumer_group_missing")
    assert missing["level"] == "warning" and missing["step"] == "router"
    assert w.logged("consumer_groups_recreated")
    groups = await redis.xinfo_groups(keys.ready(0, "router"))
    assert [g["name"] for g in groups] == [GROUP.encode()]
    await w.wait_ready()


async def test_a_server_emptied_under_the_workers(
    spawn: SpawnWorker, own_server: EmbeddedServer, keys: Keys
) -> None:
    """FLUSHALL (a server restarted empty): groups and scripts come back, new sagas run."""
    client = connect(own_server.url)
    try:
        w = spawn(REDIS_URL=own_server.url)
        await w.wait_ready()
        sagas = SagaClient(client, keys, pipelines.pipeline(), Settings())
        await sagas.start("before-flush", "u1")
        await wait_completed(client, keys, "before-flush")
        await client.flushall()
        await sagas.start("after-flush", "u1")
        await wait_completed(client, keys, "after-flush", within=30)
        assert w.alive(), w.tail()
        assert len(w.logged("consumer_group_missing")) == 1
    finally:
        await client.aclose()


async def test_script_flush_storm_crashes_no_worker(
    spawn: SpawnWorker, sagas: SagaClient, redis: Any, keys: Keys, redis_url: str
) -> None:
    """SCRIPT FLUSH every 50 ms under three workers, and at least ten times while sagas
    are in flight: all sagas complete with one commit per step, no worker dies."""
    workers = [spawn() for _ in range(3)]
    for w in workers:
        await w.wait_ready()
    flusher = connect(redis_url)
    rids: list[str] = []
    in_flight = 0  # flushes after which some saga was still unfinished

    async def storm() -> None:
        while True:
            await flusher.script_flush()
            await anyio.sleep(0.05)

    async def all_done() -> bool:
        assert all(w.alive() for w in workers), "\n".join(w.tail() for w in workers)
        return await states(redis, keys, rids) == ["completed"] * len(rids)

    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(storm)
            # Waves of sagas (each spends 0.1 s in the router), a flush after each wave:
            # a flush counts when some saga is still unfinished after it, so the workers
            # must run scripts again after it. Waves go on until ten such flushes.
            with anyio.fail_after(90):
                while in_flight < 10:
                    wave = [f"slow-0.1-{len(rids) + i}-{uuid.uuid4().hex[:6]}" for i in range(6)]
                    for rid in wave:
                        await sagas.start(rid, "u1")
                    rids += wave
                    await flusher.script_flush()
                    in_flight += not await all_done()
            await wait_until(all_done, within=90, what="every saga to complete in the storm")
            tg.cancel_scope.cancel()
    finally:
        await flusher.aclose()
    for rid in rids:
        saga, events = await saga_and_history(redis, keys, rid)
        assert_one_commit_per_step(saga, events, pipelines.STEPS)
    for w in workers:
        assert w.alive(), w.tail()
        text = w.log.read_text()
        assert "Traceback" not in text and "NoScriptError" not in text, w.tail()
