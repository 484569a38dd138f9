"""Branches and joins under faults: the claims type (intake, then fraud and coverage in
parallel, the join decide, then notify) runs 30 sagas while its worker is killed -9
again and again, Redis is SIGKILLed and restarted from its AOF (fsync always), and 3% of
the replies to the workers are dropped by a proxy (the command ran, its caller never
heard). Then every saga completed, each step committed once, and each join fired once
(one branch commit per saga enqueued decide: the 'next' its committed event names)."""

from __future__ import annotations

import signal
from collections import Counter
from pathlib import Path
from typing import Any

import anyio
import msgspec
import pytest

from saga.adapters.embedded_redis import EmbeddedServer
from saga.settings import load_settings
from saga.state.connection import connect
from saga.state.keys import Keys
from saga.state.model import EventType
from tests.app.branch_apps import Claim, claims
from tests.executor.support import (
    Worker,
    free_port,
    saga_and_history,
    spawn_worker,
    states,
    wait_until,
    worker_base_env,
)
from tests.faults.proxy import Faults, Proxy

pytestmark = pytest.mark.anyio
STEPS = ("intake", "fraud", "coverage", "decide", "notify")
N = 30
LEASES = {f"SAGA_{s.upper()}_LEASE": "1.5" for s in STEPS}


async def test_joins_fire_once_through_kill_9_redis_restarts_and_dropped_replies(
    tmp_path: Path,
) -> None:
    """0 lost, 0 double commits, every join fired once."""
    srv = EmbeddedServer(data_dir=tmp_path / "redis", port=free_port(), tied=True,
                         appendfsync="always")  # fmt: skip
    srv.start()
    proxy = Proxy(target_port=srv.port, seed=11).start()
    keys = Keys(prefix="fb", partitions=1)
    env = worker_base_env(f"redis://127.0.0.1:{proxy.port}/0", keys, tmp_path / "data")
    env.update(SAGA_PIPELINE="tests.app.branch_apps:claims", FRAUD_DELAY="1.0",
               COVERAGE_DELAY="0.7", **LEASES, SAGA_RECOVERY_INTERVAL="0.5",
               SAGA_DRAIN_SECONDS="5")  # fmt: skip
    workers: list[Worker] = []

    def spawn() -> Worker:
        w = spawn_worker(env, tmp_path / f"worker-{len(workers)}.log", STEPS)
        workers.append(w)
        return w

    settings = load_settings({"REDIS_URL": srv.url, "SAGA_KEY_PREFIX": "fb"})
    rids = [f"b-{i:02d}" for i in range(N)]
    try:
        await spawn().wait_ready(within=120)
        proxy.faults = Faults(drop=0.03)
        async with claims.client(settings) as sagas:
            k = sagas.keys
            for i, rid in enumerate(rids):
                await sagas.start(rid, "u1", input=Claim(amount=100 * i))
        for round_ in range(4):
            await anyio.sleep(1.0)  # the fault's cadence (a kill a second), not a wait
            workers[-1].kill()  # kill -9, mid-whatever
            if round_ == 1:
                srv.stop(signal.SIGKILL)
                await anyio.sleep(1.0)  # the outage's length is the fault
                srv.start()
            spawn()
        dropped = proxy.counts["dropped"]
        proxy.faults = Faults()
        client = connect(srv.url)
        try:

            async def done() -> bool:
                return await states(client, k, rids) == ["completed"] * N

            await wait_until(done, within=120, what="every saga completed", every=0.2)
            taken_over = sum([await _check(client, k, rid, 100 * i) for i, rid in enumerate(rids)])
            assert dropped > 0  # the faults were applied
            assert taken_over > 0  # a kill hit a branch mid-attempt: its lane was taken over
        finally:
            await client.aclose()
    finally:
        for w in workers:
            w.kill()
        proxy.stop()
        srv.stop(signal.SIGKILL)


async def _check(client: Any, keys: Keys, rid: str, amount: int) -> int:
    """The saga's invariants; returns how many of its branch attempts were taken over."""
    saga, events = await saga_and_history(client, keys, rid)
    commits = Counter(e.step for e in events if e.event == EventType.COMMITTED)
    assert commits == Counter(STEPS), (rid, commits)
    pay = 0 if amount >= 1000 else min(amount, 500)
    assert msgspec.json.decode(saga.outputs["notify"]) == {"pay": pay}, rid
    # the join fired once: one branch commit enqueued decide (its 'n')
    fired = [e.step for e in events if e.event == EventType.COMMITTED
             and "decide" in e.next_step.split(",")]  # fmt: skip
    assert len(fired) == 1 and fired[0] in ("fraud", "coverage"), (rid, fired)
    lanes = ("fraud", "coverage")
    return sum(e.event == EventType.RECLAIMED and e.step in lanes for e in events)
