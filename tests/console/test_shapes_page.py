"""The console's saga page of a waiting saga says what it waits for (the signal, or a
sleep's timer), that no worker holds it, when its timer is due, and how to signal it."""

from __future__ import annotations

import html
from typing import Any

import pytest

from saga.console.tokens import Role
from saga.state import signals
from saga.state.machine import StateMachine
from saga.state.requests import CommitRequest
from tests.console.support import RunningConsole, sign_in
from tests.state.helpers import claim_next

pytestmark = pytest.mark.anyio


async def _parked(sm: StateMachine, rid: str, event: str, due_ms: int) -> None:
    await sm.start(rid, "u1", "router")
    c = await claim_next(sm, "router", "w-a")
    await sm.commit(c, CommitRequest(output=b"{}", next_step="parser"))
    w = await claim_next(sm, "parser", "w-a", prev_step="router")
    plan = signals.WaitPlan(event=event, next_step="grouper", due_ms=due_ms, on_timeout="fail")
    await signals.park(sm, w, plan, worker="w-a")


async def test_a_waiting_sagas_page_says_what_it_waits_for(
    sm: StateMachine, console: RunningConsole, tokens: dict[Role, str], redis: Any
) -> None:
    """A wait for 'approved' names the signal and the command; a sleep names its timer."""
    await _parked(sm, "wt-1", "approved", 0)
    await _parked(sm, "wt-2", "", 4_102_444_800_000)  # 2100-01-01
    async with console.client() as http:
        await sign_in(http, tokens[Role.VIEWER])
        waiting = html.unescape((await http.get("/sagas/wt-1")).text)
        sleeping = html.unescape((await http.get("/sagas/wt-2")).text)
    assert "Waiting at parser for the signal approved" in waiting
    assert "It has no timer." in waiting and "saga signal wt-1 approved" in waiting
    assert "Sleeping at parser" in sleeping and "2100-01-01" in sleeping
    assert 'class="state st-waiting"' in waiting
