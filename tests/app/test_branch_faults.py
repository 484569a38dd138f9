"""Branches and joins under faults: the claims type (intake, then fraud and coverage in
parallel, the join decide, then notify) runs 30 sagas while its worker is killed -9
again and again, Redis is SIGKILLed and restarted from its AOF (fsync always), and 3% of
the replies to the workers are dropped by a proxy (the command ran, its caller never
heard). Then every saga completed, each step committed once, and each join fired once
(one branch commit per saga enqueued decide: the 'next' its committed event names)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import msgspec
import pytest

from saga.state.keys import Keys
from saga.state.model import EventType
from tests.app.branch_apps import Claim, claims
from tests.app.fault_fleet import FaultFleet
from tests.executor.support import saga_and_history
from tests.faults.proxy import Faults

pytestmark = pytest.mark.anyio
STEPS = ("intake", "fraud", "coverage", "decide", "notify")
N = 30


async def test_joins_fire_once_through_kill_9_redis_restarts_and_dropped_replies(
    tmp_path: Path,
) -> None:
    """0 lost, 0 double commits, every join fired once."""
    with FaultFleet(tmp_path, prefix="fb", app="tests.app.branch_apps:claims", steps=STEPS,
                    proxy_seed=11, FRAUD_DELAY="1.0", COVERAGE_DELAY="0.7") as fleet:  # fmt: skip
        assert fleet.proxy is not None
        rids = [f"b-{i:02d}" for i in range(N)]
        await fleet.spawn().wait_ready(within=120)
        fleet.proxy.faults = Faults(drop=0.03)
        async with claims.client(fleet.settings) as sagas:
            k = sagas.keys
            for i, rid in enumerate(rids):
                await sagas.start(rid, "u1", input=Claim(amount=100 * i))
        await fleet.kill_rounds()
        dropped = fleet.proxy.counts["dropped"]
        fleet.proxy.faults = Faults()
        async with fleet.completed(k, rids) as client:
            taken_over = sum([await _check(client, k, rid, 100 * i) for i, rid in enumerate(rids)])
        assert dropped > 0  # the faults were applied
        assert taken_over > 0  # a kill hit a branch mid-attempt: its lane was taken over


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
