"""The controller is safe beside workers and a second controller by construction: the
promote and requeue scripts re-check each saga, so racing callers never move one twice."""

from __future__ import annotations

from collections import Counter
from typing import Any

import anyio
import pytest

from saga.api.pipeline import StepSpec
from saga.controller.requeue import Requeuer
from saga.state.codes import RC
from saga.state.connection import connect
from saga.state.keys import Keys
from saga.state.machine import StateMachine
from saga.state.model import FailAction
from saga.state.recovery import recover_idle
from saga.state.requests import FailRequest
from saga.worker.health import HealthState
from saga.worker.upkeep import Upkeep
from tests.state.helpers import claim_next, history, read_ready, stream_rows, wait_until

pytestmark = pytest.mark.anyio

N = 40
STEP = "router"


def specs(lease_s: float = 30.0) -> list[StepSpec]:
    async def noop(ctx: Any, inp: Any) -> Any:
        return inp

    return [StepSpec(name=STEP, fn=noop, input_type=dict, output_type=dict, lease_s=lease_s)]


async def entries_per_record(client: Any, keys: Keys) -> Counter[str]:
    return Counter(f["rid"] for _, f in await stream_rows(client, keys.ready(0, STEP)))


async def test_controller_and_worker_promote_each_retry_once(
    sm: StateMachine, keys: Keys, redis_url: str
) -> None:
    """Two controllers and a worker promoting the same due retries at once: one entry each."""
    for i in range(N):
        await sm.start(f"r{i}", "u1", STEP)
        claim = await claim_next(sm, STEP, "w-a")
        req = FailRequest(action=FailAction.RETRY, error_class="E", error_message="m", delay_ms=0)
        assert (await sm.fail(claim, req)).code == RC.OK
    clients = [connect(redis_url) for _ in range(3)]
    upkeeps = [
        Upkeep(StateMachine(c, keys), specs(), name, HealthState())
        for c, name in zip(clients, ["controller-1", "controller-2", "w-b"], strict=True)
    ]
    try:
        for _ in range(3):  # the first round does the work; later ones find nothing due
            async with anyio.create_task_group() as tg:
                for up in upkeeps:
                    tg.start_soon(up.promote_once)
    finally:
        for c in clients:
            await c.aclose()
    assert sum(sum(up.promoted.values()) for up in upkeeps) == N
    assert await sm.client.zcard(keys.delayed(0, STEP)) == 0
    # Each record: its first entry (claimed, acknowledged) and exactly one promoted entry.
    assert await entries_per_record(sm.client, keys) == Counter({f"r{i}": 2 for i in range(N)})
    for i in range(N):
        promoted = [e for e in await history(sm.client, keys, f"r{i}") if e["e"] == "promoted"]
        assert len(promoted) == 1, i


async def test_controllers_and_a_worker_recover_each_idle_entry_once(
    sm: StateMachine, keys: Keys, redis_url: str
) -> None:
    """Two controllers requeueing and a worker reclaiming the same idle entries at once:
    each entry ends either requeued once or owned by the worker, never both."""
    for i in range(N):
        await sm.start(f"r{i}", "u1", STEP)
    delivered = dict(await read_ready(sm.client, keys, STEP, "w-gone", count=N))
    clients = [connect(redis_url) for _ in range(3)]
    # Lease and interval tiny: entries count as idle after ~1 s.
    requeuers = [Requeuer(StateMachine(c, keys), specs(lease_s=0.001), 0.0) for c in clients[:2]]
    recovered: list[str] = []

    async def worker_recovers() -> None:
        got = await recover_idle(
            StateMachine(clients[2], keys), STEP, 0, worker="w-b", min_idle_ms=1001, count=N
        )
        recovered.extend(entry_id for entry_id, _ in got.entries)

    async def idle_enough() -> bool:
        rows = await sm.client.xpending_range(
            keys.ready(0, STEP), "executors", "-", "+", N, idle=1001
        )
        return len(rows) == N

    await wait_until(idle_enough, within=10, what="entries idle past the threshold")
    try:
        async with anyio.create_task_group() as tg:
            for r in requeuers:
                tg.start_soon(r.once)
            tg.start_soon(worker_recovers)
    finally:
        for c in clients:
            await c.aclose()
    requeued = sum(sum(r.requeued.values()) for r in requeuers)
    assert requeued + len(recovered) == N
    per_record = await entries_per_record(sm.client, keys)
    for entry_id, rid in delivered.items():
        new_entries = per_record[rid] - 1
        assert new_entries + (entry_id in recovered) == 1, (rid, new_entries, entry_id in recovered)
