"""Run-next-at timers at scale to zero: sagas whose first step's commit set "run the next
step in a few seconds" hold no worker, so a kill -9 of the worker loses nothing; the
controller alone fires the due timers (each saga's 'timer_fired' once), and the next
step's lag (what KEDA wakes it on) grows with them. Real `saga worker` and `saga
controller` processes against a real server."""

from __future__ import annotations

from typing import Any

import pytest

from saga.config.settings import load_settings
from saga.state.keys import Keys
from saga.state.model import EventType
from tests.app.timer_apps import Job, timed
from tests.controller.support import Procs, lag
from tests.executor.support import saga_and_history, states, wait_until

pytestmark = pytest.mark.anyio
STEPS = ("plan", "remind", "snooze", "done")
N = 4


async def test_the_controller_fires_run_next_at_timers_with_no_worker(
    redis: Any, keys: Keys, base_env: dict[str, str], procs: Procs, redis_url: str
) -> None:
    """N sagas wait on timers; the worker is killed -9; the controller fires each timer
    once, due, and a worker started then completes every saga."""
    env = {**base_env, "SAGA_PIPELINE": "tests.app.timer_apps:timed"}
    settings = load_settings(
        {"REDIS_URL": redis_url, "SAGA_KEY_PREFIX": keys.prefix, "SAGA_PARTITIONS": "1"}
    )
    rids = [f"tz-{i}" for i in range(N)]
    worker = procs.worker(env, *STEPS)
    await worker.wait_ready(within=120)
    async with timed.client(settings) as sagas:
        k = sagas.keys
        for rid in rids:
            await sagas.start(rid, "u1", input=Job(name=rid, delay=4))

        async def parked() -> bool:
            return await states(redis, k, rids) == ["waiting"] * N

        await wait_until(parked, within=30, what="every saga parked", on_timeout=procs.tails)
        worker.kill()  # SIGKILL: scaled to zero the hard way
        assert await redis.zcard(k.waits(0)) == N
        controller = procs.controller(env)
        await controller.wait_ready(within=90)

        async def fired() -> bool:
            return await redis.zcard(k.waits(0)) == 0 and await lag(redis, k, "remind") == N

        await wait_until(fired, within=30, what="the controller to fire the timers",
                         on_timeout=procs.tails)  # fmt: skip
        assert await states(redis, k, rids) == ["pending"] * N
        procs.worker(env, *STEPS)

        async def done() -> bool:
            return await states(redis, k, rids) == ["completed"] * N

        await wait_until(done, within=60, what="every saga completed", on_timeout=procs.tails)
        for rid in rids:
            _, events = await saga_and_history(redis, k, rid)
            timer = [e for e in events if e.event == EventType.TIMER_FIRED]
            assert len(timer) == 1 and timer[0].at_ms >= timer[0].due_ms > 0, (rid, timer)
