"""Redis itself failing under running sagas: SIGKILL and restart from the AOF (fsync
always and every second), and a server hung by SIGSTOP for longer than the lease. Workers
stay up without spinning, and every saga completes once."""

from __future__ import annotations

import os
import signal
import time

import anyio
import pytest

from tests.executor.support import count_committed, status, wait_until
from tests.faults.harness import FaultRun, fault_run

pytestmark = pytest.mark.anyio

MAX_CPU_SHARE = 0.15
"""Worker CPU during an outage, as a share of one core: waiting, not spinning."""


async def progressed(run: FaultRun, n: int) -> None:
    async def some() -> bool:
        return await count_committed(run.redis, run.keys, "grouper") >= n

    await wait_until(some, within=60, what=f"{n} sagas to complete")


async def outage(run: FaultRun, seconds: float) -> float:
    """Hold an outage for ``seconds``; returns the workers' CPU share of a core meanwhile."""
    live = [w for w in run.workers if w.alive()]
    before = run.cpu_seconds(live)
    await anyio.sleep(seconds)
    return (run.cpu_seconds(live) - before) / seconds / len(live)


async def restart_mid_run(run: FaultRun, kills: int) -> None:
    rids = [f"slow-0.2-{i:04d}" for i in range(120)]
    ws = await run.spawn_ready(2)
    await run.start(rids)
    lossy_since = time.monotonic()
    for k in range(kills):
        await progressed(run, 20 * (k + 1))
        lossy_since = time.monotonic() - 2
        run.server.stop(signal.SIGKILL)
        run.faults += 1
        share = await outage(run, 2.5)  # past the 1.5 s lease and the re-send budget
        assert share < MAX_CPU_SHARE, f"workers used {share:.0%} of a core while Redis was down"
        assert all([await status(w.port, "/readyz") == 503 for w in ws])
        await run.restart_server()
        run.fault_end = time.monotonic()
    await run.finish(rids, lossy_since=lossy_since)


async def test_redis_sigkill_restart_fsync_always(tmp_path: object) -> None:
    """appendfsync always: SIGKILL + restart twice under 120 sagas; none lost, none twice."""
    async with fault_run("redis_sigkill_fsync_always", tmp_path, appendfsync="always") as run:  # type: ignore[arg-type]
        await restart_mid_run(run, kills=2)


async def test_redis_sigkill_restart_fsync_everysec(tmp_path: object) -> None:
    """appendfsync everysec (up to a second of writes lost): the same, nothing stuck."""
    async with fault_run("redis_sigkill_fsync_everysec", tmp_path, appendfsync="everysec") as run:  # type: ignore[arg-type]
        await restart_mid_run(run, kills=2)


async def test_redis_hung_past_the_lease(run: FaultRun) -> None:
    """SIGSTOP of the server for 5 s (the lease is 1.5 s): workers wait without spinning,
    and once it runs again every saga completes once."""
    rids = [f"slow-0.3-{i:03d}" for i in range(80)]
    await run.spawn_ready(2)
    await run.start(rids)
    await progressed(run, 10)
    pid = run.server.pid
    assert pid is not None
    os.kill(pid, signal.SIGSTOP)
    run.faults += 1
    try:
        share = await outage(run, 5.0)
    finally:
        os.kill(pid, signal.SIGCONT)
    run.fault_end = time.monotonic()
    assert share < MAX_CPU_SHARE, f"workers used {share:.0%} of a core while Redis hung"
    await run.finish(rids)
