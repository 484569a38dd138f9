"""A real ``saga controller`` process fires schedules with no worker running (scaled to
zero: the tick's saga waits in its stream, lag 1, for KEDA to wake a worker); the
schedule survives a SIGKILL of the controller and a restart of Redis, and each tick
starts one saga."""

from __future__ import annotations

import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from saga.adapters.embedded_redis import EmbeddedServer
from saga.state import schedules as store
from saga.state.connection import connect
from saga.state.keys import Keys
from tests.controller.support import Procs, lag
from tests.executor.support import wait_until, worker_base_env

pytestmark = pytest.mark.anyio


@pytest.fixture
def server(tmp_path: Path) -> Iterator[EmbeddedServer]:
    """A server of this test's own, so the test can restart it (AOF fsync on every write)."""
    s = EmbeddedServer(data_dir=tmp_path / "redis", appendfsync="always")
    s.start()
    yield s
    s.stop()


@pytest.fixture
def procs(tmp_path: Path) -> Iterator[Procs]:
    started = Procs(tmp_path)
    yield started
    started.kill_all()


async def test_the_controller_fires_at_zero_workers_and_survives_restarts(
    server: EmbeddedServer, keys: Keys, procs: Procs, tmp_path: Path
) -> None:
    """A due tick's saga is started by the controller alone; after kill -9 of the
    controller and a Redis restart the schedule is as it was, and its next tick (made
    due through the advance script) starts one more saga, never the first one again."""
    env = worker_base_env(server.url, keys, tmp_path / "data")
    redis: Any = connect(server.url)
    now = int(time.time() * 1000)
    # Yearly: after the first tick (given, just past) none comes due by itself in a run.
    d = store.ScheduleDefinition(cron="0 0 1 1 *", saga_type="documents", user_id="lab")
    await store.add(redis, keys, "yearly", d, now - 1000)
    first = store.record_id_of("yearly", now - 1000)
    controller = procs.controller(env)
    await controller.wait_ready(within=90)
    ready = keys.ready(0, "router")

    async def started(rid: str) -> bool:
        return bool(await redis.exists(keys.saga(rid)))

    await wait_until(lambda: started(first), within=30, what="the first tick's saga",
                     on_timeout=procs.tails)  # fmt: skip
    assert await lag(redis, keys, "router") == 1  # what KEDA wakes the router on
    controller.signal(signal.SIGKILL)
    await controller.wait_exit(within=10)
    before = await store.listing(redis, keys)
    await redis.aclose()
    server.stop()
    server.start()
    redis = connect(server.url)
    assert await store.listing(redis, keys) == before
    controller = procs.controller(env)
    await controller.wait_ready(within=90)

    async def moved_on() -> bool:
        [row] = await store.listing(redis, keys)
        return row.last_record_id == first and row.next_ms > now - 1000

    # The kill may have landed between the tick's start and its advance (kill -9 during
    # the fire): the new controller then redoes the fire, finds the saga, moves on.
    await wait_until(moved_on, within=30, what="the first tick moved on", on_timeout=procs.tails)
    assert await redis.xlen(ready) == 1
    # The next tick, made due now (the clock cannot wait a minute in the default suite).
    [row] = await store.listing(redis, keys)
    second_tick = now + 1
    assert await store.advance(redis, keys, "yearly", row.next_ms, second_tick, first)
    second = store.record_id_of("yearly", second_tick)
    await wait_until(lambda: started(second), within=30, what="the second tick's saga",
                     on_timeout=procs.tails)  # fmt: skip
    assert await redis.xlen(ready) == 2
    assert await redis.hget(keys.saga(first), "epoch") == b"1"
    await redis.aclose()
