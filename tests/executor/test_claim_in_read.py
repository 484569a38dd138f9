"""Claiming in the read through a real ``saga worker``: with a backlog (sagas started
before the worker, reads of 10), its steps read and claim in one script (the server's
MONITOR shows XREADGROUP called from Lua on the saga type's streams), every saga
completes with each step committed once; ``SAGA_CLAIM_IN_READ=0`` reads the usual way."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

from saga.api.client import SagaClient
from saga.config.settings import Settings
from saga.state.connection import connect
from saga.state.keys import Keys
from saga.state.streams import ensure_groups
from tests.executor import pipelines
from tests.executor.support import (
    assert_one_commit_per_step,
    saga_and_history,
    spawn_worker,
    wait_until,
    worker_base_env,
)

pytestmark = pytest.mark.anyio
SAGAS = 120


async def lua_reads(redis_url: str, prefix: str, seen: list[str], ready: anyio.Event) -> None:
    """Collect the XREADGROUPs scripts run on ``prefix``'s streams, from MONITOR."""
    client = connect(redis_url)
    try:
        async with client.monitor() as monitor:
            ready.set()
            async for cmd in monitor.listen():
                text = cmd.get("command", "")
                lua = cmd.get("client_type") == "lua"
                if lua and text.startswith("XREADGROUP") and prefix in text:
                    seen.append(text)
    finally:
        await client.aclose()


@pytest.mark.parametrize("on", [True, False], ids=["on", "off"])
async def test_a_backlog_is_claimed_in_the_read_and_completes_once(
    redis: Any, redis_url: str, keys: Keys, tmp_path: Path, on: bool
) -> None:
    sagas = SagaClient(redis, keys, pipelines.pipeline(), Settings())
    await ensure_groups(redis, keys, list(pipelines.STEPS))
    rids = [f"b-{i}" for i in range(SAGAS)]
    for rid in rids:
        await sagas.start(rid, f"u-{len(rid) % 5}")
    env = worker_base_env(redis_url, keys, tmp_path / "data")
    env.update(SAGA_READ_BATCH="10", SAGA_CLAIM_IN_READ="1" if on else "0")
    seen: list[str] = []

    async def done() -> bool:
        pipe = redis.pipeline(transaction=False)
        for rid in rids:
            pipe.hget(keys.saga(rid), "state")
        return all(s == b"completed" for s in await pipe.execute())

    async with anyio.create_task_group() as tg:
        watching = anyio.Event()
        tg.start_soon(lua_reads, redis_url, keys.prefix, seen, watching)
        await watching.wait()
        worker = spawn_worker(env, tmp_path / "worker.log", pipelines.STEPS)
        try:
            await wait_until(done, within=120, what="every saga completed", every=0.2,
                             on_timeout=worker.tail)  # fmt: skip
        finally:
            worker.kill()
        tg.cancel_scope.cancel()
    for rid in rids:
        saga, events = await saga_and_history(redis, keys, rid)
        assert_one_commit_per_step(saga, events, pipelines.STEPS)
    if on:
        assert len(seen) >= 3, "no step claimed in the read"
        assert all("COUNT" in s for s in seen)
    else:
        assert seen == []
