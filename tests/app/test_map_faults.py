"""Every shape under faults: the trips type (a step returning legs, a map booking each
leg, a step after the fan-in, two branches and their join, a wait for 'approved' with a
timeout, a step, a sleep, a step) runs its sagas while the worker is killed -9 again and
again, Redis is SIGKILLed and restarted from its AOF (fsync always), and 3% of the
replies to the workers are dropped by a proxy (the command ran, its caller never heard);
half the sagas are signalled, each signal sent twice with its id. Then every saga
completed: 0 lost, each step and each item committed once, the fan-in and the join fired
once each, each signal consumed once (or the timeout's default taken once), the timer
fired once (the rig: tests/app/fault_fleet.py). The short form runs in CI; ``-m slow``
runs the long one."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import anyio
import msgspec
import pytest

from saga.state.connection import TRANSIENT_ERRORS
from saga.state.errors import StepConflictError
from saga.state.keys import Keys
from saga.state.model import EventType
from tests.app.fault_fleet import FaultFleet
from tests.app.map_apps import Trip, trips
from tests.executor.support import saga_and_history
from tests.faults.proxy import Faults

pytestmark = pytest.mark.anyio
STEPS = ("plan", "book", "priced", "hotel", "car", "confirm", "approved", "ticket", "nap", "done")
PLAIN = ("plan", "priced", "hotel", "car", "confirm", "ticket", "done")


async def test_every_shape_holds_through_faults(tmp_path: Path) -> None:
    """12 sagas of 5 legs, 4 rounds of faults (the short form)."""
    await _run(tmp_path, sagas_n=12, legs=5, rounds=4)


@pytest.mark.slow
async def test_every_shape_holds_through_faults_long(tmp_path: Path) -> None:
    """60 sagas of 12 legs, 12 rounds of faults (Redis restarted in 3 of them)."""
    await _run(tmp_path, sagas_n=60, legs=12, rounds=12)


async def _run(tmp_path: Path, *, sagas_n: int, legs: int, rounds: int) -> None:
    with FaultFleet(tmp_path, prefix="fm", app="tests.app.map_apps:trips", steps=STEPS,
                    proxy_seed=17, LEG_DELAY="0.3", TRIP_TIMEOUT="4") as fleet:  # fmt: skip
        assert fleet.proxy is not None
        rids = [f"t-{i:02d}" for i in range(sagas_n)]
        signalled = rids[::2]
        await fleet.spawn().wait_ready(within=120)
        fleet.proxy.faults = Faults(drop=0.03)
        async with trips.client(fleet.settings) as sagas:
            k = sagas.keys
            for rid in rids:
                await sagas.start(rid, "u1", input=Trip(legs=legs))

            async def signal_some(round_: int) -> None:
                for rid in signalled[round_ % 4 :: 4]:
                    for _ in range(2):  # the same id twice: the second is a no-op
                        await _signal(sagas, rid)

            for _ in range(rounds // 4):  # each set of 4 rounds restarts Redis once
                await fleet.kill_rounds(4, after=signal_some)
            for rid in signalled:
                await _signal(sagas, rid)
        dropped = fleet.proxy.counts["dropped"]
        fleet.proxy.faults = Faults()
        async with fleet.completed(k, rids) as client:
            seen: Counter[str] = Counter()
            for rid in rids:
                seen.update(await _check(client, k, rid, legs, signalled=rid in signalled))
        assert dropped > 0  # the faults were applied
        assert seen["item_taken_over"] > 0  # a kill hit an item mid-attempt
        assert seen["signalled"] > 0 and seen["default"] > 0  # both ends of the wait


async def _signal(sagas: Any, rid: str) -> None:
    """One signal with its fixed id, re-sent while Redis comes back; refused (one
    sentence) for a saga its timeout already finished."""
    for _ in range(50):
        try:
            await sagas.signal(rid, "approved", data={"by": "ann"}, signal_id=f"sig-{rid}")
            return
        except StepConflictError:  # it ended first: its timeout took the default
            return
        except TRANSIENT_ERRORS:
            await anyio.sleep(0.2)
    raise AssertionError(f"the signal to {rid} never got through")


async def _check(client: Any, keys: Keys, rid: str, legs: int, *, signalled: bool) -> Counter[str]:
    """The saga's invariants; returns what it saw (takeovers, how its wait ended)."""
    saga, events = await saga_and_history(client, keys, rid)
    commits = Counter((e.step, e.item) for e in events if e.event == EventType.COMMITTED)
    want = Counter({(s, -1): 1 for s in PLAIN} | {("book", i): 1 for i in range(legs)})
    assert commits == want, (rid, commits - want, want - commits)  # 0 lost, 0 double
    kinds = Counter(e.event for e in events)
    assert (kinds[EventType.SPAWNED], kinds[EventType.FANNED_IN]) == (1, 1), rid
    priced = msgspec.json.decode(saga.outputs["priced"])
    assert priced["refs"] == [f"{rid}-{i}" for i in range(legs)], rid  # item order
    joined = [e.step for e in events if e.event == EventType.COMMITTED
              and "confirm" in e.next_step.split(",")]  # fmt: skip
    assert len(joined) == 1 and joined[0] in ("hotel", "car"), (rid, joined)  # the join once
    ended = [e.event for e in events if e.step == "approved" and e.event in
             (EventType.SIGNALLED, EventType.WAIT_TIMED_OUT)]  # fmt: skip
    assert len(ended) == 1, (rid, ended)
    naps = [e for e in events if e.step == "nap" and e.event == EventType.WAIT_TIMED_OUT]
    assert len(naps) == 1, rid  # the timer fired once
    by = msgspec.json.decode(saga.outputs["done"])["by"]
    seen = Counter(item_taken_over=sum(e.event == EventType.RECLAIMED and e.step == "book"
                                       for e in events))  # fmt: skip
    if ended == [EventType.SIGNALLED]:
        assert signalled and by == "ann", rid  # consumed once (ended holds one)
        seen["signalled"] += 1
    else:
        assert by == "nobody", rid  # the timeout's default, once
        seen["default"] += 1
    return seen
