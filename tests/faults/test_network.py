"""Network faults between workers and Redis, through a TCP proxy on loopback: replies
dropped after the command ran, replies delayed past the client's timeout, every
connection reset, and a blackhole longer than the lease. Each transition is re-sent with
its operation id, so a command that ran once is never applied twice."""

from __future__ import annotations

import time
from typing import Any

import anyio
import pytest

from saga.state.model import SagaState
from saga.state.replies import text
from tests.executor.support import wait_until
from tests.faults.harness import FaultRun
from tests.faults.proxy import Faults, Proxy

pytestmark = pytest.mark.anyio

TIMEOUT = {"SAGA_REDIS_TIMEOUT": "1.5", "SAGA_BLOCK_MS": "100"}


def faulted(proxy: Proxy, kind: str, at_least: int) -> Any:
    """Whether the proxy has applied ``kind`` to ``at_least`` replies."""

    async def check() -> bool:
        return proxy.counts[kind] >= at_least

    return check


def leases_lapsed(run: FaultRun) -> Any:
    """Whether every lease a saga holds now has passed its deadline (read past the proxy,
    by the server's clock): the blackhole outlasted the leases."""
    deadline: list[int] = []

    async def check() -> bool:
        secs, micros = await run.redis.time()
        now = secs * 1000 + micros // 1000
        if not deadline:
            found = await run.redis.zrange(run.keys.state_index(0, SagaState.RUNNING), 0, -1)
            leases = [await run.redis.hget(run.keys.saga(text(r)), "lease") for r in found]
            deadline.append(max([int(x or 0) for x in leases], default=now))
        return now > deadline[0]

    return check


async def through_proxy(run: FaultRun, faults: Faults, seed: int, n: int = 160) -> Proxy:
    proxy = Proxy(target_port=run.server.port, seed=seed).start()
    run.url = f"redis://127.0.0.1:{proxy.port}/0"
    await run.spawn_ready(2, **TIMEOUT)
    rids = [f"slow-0.5-{i:04d}" for i in range(n)]
    run.extra["rids"] = rids
    proxy.faults = faults
    await run.start(rids)
    return proxy


async def test_replies_dropped(run: FaultRun) -> None:
    """5% of replies dropped (the command ran, the caller never hears): every saga once."""
    proxy = await through_proxy(run, Faults(drop=0.05), seed=3)
    try:
        await wait_until(faulted(proxy, "dropped", 20), within=60, what="20 replies dropped")
        proxy.faults = Faults()
        run.faults = proxy.counts["dropped"]
        run.fault_end = time.monotonic()
        await run.finish(run.extra.pop("rids"))
        assert run.faults > 0
    finally:
        proxy.stop()


async def test_replies_delayed_past_timeout(run: FaultRun) -> None:
    """3% of replies held 2 s, past the 1.5 s client timeout: re-sent by op id, none twice."""
    proxy = await through_proxy(run, Faults(delay=0.03, delay_s=2.0), seed=5)
    try:
        await wait_until(faulted(proxy, "delayed", 10), within=60, what="10 replies delayed")
        proxy.faults = Faults()
        run.faults = proxy.counts["delayed"]
        run.fault_end = time.monotonic()
        await run.finish(run.extra.pop("rids"))
        assert run.faults > 0
    finally:
        proxy.stop()


async def test_resets_and_blackhole(run: FaultRun) -> None:
    """Every connection reset three times (each reset once the workers reconnected after
    the one before), then nothing forwarded for 3 s (twice the lease): workers recover by
    themselves."""
    proxy = await through_proxy(run, Faults(), seed=7)
    try:
        made = 0
        for _ in range(3):
            await anyio.sleep(0.5)  # the fault's cadence: a reset every half second at most

            async def back(since: int = made) -> bool:  # the last reset's victims reconnected
                return proxy.counts["connected"] > since

            await wait_until(back, within=30, what="the workers to reconnect")
            made = proxy.counts["connected"]
            proxy.reset()
        proxy.faults = Faults(blackhole=True)
        await wait_until(leases_lapsed(run), within=30, what="every lease held to lapse")
        proxy.faults = Faults()
        proxy.reset()  # stalled connections are dropped, as a real network would time out
        run.faults = proxy.counts["reset"] + 1
        run.fault_end = time.monotonic()
        await run.finish(run.extra.pop("rids"))
    finally:
        proxy.stop()
