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
