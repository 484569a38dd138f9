"""The worker's health: /livez, /readyz, /metrics on SAGA_HEALTH_PORT, and what /livez means."""

from __future__ import annotations

import signal
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from saga.adapters.embedded_redis import EmbeddedServer
from saga.api.client import SagaClient
from saga.config.settings import Settings
from saga.state.keys import Keys
from saga.worker.executor import Executor
from saga.worker.health import HealthState
from saga.worker.ports import NullPorts
from tests.executor import pipelines
from tests.executor.conftest import SpawnWorker
from tests.executor.support import running, states, status, wait_until

pytestmark = pytest.mark.anyio


async def answered(port: int, path: str, within: float = 30) -> int:
    """The status ``path`` answers with. ``status`` says 0 when no answer came within its
    2 s timeout: on a loaded box that is a slow answer, not a status, so ask again."""
    got = 0

    async def answers() -> bool:
        nonlocal got
        got = await status(port, path)
        return got != 0

    await wait_until(answers, within=within, what=f"an answer on {path}", every=0.05)
    return got


async def test_health_endpoints_of_a_running_worker(spawn: SpawnWorker) -> None:
    """/livez and /readyz answer 200 once the groups exist, /metrics answers 200."""
    w = spawn()
    await w.wait_ready()
    assert await answered(w.port, "/livez") == 200
    assert await answered(w.port, "/readyz") == 200
    assert await answered(w.port, "/metrics") == 200
    assert await answered(w.port, "/nope") == 404
    w.signal(signal.SIGTERM)
    assert await w.wait_exit(within=30) == 0  # an idle drain; its shutdown, on a loaded box


async def test_not_ready_until_redis_answers(
    spawn: SpawnWorker, base_env: dict[str, str], tmp_path: Path
) -> None:
    """With no server yet the worker is live but not ready; it turns ready once one starts."""
    server = EmbeddedServer(data_dir=tmp_path / "late-redis", tied=True)
    w = spawn(env={**base_env, "REDIS_URL": server.url})

    async def live() -> bool:
        assert w.alive(), w.tail()
        return await status(w.port, "/livez") == 200

    # 120 s: a worker's start on a loaded 2-core box (its imports), as wait_ready allows
    await wait_until(live, within=120, what="/livez 200", every=0.05)
    assert await answered(w.port, "/readyz") == 503
    server.start()
    try:
        await w.wait_ready(within=15)
        assert w.alive()
    finally:
        w.kill()
        server.stop()


async def test_a_worker_busy_with_long_steps_stays_live(redis: Any, keys: Keys) -> None:
    """Full concurrency on a step longer than the stuck window, and a 60 s loop, are not stuck."""
    settings = Settings(block_ms=100, recovery_interval_s=0.2, promote_interval_s=0.1)
    pipe = pipelines.pipeline().with_overrides(lambda s: replace(s, concurrency=1))
    await SagaClient(redis, keys, pipe, settings).start("slow-2.5-busy", "u1")
    health = HealthState(stuck_after_s=1.0)
    executor = Executor(
        client=redis,
        keys=keys,
        settings=settings,
        pipeline=pipe,
        steps=pipelines.STEPS,
        ports=NullPorts(),
        worker="w-busy",
        health=health,
    )
    verdicts: list[tuple[bool, str]] = []
    sampled: list[float] = []
    async with running(executor):

        async def done() -> bool:
            verdicts.append(health.live())
            sampled.append(time.monotonic())
            return await states(redis, keys, ["slow-2.5-busy"]) == ["completed"]

        await wait_until(done, within=15, what="the long step to finish", every=0.05)
    # Sampled all through the 2.5 s step: past twice the stuck window. (A count of samples
    # failed under load: each one waits for a Redis reply, so fewer fit in 2.5 s.)
    assert sampled[-1] - sampled[0] > 2 * health.stuck_after_s
    assert [v for v in verdicts if not v[0]] == []
