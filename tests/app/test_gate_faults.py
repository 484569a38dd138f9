"""The review gate under faults: 30 letters, a third flagged, run while the worker is
killed -9 again and again and Redis is SIGKILLed and restarted from its AOF (fsync
always); each flagged letter's review is accepted during the faults, each acceptance
sent twice under its op id. Then every saga completed, each step committed once, the
gate passed once per saga, and no flagged letter was sent before its review."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

from saga.state.connection import TRANSIENT_ERRORS
from saga.state.errors import StepConflictError
from saga.state.model import EventType
from tests.app.fault_fleet import FaultFleet
from tests.app.gate_apps import Letter, letters
from tests.executor.support import saga_and_history

pytestmark = pytest.mark.anyio
STEPS = ("check", "review", "send")
N = 30


async def test_the_gate_holds_through_kill_9_and_redis_restarts(tmp_path: Path) -> None:
    with FaultFleet(tmp_path, prefix="fg", app="tests.app.gate_apps:letters",
                    steps=STEPS) as fleet:  # fmt: skip
        rids = [f"g-{i:02d}" for i in range(N)]
        flagged = rids[::3]
        await fleet.spawn().wait_ready(within=120)
        async with letters.client(fleet.settings) as sagas:
            k = sagas.keys
            for rid in rids:
                text = f"urgent {rid}" if rid in flagged else rid
                await sagas.start(rid, "u1", input=Letter(text=text))

            async def accept_some(round_: int) -> None:
                for rid in flagged[round_::4]:
                    for _ in range(2):  # the same op id twice: the second does nothing
                        await _accept(sagas, rid)

            await fleet.kill_rounds(after=accept_some)
            for rid in flagged:
                await _accept(sagas, rid)
        async with fleet.completed(k, rids) as client:
            for rid in rids:
                saga, events = await saga_and_history(client, k, rid)
                assert not saga.review, (rid, saga.review)  # accepted, never flagged again
                commits = sorted(e.step for e in events if e.event == EventType.COMMITTED)
                assert commits == ["check", "send"], (rid, commits)
                passed = [e for e in events if e.event == EventType.GATE_PASSED]
                assert len(passed) == 1, (rid, passed)
                kinds = [e.event for e in events]
                if rid in flagged:  # reviewed before it passed, and before send ran
                    assert EventType.REVIEWED in kinds, rid
                    assert kinds.index(EventType.REVIEWED) < kinds.index(EventType.GATE_PASSED)
                else:
                    assert EventType.REVIEWED not in kinds, rid
                    assert passed[0].detail == "not flagged for review", passed


async def _accept(sagas: Any, rid: str) -> None:
    """Accept ``rid``'s review under a fixed op id, once it is flagged (its check may not
    have committed yet), re-sent while Redis comes back."""
    for _ in range(200):
        try:
            await sagas.accept_review(rid, actor="ann", op=f"acc-{rid}")
            return
        except StepConflictError:  # not flagged yet: its check has not committed
            await anyio.sleep(0.1)
        except TRANSIENT_ERRORS:
            await anyio.sleep(0.2)
    raise AssertionError(f"the review of {rid} was never accepted")
