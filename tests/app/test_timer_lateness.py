"""Timers fire on time under load, with a real ``saga worker`` and a real server: N sagas
(``SAGA_TIMERS_N``, default 150; docs/benchmarks.md's figure is 500) each set "run the
next step at" a time spread over a few seconds ahead, while as many again run through
the same worker with no timer (the load) and each timed one then sleeps a second more
(``app.sleep_until``). The promote interval is the default second, so only the timers
loop's sleep-until-the-earliest keeps them on time: p99 lateness under a second.

    SAGA_TIMERS_N=500 pytest tests/app/test_timer_lateness.py -s   # prints the figures
"""

from __future__ import annotations

import os
import time
from typing import Any

import anyio
import pytest

from saga.config.settings import Settings
from saga.state.keys import Keys
from saga.state.model import EventType
from tests.app.timer_apps import Job, timed
from tests.executor.conftest import SpawnWorker
from tests.executor.support import saga_and_history, wait_until

pytestmark = pytest.mark.anyio
APP = "tests.app.timer_apps:timed"
N = int(os.environ.get("SAGA_TIMERS_N", "150"))


def _pct(values: list[int], q: float) -> int:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def test_timers_fire_within_a_second_under_load(
    spawn: SpawnWorker, settings: Settings, redis: Any, keys: Keys
) -> None:
    """N run-next-at timers and N sleep_until timers fire with p99 lateness < 1 s while
    N untimed sagas load the same worker; each timer fires once."""
    worker = spawn(APP, SAGA_PROMOTE_INTERVAL="1", SNOOZE="1")
    await worker.wait_ready(within=120)
    timed_ids = [f"tm-{i}" for i in range(N)]
    load_ids = [f"ld-{i}" for i in range(N)]
    async with timed.client(settings) as sagas:
        k = sagas.keys
        t0 = time.time() + 3
        async with anyio.create_task_group() as tg:

            async def load() -> None:  # untimed sagas, spread over the timers' window
                for rid in load_ids:
                    await sagas.start(rid, "u2", input=Job(name=rid, delay=0))
                    await anyio.sleep(4 / N)

            tg.start_soon(load)
            for i, rid in enumerate(timed_ids):
                await sagas.start(rid, "u1", input=Job(name=rid, at=t0 + 3 * i / N))

        async def finished() -> bool:
            pipe = redis.pipeline(transaction=False)
            for rid in timed_ids + load_ids:
                pipe.hget(k.saga(rid), "state")
            return all(s == b"completed" for s in await pipe.execute())

        await wait_until(finished, within=120, what="every saga completed", every=0.2)
        at_late, sleep_late = [], []
        for rid in timed_ids:
            _, events = await saga_and_history(redis, k, rid)
            fired = [e for e in events if e.event == EventType.TIMER_FIRED]
            assert len(fired) == 1, (rid, events)
            at_late.append(fired[0].at_ms - fired[0].due_ms)
            slept = next(e for e in events if e.event == EventType.WAITING)
            woke = [e for e in events if e.event == EventType.WAIT_TIMED_OUT]
            assert len(woke) == 1, (rid, events)
            sleep_late.append(woke[0].at_ms - slept.due_ms)
        assert await redis.zcard(k.waits(0)) == 0
    for name, late in (("run_next_at", at_late), ("sleep_until", sleep_late)):
        p50, p99 = _pct(late, 0.5), _pct(late, 0.99)
        print(f"\n{name}: {N} timers, lateness ms p50={p50} p99={p99} max={max(late)}")
        assert min(late) >= 0 and p99 < 1000, (name, sorted(late)[-10:])
