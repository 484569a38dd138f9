"""What happens today to a saga in flight when the next release adds a step after the
one it just finished (docs/sagas.md, "When a type's steps change between releases"):
its next step was chosen by the worker that committed, so it skips the new step; a saga
whose step commits under the new release runs it. Real workers, a real server."""

from __future__ import annotations

import json
from typing import Any

import pytest

from saga.settings import Settings
from saga.state.keys import Keys
from tests.executor.conftest import SpawnWorker
from tests.executor.support import saga_and_history, states, wait_until
from tests.upgrade import releases

pytestmark = pytest.mark.anyio


async def test_a_saga_past_the_insertion_point_skips_the_added_step(
    spawn: SpawnWorker, settings: Settings, redis: Any, keys: Keys
) -> None:
    old = spawn("tests.upgrade.releases:v1", "take")  # v1's first step only
    async with releases.v1.client(settings) as client:
        await client.start("in-flight", "u", input=releases.Box(item="a"))
        k = client.keys
    await old.wait_ready()

    async def taken() -> bool:
        saga, _ = await saga_and_history(redis, k, "in-flight")
        return "take" in saga.outputs

    await wait_until(taken, within=60, what="v1 to commit take")
    old.kill()
    new = spawn("tests.upgrade.releases:v2")  # every step of v2
    async with releases.v2.client(settings) as client:
        await client.start("after-upgrade", "u", input=releases.Box(item="b"))
    await new.wait_ready()
    rids = ["in-flight", "after-upgrade"]

    async def done() -> bool:
        return await states(redis, k, rids) == ["completed", "completed"]

    await wait_until(done, within=90, what="both sagas to complete")
    trails = {}
    for rid in rids:
        saga, _ = await saga_and_history(redis, k, rid)
        trails[rid] = json.loads(saga.outputs["ship"])["trail"]
    assert trails == {
        "in-flight": ["v1/take", "v2/ship"],
        "after-upgrade": ["v2/take", "v2/check", "v2/ship"],
    }
