"""``saga bench --scenario coldstart`` end to end, one run of each kind: a real worker
process starts, reports ready, commits the waiting saga; every figure present and in
order, its keys deleted. No timing assertions: figures from a test machine mean nothing."""

from __future__ import annotations

import json
from typing import Any

import pytest

from saga.state.connection import connect
from tests.bench.test_bench_cli import bench

pytestmark = pytest.mark.anyio


async def test_coldstart_measures_both_kinds_and_cleans_up(redis_server: Any) -> None:
    done = bench(redis_server.url, "--scenario", "coldstart", "--runs", "1", "--json")
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout)
    assert [r["kind"] for r in report["runs"]] == ["offline", "llm"]
    for r in report["runs"]:
        # no work before ready (the llm worker imports litellm first); 50 ms: /readyz is
        # polled, so an offline worker's commit can land before the poll sees it ready
        assert r["first_commit_s"] > -0.05
        assert 0 < r["ready_s"] <= r["total_s"] + 0.05
    assert set(report["medians"]) == {"offline", "llm"}
    assert report["command"] == "saga bench --scenario coldstart --runs 1"
    client = connect(redis_server.url)
    try:
        assert [k async for k in client.scan_iter(match="bench-cold-*")] == []
    finally:
        await client.aclose()
