"""Durable timers with a real ``saga worker module:app`` process and a real server: a
step's ``ctx.run_next_after`` / ``ctx.run_next_at`` parks the saga (no worker held, the
timer in Redis, shown by ``saga show``, counted by ``saga top`` with the next due time)
and the next step runs within a second of the time; ``app.sleep_until`` wakes at its
function's time; a cancel removes a pending timer at once."""

from __future__ import annotations

import time
from typing import Any

import pytest

from saga.config.settings import Settings
from saga.state.keys import Keys
from saga.state.model import EventType
from tests.app.timer_apps import Job, timed
from tests.cli.inspect_support import cli, cli_json
from tests.executor.conftest import SpawnWorker
from tests.executor.support import saga_and_history, states, wait_until

pytestmark = pytest.mark.anyio
APP = "tests.app.timer_apps:timed"


async def _all(redis: Any, keys: Keys, rids: list[str], want: str, within: float = 60) -> None:
    async def reached() -> bool:
        return await states(redis, keys, rids) == [want] * len(rids)

    await wait_until(reached, within=within, what=f"{rids} to be {want}", every=0.05)


async def test_run_next_after_and_at_then_sleep_until_fire_on_time(
    spawn: SpawnWorker, settings: Settings, redis: Any, redis_url: str
) -> None:
    """Two sagas wait at 'remind' (one after 6 s, one at a set time): saga show names the
    timer, saga top counts both; each timer fires within a second of due, once, and the
    sleep_until wakes one second after remind ran."""
    worker = spawn(APP, SNOOZE="1")
    await worker.wait_ready(within=120)
    async with timed.client(settings) as sagas:
        k = sagas.keys
        at = time.time() + 6.5  # time for the CLI's processes below, which start cold
        await sagas.start("t1", "u1", input=Job(name="a", delay=6))
        await sagas.start("t2", "u1", input=Job(name="b", at=at))
        await _all(redis, k, ["t1", "t2"], "waiting", within=30)
        saga = await sagas.get("t2")
        assert (saga.step, saga.token, saga.entry, saga.due_ms) == (
            "remind",
            "",
            "",
            int(at * 1000),
        )
        shown = cli(k, redis_url, "show", "t2", "--type", "timed")
        assert shown.returncode == 0 and "timer" in shown.stdout, shown.stdout
        top = cli_json(k, redis_url, "top", "--once", "--type", "timed")
        assert top["timers"] == 2
        dues = [(await sagas.get(rid)).due_ms for rid in ("t1", "t2")]
        assert top["next_timer_ms"] == min(dues) > 0
        text = cli(k, redis_url, "top", "--once", "--type", "timed").stdout
        assert "saga(s) parked at a wait or sleep with a due time, the next at 20" in text, text
        await _all(redis, k, ["t1", "t2"], "completed", within=30)
        shown = cli(k, redis_url, "show", "t1", "--type", "timed")
        assert shown.returncode == 0 and "timer_fired" in shown.stdout, shown.stdout
        for rid in ("t1", "t2"):
            _, events = await saga_and_history(redis, k, rid)
            planned = next(e for e in events if e.event == EventType.COMMITTED and e.step == "plan")
            fired = [e for e in events if e.event == EventType.TIMER_FIRED]
            assert len(fired) == 1 and fired[0].due_ms == planned.due_ms > 0
            assert 0 <= fired[0].at_ms - planned.due_ms < 1000, (planned, fired)
            slept = next(e for e in events if e.event == EventType.WAITING)
            woke = next(e for e in events if e.event == EventType.WAIT_TIMED_OUT)
            assert (slept.step, woke.detail) == ("snooze", "continue")
            assert 0 <= woke.at_ms - slept.due_ms < 1000


async def test_cancel_removes_a_pending_timer(
    spawn: SpawnWorker, settings: Settings, redis: Any, redis_url: str
) -> None:
    """A saga waiting on an hour's timer is cancelled: its timer leaves the waits at once,
    and remind never runs."""
    worker = spawn(APP)
    await worker.wait_ready(within=120)
    async with timed.client(settings) as sagas:
        k = sagas.keys
        await sagas.start("t3", "u1", input=Job(name="c", delay=3600))
        await _all(redis, k, ["t3"], "waiting", within=30)
        assert await redis.zcard(k.waits(0)) == 1
        res = cli(k, redis_url, "cancel", "t3", "--type", "timed")
        assert res.returncode == 0, res.stderr
        assert await redis.zcard(k.waits(0)) == 0
        saga, events = await saga_and_history(redis, k, "t3")
        assert saga.state == "cancelled"
        assert not [e for e in events if e.step == "remind" and e.event == EventType.COMMITTED]
