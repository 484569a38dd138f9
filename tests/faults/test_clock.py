"""Clock skew: one worker ten minutes ahead, one ten minutes behind. Leases, retry due
times and history timestamps come from Redis TIME, so the fast worker never takes over a
live lease, retries are promoted on time, and every event carries the server's time."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from saga.state.reads import get_history
from tests.executor.support import REPO, Worker, free_port, server_ms
from tests.faults.harness import FaultRun

pytestmark = pytest.mark.anyio

SKEW_S = 600


def spawn_skewed(run: FaultRun, skew: float) -> Worker:
    port = free_port()
    log = run.tmp / f"worker-skew{skew:+.0f}.log"
    steps = ["router", "parser", "grouper"]
    env = {**run.env(), "SAGA_HEALTH_PORT": str(port), "SAGA_FAULT_CLOCK_SKEW": str(skew)}
    with open(log, "ab") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "tests.faults.skewed_worker", "worker", *steps],
            cwd=REPO, env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=out,
        )  # fmt: skip
    w = Worker(proc, port, log, steps)
    run.workers.append(w)
    return w


async def test_clock_skew_of_ten_minutes_both_ways(run: FaultRun) -> None:
    """Workers at +10 min and -10 min share 60 sagas (slow ones hold 1.5 s leases for 1 s
    steps, others fail once and retry): no lease is taken over, retries run within
    seconds, and history times are the server's, not a worker's."""
    ahead, behind = spawn_skewed(run, SKEW_S), spawn_skewed(run, -SKEW_S)
    for w in (ahead, behind):
        await w.wait_ready(within=120)
    ahead_logs = [e for e in ahead.events() if "timestamp" in e]
    assert ahead_logs and ahead_logs[0]["timestamp"] > time.strftime(  # the skew is real
        "%Y-%m-%dT%H:%M:%S", time.gmtime(time.time() + SKEW_S - 60)
    )
    t0 = await server_ms(run.redis)
    rids = [f"slow-1-{i:02d}" if i % 2 else f"once-{i:02d}" for i in range(60)]
    await run.start(rids)
    run.faults = 2
    run.fault_end = time.monotonic()
    tally = await run.finish(rids, within=90)
    t1 = await server_ms(run.redis)
    assert tally.reclaimed == 0, "a skewed worker took over a live lease"
    for rid in rids:
        for e in await get_history(run.redis, run.keys, rid):
            assert t0 - 1000 <= e.at_ms <= t1 + 1000, (rid, e.event, e.at_ms, t0, t1)
    retried = [r for r in rids if r.startswith("once-")]
    for rid in retried:
        events = await get_history(run.redis, run.keys, rid)
        assert any(e.event.value == "promoted" for e in events), rid
    assert all(w.alive() for w in (ahead, behind))
