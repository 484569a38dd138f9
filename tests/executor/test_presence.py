"""Live workers as `saga top` counts them: a worker killed with -9 drops out within the
presence TTL, one stopped cleanly at once; each shows where its health server is."""

from __future__ import annotations

import signal
from typing import Any

import pytest

from saga.state.keys import Keys
from saga.state.presence import PRESENCE_TTL_S, live_workers
from saga.state.queries import queue_stats
from tests.cli.inspect_support import cli_json
from tests.executor.conftest import SpawnWorker
from tests.executor.support import wait_until

pytestmark = pytest.mark.anyio


async def _router_workers(redis: Any, keys: Keys) -> int:
    return next(s.workers for s in await queue_stats(redis, keys, ["router"]))


async def test_a_killed_worker_is_no_longer_counted(
    spawn: SpawnWorker, redis: Any, keys: Keys, redis_url: str
) -> None:
    """kill -9: `saga top` counts the worker until its presence expires, then not."""
    a, b = spawn(), spawn("router")
    await a.wait_ready()
    await b.wait_ready()

    async def both() -> bool:
        return await _router_workers(redis, keys) == 2

    await wait_until(both, within=20, what="two live router workers")
    doc = cli_json(keys, redis_url, "top", "--once", "--interval", "0")
    router = next(s for s in doc["steps"] if s["step"] == "router")
    assert router["workers"] == 2
    assert {w["health"] for w in doc["workers"]} == {f"127.0.0.1:{w.port}" for w in (a, b)}
    assert {tuple(w["steps"]) for w in doc["workers"]} == {("router", "parser", "grouper"),
                                                          ("router",)}  # fmt: skip
    b.signal(signal.SIGKILL)

    async def one() -> bool:
        return await _router_workers(redis, keys) == 1

    took = await wait_until(one, within=PRESENCE_TTL_S + 10, what="the killed worker dropped")
    assert took <= PRESENCE_TTL_S + 6
    doc = cli_json(keys, redis_url, "top", "--once", "--interval", "0")
    assert [w["pid"] for w in doc["workers"]] == [a.pid]


async def test_a_worker_stopped_cleanly_leaves_at_once(
    spawn: SpawnWorker, redis: Any, keys: Keys
) -> None:
    """SIGTERM: once the worker has exited its presence is gone (no TTL to wait for)."""
    w = spawn()
    await w.wait_ready()

    async def present() -> bool:
        return len(await live_workers(redis, keys)) == 1

    await wait_until(present, within=20, what="the worker's presence")
    w.signal(signal.SIGTERM)
    assert await w.wait_exit(within=20) == 0
    assert await live_workers(redis, keys) == []
