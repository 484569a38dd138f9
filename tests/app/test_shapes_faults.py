"""Waits and timers under faults: the reviews type (a step whose commit runs the next
one a second later, a wait for 'approved' with a timeout, a step, a sleep, a step) runs
30 sagas while its worker is killed -9 again and
again and Redis is SIGKILLed and restarted from its AOF (fsync always); half the sagas
are signalled, each signal sent twice with its id. Then every saga completed, each
step committed once, each wait ended once (signalled or timed out, never both), each
signal consumed once (some are kept while the saga waits on its run-next-at timer),
every timer fired once (the run-next-at's 'timer_fired' included)."""

from __future__ import annotations

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
from tests.app.shapes_apps import Doc, reviews
from tests.executor.support import saga_and_history

pytestmark = pytest.mark.anyio
STEPS = ("draft", "approved", "publish", "nap", "archive")
N = 30


async def test_waits_and_timers_hold_through_kill_9_and_redis_restarts(tmp_path: Path) -> None:
    """0 lost, 0 double commits, each wait ended once, each signal consumed once."""
    with FaultFleet(tmp_path, prefix="fw", app="tests.app.shapes_apps:reviews", steps=STEPS,
                    REVIEW_TIMEOUT="4", DRAFT_AFTER="1") as fleet:  # fmt: skip
        rids = [f"f-{i:02d}" for i in range(N)]
        signalled = rids[::2]
        await fleet.spawn().wait_ready(within=120)
        async with reviews.client(fleet.settings) as sagas:
            k = sagas.keys
            for rid in rids:
                await sagas.start(rid, "u1", input=Doc(title=rid))

            async def signal_some(round_: int) -> None:
                for rid in signalled[round_::4]:
                    for _ in range(2):  # the same id twice: the second is a no-op
                        await _signal(sagas, rid)

            await fleet.kill_rounds(after=signal_some)
            for rid in signalled:
                await _signal(sagas, rid)
        async with fleet.completed(k, rids) as client:
            paths = [await _check(client, k, rid, signalled=rid in signalled) for rid in rids]
        assert {"signalled", "default"} <= set(paths), paths  # both ends were exercised


async def _signal(sagas: Any, rid: str) -> None:
    """One signal with its fixed id, re-sent while Redis comes back; refused (one
    sentence) for a saga its timeout already finished."""
    for _ in range(50):
        try:
            await sagas.signal(rid, "approved", data={"by": "ann", "title": rid},
                               signal_id=f"sig-{rid}")  # fmt: skip
            return
        except StepConflictError:  # it ended first: its timeout took the default
            return
        except TRANSIENT_ERRORS:
            await anyio.sleep(0.2)
    raise AssertionError(f"the signal to {rid} never got through")


async def _check(client: Any, keys: Keys, rid: str, *, signalled: bool) -> str:
    """The saga's invariants; returns how its wait ended."""
    saga, events = await saga_and_history(client, keys, rid)
    commits = sorted(e.step for e in events if e.event == EventType.COMMITTED)
    assert commits == ["archive", "draft", "publish"], (rid, commits)
    ended = [e.event for e in events if e.step == "approved" and e.event in
             (EventType.SIGNALLED, EventType.WAIT_TIMED_OUT)]  # fmt: skip
    consumed = [e for e in events if e.event == EventType.SIGNALLED]
    fired = [e for e in events if e.event == EventType.WAIT_TIMED_OUT]
    assert len(ended) == 1, (rid, ended)
    assert [e.step for e in fired if e.step == "nap"] == ["nap"], rid
    timer = [e.step for e in events if e.event == EventType.TIMER_FIRED]
    assert timer == ["approved"], (rid, timer)  # draft's run-next-at fired once
    by = msgspec.json.decode(saga.outputs["archive"])["by"]
    if signalled and consumed:
        assert (by, len(consumed), consumed[0].detail) == ("ann", 1, f"approved sig-{rid}")
        return "signalled"
    # a signal may come after the timeout: then the default went on
    assert by == "nobody" and len(fired) == 2, (rid, by, fired)
    return "default"
