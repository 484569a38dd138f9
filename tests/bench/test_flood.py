"""``saga bench --scenario flood`` end to end on a tiny flood: four runs (without and with
the cap, with and without the small user), every figure present, its keys deleted. No
timing assertions: figures from a test machine mean nothing."""

from __future__ import annotations

import json
from typing import Any

import pytest

from saga.state.connection import connect
from tests.bench.test_bench_cli import bench

pytestmark = pytest.mark.anyio


async def test_flood_scenario_reports_both_ways_and_cleans_up(redis_server: Any) -> None:
    """The report has the small user's latency in the two mixed runs, none in the two
    flood-alone runs, a throughput for each, the ratio and the command; no key is left."""
    done = bench(redis_server.url, "--scenario", "flood", "--sagas", "60", "--small", "3",
                 "--concurrency", "4", "--user-cap", "2", "--step-ms", "5", "--json")  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout)
    runs = report["runs"]
    assert [(r["fairness"], r["small_p50_s"] is not None) for r in runs] == [
        (False, True), (True, True), (False, False), (True, False)]  # fmt: skip
    assert all(r["throughput"] > 0 for r in runs) and report["single_user_ratio"] > 0
    assert report["command"].startswith("saga bench --scenario flood --sagas 60 --small 3")
    client = connect(redis_server.url)
    try:
        assert [k async for k in client.scan_iter(match="bench-flood-*")] == []
    finally:
        await client.aclose()
