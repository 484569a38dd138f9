"""The worker's health server: /livez, /readyz, /metrics on SAGA_HEALTH_PORT."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from saga.adapters.embedded_redis import EmbeddedServer
from tests.executor.conftest import SpawnWorker
from tests.executor.support import status, wait_until

pytestmark = pytest.mark.anyio


async def test_health_endpoints_of_a_running_worker(spawn: SpawnWorker) -> None:
    """/livez and /readyz answer 200 once the groups exist, /metrics answers 200."""
    w = spawn()
    await w.wait_ready()
    assert await status(w.port, "/livez") == 200
    assert await status(w.port, "/readyz") == 200
    assert await status(w.port, "/metrics") == 200
    assert await status(w.port, "/nope") == 404
    w.signal(signal.SIGTERM)
    assert await w.wait_exit(within=10) == 0


async def test_not_ready_until_redis_answers(
    spawn: SpawnWorker, base_env: dict[str, str], tmp_path: Path
) -> None:
    """With no server yet the worker is live but not ready; it turns ready once one starts."""
    server = EmbeddedServer(data_dir=tmp_path / "late-redis", tied=True)
    w = spawn(env={**base_env, "REDIS_URL": server.url})

    async def live() -> bool:
        assert w.alive(), w.tail()
        return await status(w.port, "/livez") == 200

    await wait_until(live, within=30, what="/livez 200", every=0.05)
    assert await status(w.port, "/readyz") == 503
    server.start()
    try:
        await w.wait_ready(within=15)
        assert w.alive()
    finally:
        w.kill()
        server.stop()
