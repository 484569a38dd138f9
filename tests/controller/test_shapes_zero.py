"""Waits at scale to zero: sagas parked at an ``@app.wait`` hold no worker, so a kill -9
of every worker loses nothing; signals sent while no worker runs are consumed at once;
the controller alone fires the due timers (their declared default); a worker started
then finishes every saga, each wait ended exactly once. Real `saga worker` and `saga
controller` processes against a real server."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from saga.config.settings import load_settings
from saga.state.keys import Keys
from saga.state.model import EventType
from tests.app.shapes_apps import Doc, reviews
from tests.controller.support import Procs, lag
from tests.executor.support import saga_and_history, states, wait_until

pytestmark = pytest.mark.anyio
STEPS = ("draft", "approved", "publish", "nap", "archive")
N = 4


async def test_waits_survive_kill_9_and_the_controller_fires_their_timers(
    redis: Any, keys: Keys, base_env: dict[str, str], procs: Procs, redis_url: str
) -> None:
    """N sagas park; the worker is killed -9; half are signalled with no worker running;
    the controller times the others out; a new worker completes all, each wait once."""
    env = {**base_env, "SAGA_PIPELINE": "tests.app.shapes_apps:reviews", "REVIEW_TIMEOUT": "6"}
    settings = load_settings(
        {"REDIS_URL": redis_url, "SAGA_KEY_PREFIX": keys.prefix, "SAGA_PARTITIONS": "1"}
    )
    rids = [f"z-{i}" for i in range(N)]
    worker = procs.worker(env, *STEPS)
    await worker.wait_ready(within=120)
    async with reviews.client(settings) as sagas:
        k = sagas.keys
        for rid in rids:
            await sagas.start(rid, "u1", input=Doc(title=rid))

        async def parked() -> bool:
            return await states(redis, k, rids) == ["waiting"] * N

        await wait_until(parked, within=30, what="every saga parked", on_timeout=procs.tails)
        worker.kill()  # SIGKILL: scaled to zero the hard way
        assert await redis.zcard(k.waits(0)) == N
        for rid in rids[:2]:
            res = await sagas.signal(rid, "approved", data={"by": "ann", "title": rid})
            assert res.outcome == "consumed"
        assert await lag(redis, k, "publish") == 2  # KEDA wakes publish on it
        controller = procs.controller(env)
        await controller.wait_ready(within=90)

        async def timed_out() -> bool:
            return await redis.zcard(k.waits(0)) == 0 and await lag(redis, k, "publish") == N

        await wait_until(timed_out, within=30, what="the controller to fire the timers",
                         on_timeout=procs.tails)  # fmt: skip
        procs.worker(env, *STEPS)

        async def done() -> bool:
            return await states(redis, k, rids) == ["completed"] * N

        await wait_until(done, within=60, what="every saga completed", on_timeout=procs.tails)
        for i, rid in enumerate(rids):
            saga, events = await saga_and_history(redis, k, rid)
            by = "ann" if i < 2 else "nobody"
            assert msgspec.json.decode(saga.outputs["archive"])["by"] == by
            ended = [e.event for e in events if e.step == "approved"]
            assert ended.count(EventType.SIGNALLED) + ended.count(EventType.WAIT_TIMED_OUT) == 1
            commits = [e.step for e in events if e.event == EventType.COMMITTED]
            assert sorted(commits) == sorted(("draft", "publish", "archive")), commits
