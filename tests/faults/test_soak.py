"""The soak (marked ``slow``): thousands of sagas in waves under random faults — kill -9 of
workers, replies dropped by the proxy, one Redis SIGKILL and restart — with completed
sagas retired after seconds. Every invariant holds; Redis's and a long-lived worker's
memory stay flat after the warm-up wave; the ready streams are trimmed.

``pytest -m slow tests/faults/test_soak.py`` runs 2,000 sagas; ``SAGA_SOAK=1`` 10,000."""

from __future__ import annotations

import random
import signal
import time

import anyio
import psutil
import pytest

from tests.executor.support import SOAK, wait_until
from tests.faults.harness import FaultRun
from tests.faults.proxy import Faults, Proxy

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

WAVES = 5
RETENTION = {"SAGA_RETENTION_DAYS": "0.0005"}  # 43 s: completed sagas expire during the run
AFTER_WAVE_S = 46  # past the retention: a wave's sagas have expired when memory is read


async def memory(run: FaultRun, steady: psutil.Process) -> tuple[int, int]:
    info = await run.redis.info("memory")
    return int(info["used_memory"]), int(steady.memory_info().rss)


async def fault(run: FaultRun, proxy: Proxy, rng: random.Random, wave: int) -> float | None:
    """One fault per wave, each kind once in a seeded order (the first wave is left
    clean: the warm-up); after a restart, when the writes the AOF may not have synced
    began (appendfsync everysec)."""
    lossy = None
    if "order" not in run.extra:
        run.extra["order"] = rng.sample(["kill", "drop", "restart", "kill"], 4)
    kind = run.extra["order"][wave - 1] if wave else "none"
    if kind == "kill":
        victims = [w for w in run.workers[1:] if w.alive()]
        if victims:
            run.kill(rng.choice(victims))
            run.spawn(**RETENTION)
    elif kind == "drop":
        proxy.faults = Faults(drop=0.03)
        await anyio.sleep(2)
        proxy.faults = Faults()
        run.faults += proxy.counts["dropped"]
        proxy.counts.clear()
    elif kind == "restart":
        lossy = time.monotonic() - 2
        run.server.stop(signal.SIGKILL)
        run.faults += 1
        await anyio.sleep(2)
        await run.restart_server()
    run.extra.setdefault("fault_kinds", []).append(kind)
    return lossy


async def test_soak_random_faults_memory_flat(run: FaultRun) -> None:
    """Sagas in five waves, a random fault in each after the first: all complete once;
    memory after the last wave within 20% (+2 MB) of after the second; streams trimmed."""
    n = 10_000 if SOAK else 2_000
    proxy = Proxy(target_port=run.server.port, seed=29).start()
    run.url = f"redis://127.0.0.1:{proxy.port}/0"
    rng = random.Random(31)
    steady, *_ = await run.spawn_ready(3, **RETENTION)
    process = psutil.Process(steady.pid)
    marks: list[tuple[int, int]] = []
    try:
        for wave in range(WAVES):
            rids = [f"w{wave}-{i:05d}" for i in range(n // WAVES)]
            await run.start(rids)
            lossy = await fault(run, proxy, rng, wave)
            run.fault_end = time.monotonic()
            await run.finish(rids, within=600, lossy_since=lossy)  # a summary row per wave
            await anyio.sleep(AFTER_WAVE_S)
            marks.append(await memory(run, process))
    finally:
        proxy.stop()
    run.extra["memory_marks_mb"] = [(r >> 20, w >> 20) for r, w in marks]
    print(f"\nmemory after each wave (Redis MB, worker RSS MB): {run.extra['memory_marks_mb']}")
    (redis1, worker1), (redis_end, worker_end) = marks[1], marks[-1]
    assert redis_end <= redis1 * 1.2 + (2 << 20), run.extra["memory_marks_mb"]
    assert worker_end <= worker1 * 1.2 + (2 << 20), run.extra["memory_marks_mb"]

    async def trimmed() -> bool:  # the workers' maintenance (every 60 s) trims behind readers
        lengths = [await run.redis.xlen(run.keys.ready(0, s)) for s in ("router", "parser")]
        return max(lengths) < n // WAVES

    await wait_until(trimmed, within=90, what="ready streams trimmed", every=1)
