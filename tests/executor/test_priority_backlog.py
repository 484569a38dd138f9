"""Priorities end to end with a real ``saga worker``: a backlog of priority-0 sagas, then
urgent ones started after them; the worker starts on the backlog and the urgent sagas
complete first. 500/20 in the default suite; the issue's 5,000/50 is marked slow
(``pytest -m slow``), its figures printed."""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

import pytest

from saga.api.client import SagaClient
from saga.config.settings import Settings
from saga.state.keys import Keys
from saga.state.streams import ensure_groups
from tests.executor import pipelines
from tests.executor.support import spawn_worker, wait_until, worker_base_env

pytestmark = pytest.mark.anyio


async def run_backlog(
    redis: Any, redis_url: str, keys: Keys, tmp_path: Path, lows: int, highs: int
) -> dict[str, float]:
    sagas = SagaClient(redis, keys, pipelines.pipeline(), Settings())
    await ensure_groups(redis, keys, list(pipelines.STEPS))
    low = [f"low-{i}" for i in range(lows)]
    high = [f"high-{i}" for i in range(highs)]
    for rid in low:
        await sagas.start(rid, f"u-{len(rid) % 7}")
    for rid in high:
        await sagas.start(rid, "u-urgent", priority=5)
    env = worker_base_env(redis_url, keys, tmp_path / "data")
    worker = spawn_worker(env, tmp_path / "worker.log", pipelines.STEPS)
    everyone = low + high

    async def done() -> bool:
        pipe = redis.pipeline(transaction=False)
        for rid in everyone:
            pipe.hget(keys.saga(rid), "state")
        return all(s == b"completed" for s in await pipe.execute())

    try:
        await wait_until(done, within=300, what="every saga completed", every=0.2,
                         on_timeout=worker.tail)  # fmt: skip
    finally:
        worker.kill()
    pipe = redis.pipeline(transaction=False)
    for rid in everyone:
        pipe.hget(keys.saga(rid), "updated")
    ended = dict(zip(everyone, [int(v) for v in await pipe.execute()], strict=True))
    order = sorted(everyone, key=lambda r: ended[r])
    rank = {rid: i for i, rid in enumerate(order)}
    high_ranks = sorted(rank[r] for r in high)
    return {
        "p50_rank": statistics.median(high_ranks),
        "last_rank": high_ranks[-1],
        "lows_before_last_high": sum(1 for r in low if ended[r] < max(ended[h] for h in high)),
    }


async def test_urgent_sagas_started_after_a_backlog_finish_first(
    redis: Any, redis_url: str, keys: Keys, tmp_path: Path
) -> None:
    """500 priority-0 sagas, then 20 urgent: all 20 complete before all but a few batches'
    worth of the backlog (the lows already read when the urgent ones came: none here)."""
    got = await run_backlog(redis, redis_url, keys, tmp_path, 500, 20)
    print("priority backlog 500/20:", got)
    assert got["last_rank"] < 20 + 100, got  # at most two read batches of lows before
    assert got["p50_rank"] < 60, got


@pytest.mark.slow
async def test_the_issues_backlog_5000_then_50(
    redis: Any, redis_url: str, keys: Keys, tmp_path: Path
) -> None:
    """The issue's figures: 5,000 priority-0 sagas, then 50 urgent."""
    got = await run_backlog(redis, redis_url, keys, tmp_path, 5000, 50)
    print("priority backlog 5000/50:", got)
    assert got["last_rank"] < 50 + 200, got
