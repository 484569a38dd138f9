"""A map item's commit and failure bill its cost to the saga's user, once: the cost its
attempt reports and each cached LLM answer it used (marked with the attempt's token, so
a reuse is not billed again)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from saga.state import map_calls
from saga.state.keys import GROUP
from saga.state.machine import StateMachine
from saga.state.map_calls import MapPlan
from saga.state.model import FailAction
from saga.state.replies import text
from saga.state.requests import CommitRequest, FailRequest
from saga.state.streams import ensure_groups
from tests.state.helpers import claim_next

pytestmark = pytest.mark.anyio
PLAN = MapPlan(over="router", next_step="grouper", concurrency=2)


async def _items(sm: StateMachine) -> list[Any]:
    reply = await sm.client.xreadgroup(GROUP, "w-a", {sm.keys.ready(0, "parser"): ">"}, count=10)
    rows = [(text(i), text(f[b"rid"]), text(f.get(b"i", b"")), int(f[b"ep"]))
            for _, got in reply or [] for i, f in got]  # fmt: skip
    outs = await map_calls.claim_items(
        sm, "parser", 0, rows, plan=PLAN, worker="w-a", lease_ms=60_000, max_lease_expiries=3,
        op="op-1",
    )  # fmt: skip
    return [o.claim for o in outs if o.claim is not None]


async def test_items_bill_their_costs_and_cached_answers_once(sm: StateMachine) -> None:
    """0.01 reported + a 0.02 cached answer at a commit, 0.005 at a failure: the saga's
    parser cost is 0.035, the answer is marked, and its second use bills nothing."""
    sm.maps["parser"] = PLAN
    await ensure_groups(sm.client, sm.keys, ["router", "parser", "grouper"])
    await sm.start("mc-1", "u1", "router")
    c = await claim_next(sm, "router", "w-a")
    await sm.commit(c, CommitRequest(output=b"[{}, {}]", next_step="parser"))
    assert await _items(sm) == []  # the spawn
    a, b = await _items(sm)
    answer = sm.keys.llm_cache("mc-1", "parser", "e1-abc")
    await sm.client.set(answer, json.dumps({"cost": 0.02}), ex=600)
    done = CommitRequest(output=b"{}", cost=0.01, cost_keys=(answer,))
    assert (await sm.commit(a, done)).code.name == "OK"
    failed = FailRequest(action=FailAction.RETRY, error_class="E", error_message="x",
                         delay_ms=60_000, cost=0.005, cost_keys=(answer,))  # fmt: skip
    assert (await sm.fail(b, failed)).code.name == "OK"
    cost = float(await sm.client.hget(sm.keys.saga("mc-1"), "cost:parser"))
    assert cost == pytest.approx(0.035)
    assert json.loads(await sm.client.get(answer))["by"] == a.token
