"""A worker started while Redis is unreachable stops promptly on SIGTERM and SIGINT
(Kubernetes' stop, a person's Ctrl-C), with a line saying it stopped before starting."""

from __future__ import annotations

import signal

import pytest

from tests.executor.conftest import SpawnWorker
from tests.executor.support import free_port, status, wait_until

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
async def test_stop_while_waiting_for_redis(spawn: SpawnWorker, sig: signal.Signals) -> None:
    """Against a port nobody listens on, the worker waits for Redis; a signal ends it
    within a few seconds, exit 0, with `worker_stopped` saying nothing was claimed."""
    w = spawn(REDIS_URL=f"redis://127.0.0.1:{free_port()}/0")

    async def waiting() -> bool:
        assert w.alive(), w.tail()
        return await status(w.port, "/readyz") == 503

    await wait_until(waiting, within=30, what="the worker to wait for Redis", on_timeout=w.tail)
    w.signal(sig)
    assert await w.wait_exit(within=5) == 0
    [stopped] = w.logged("worker_stopped")
    assert "before Redis answered" in stopped["detail"]
    assert "Traceback" not in w.log.read_text()
    assert len(w.logged("waiting_for_redis")) == 1
