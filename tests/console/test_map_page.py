"""The console's saga page of a saga running a map says so and lists the map's items:
counts by state and one row per item (its state, attempts, worker, last error)."""

from __future__ import annotations

import html
from typing import Any

import pytest

from saga.console.tokens import Role
from saga.state import map_calls
from saga.state.keys import GROUP
from saga.state.machine import StateMachine
from saga.state.map_calls import MapPlan
from saga.state.model import FailAction
from saga.state.replies import text
from saga.state.requests import CommitRequest, FailRequest
from saga.state.streams import ensure_groups
from tests.console.support import RunningConsole, sign_in
from tests.state.helpers import claim_next

pytestmark = pytest.mark.anyio
PLAN = MapPlan(over="router", next_step="grouper", concurrency=2)


async def _claim_items(sm: StateMachine) -> list[Any]:
    reply = await sm.client.xreadgroup(GROUP, "w-a", {sm.keys.ready(0, "parser"): ">"}, count=10)
    rows = [(text(i), text(f[b"rid"]), text(f.get(b"i", b"")), int(f[b"ep"]))
            for _, got in reply or [] for i, f in got]  # fmt: skip
    outs = await map_calls.claim_items(
        sm, "parser", 0, rows, plan=PLAN, worker="w-a", lease_ms=60_000, max_lease_expiries=3,
        op="op-1",
    )  # fmt: skip
    return [o.claim for o in outs if o.claim is not None]


async def test_a_mapping_sagas_page_lists_its_items(
    sm: StateMachine, console: RunningConsole, tokens: dict[Role, str], redis: Any
) -> None:
    """3 items, 2 open: one done (which released the third, pending), one waiting to retry
    with its error."""
    sm.maps["parser"] = PLAN
    await ensure_groups(sm.client, sm.keys, ["router", "parser", "grouper"])
    await sm.start("mp-1", "u1", "router")
    c = await claim_next(sm, "router", "w-a")
    await sm.commit(c, CommitRequest(output=b"[{}, {}, {}]", next_step="parser"))
    assert await _claim_items(sm) == []  # the spawn
    a, b = await _claim_items(sm)
    await sm.commit(a, CommitRequest(output=b"{}"))
    retry = FailRequest(action=FailAction.RETRY, error_class="Flaky", error_message="once",
                        delay_ms=60_000)  # fmt: skip
    await sm.fail(b, retry)
    async with console.client() as http:
        await sign_in(http, tokens[Role.VIEWER])
        page = html.unescape((await http.get("/sagas/mp-1")).text)
    assert "Running the items of map parser" in page
    assert "Map parser: 3 items" in page
    assert "1 done, 0 running, 1 waiting to retry, 0 failed, 1 pending" in page, page
    assert "<td>1</td><td>waiting_retry</td><td>1</td><td></td><td>Flaky: once</td>" in page
