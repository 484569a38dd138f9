"""The upgrade story the step-change tests share (tests/upgrade/test_step_*.py): a saga
whose first step an older release's worker committed, that worker gone, then a newer
release's worker taking it (and a saga of its own) to the end."""

from __future__ import annotations

import json
from typing import Any

from saga.config.settings import Settings
from saga.state.keys import Keys
from tests.executor.conftest import SpawnWorker
from tests.executor.support import saga_and_history, states, wait_until
from tests.upgrade import releases


async def taken_by(spawn: SpawnWorker, settings: Settings, redis: Any, old: str, rid: str) -> Keys:
    """``rid`` started under release ``old`` (``releases.<old>``), its ``take`` committed
    by a worker of ``old`` serving take only, then that worker killed; the type's keys."""
    worker = spawn(f"tests.upgrade.releases:{old}", "take")
    async with getattr(releases, old).client(settings) as client:
        await client.start(rid, "u", input=releases.Box(item="a"))
        k: Keys = client.keys
    await worker.wait_ready()

    async def taken() -> bool:
        saga, _ = await saga_and_history(redis, k, rid)
        return "take" in saga.outputs

    await wait_until(taken, within=60, what=f"{old} to commit take", on_timeout=worker.tail)
    worker.kill()
    return k


async def finished_by(
    spawn: SpawnWorker, settings: Settings, redis: Any, k: Keys, new: str, rids: list[str]
) -> dict[str, list[str]]:
    """A worker of every step of release ``new``; the last of ``rids`` started under it;
    once all complete, each saga's trail (who ran what, from ship's output)."""
    worker = spawn(f"tests.upgrade.releases:{new}")
    async with getattr(releases, new).client(settings) as client:
        await client.start(rids[-1], "u", input=releases.Box(item="b"))
    await worker.wait_ready()

    async def done() -> bool:
        return await states(redis, k, rids) == ["completed"] * len(rids)

    await wait_until(done, within=90, what="every saga to complete", on_timeout=worker.tail)
    trails = {}
    for rid in rids:
        saga, _ = await saga_and_history(redis, k, rid)
        trails[rid] = json.loads(saga.outputs["ship"])["trail"]
    return trails
