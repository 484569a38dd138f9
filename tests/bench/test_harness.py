"""The round-trip counter of bench workers against a real server: one single
command is one write, one pipeline is one write whatever its length."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from saga.bench.harness import RoundTrips

pytestmark = pytest.mark.anyio


@pytest.fixture
def trips() -> Iterator[RoundTrips]:
    meter = RoundTrips()
    meter.install()
    yield meter
    meter.uninstall()


async def test_singles_and_pipelines(trips: RoundTrips, redis: Any) -> None:
    await redis.ping()  # connect (HELLO and friends count too)
    writes, singles = trips.writes, dict(trips.singles)
    await redis.set("bench-test:a", "1")
    await redis.get("bench-test:a")
    pipe = redis.pipeline(transaction=False)
    for i in range(10):
        pipe.incr(f"bench-test:n{i}")
    await pipe.execute()
    await redis.delete("bench-test:a", *(f"bench-test:n{i}" for i in range(10)))
    assert trips.writes - writes == 4
    new = {k: v - singles.get(k, 0) for k, v in trips.singles.items() if v != singles.get(k, 0)}
    assert new == {"SET": 1, "GET": 1, "DEL": 1}


def test_uninstall_restores_redis_py() -> None:
    from redis.asyncio.connection import AbstractConnection

    before = AbstractConnection.send_packed_command
    meter = RoundTrips()
    meter.install()
    assert AbstractConnection.send_packed_command is not before
    meter.uninstall()
    assert AbstractConnection.send_packed_command is before


def test_peak_rss_is_this_process() -> None:
    from saga.bench.harness import peak_rss

    assert 1 << 20 < peak_rss() < 1 << 34


async def test_a_saga_worker_says_ready_only_once_wired_and_reads_after_go(
    redis: Any, redis_url: str, tmp_path: Any
) -> None:
    """The barrier sits at the worker's on_ready: by "ready" it has made its consumer
    groups itself (nobody else did here), so its start-up is not timed as throughput;
    and it reads nothing before the go."""
    import secrets

    from saga.bench.extras import worker_base_env
    from saga.bench.procs import WorkerSet
    from saga.bench.systems import SagaSystem
    from saga.state.keys import GROUP
    from tests.executor.support import wait_until

    system = SagaSystem(f"bench-h{secrets.token_hex(3)}", 1, worker_base_env(redis_url, "info", {}))
    argv = system.worker_argv(redis_url, 4, str(tmp_path / "w.stats.json"))
    workers = WorkerSet([argv], system.worker_env(), tmp_path, "saga")
    stream = system.keys.ready(0, "router")
    try:
        await workers.start(limit_s=60)
        groups = await redis.xinfo_groups(stream)
        assert [g["name"] for g in groups] == [GROUP.encode()]
        assert groups[0]["consumers"] == 0  # no XREADGROUP before the go
        workers.go()

        async def reading() -> bool:
            return bool((await redis.xinfo_groups(stream))[0]["consumers"])

        await wait_until(reading, within=10, what="the worker's first read after the go")
    finally:
        await workers.stop()
        keys = [k async for k in redis.scan_iter(match=f"{system.prefix}*")]
        if keys:
            await redis.delete(*keys)
