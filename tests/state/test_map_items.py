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
from tests.executor.support import wait_until
from tests.state.helpers import claim_next, pending, pending_ids

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


async def test_the_controllers_requeue_hands_a_lapsed_item_to_the_next_worker(
    sm: StateMachine,
) -> None:
    """An item whose worker died (its lease lapsed): the controller's requeue pass gives it
    a new entry (the old one acknowledged), whose claim takes the item over (attempt 2), and
    its commit fans in. A live item's entry is left alone."""
    from saga.controller.requeue import Requeuer

    sm.maps["parser"] = PLAN
    await ensure_groups(sm.client, sm.keys, ["router", "parser", "grouper"])
    await sm.start("mr-1", "u1", "router")
    c = await claim_next(sm, "router", "w-a")
    await sm.commit(c, CommitRequest(output=b"[{}, {}]", next_step="parser"))
    assert await _items(sm) == []  # the spawn
    reply = await sm.client.xreadgroup(GROUP, "w-a", {sm.keys.ready(0, "parser"): ">"}, count=2)
    rows = [(text(e), "mr-1", text(f[b"i"]), int(f[b"ep"])) for e, f in reply[0][1]]
    lost = await map_calls.claim_items(
        sm, "parser", 0, rows[:1], plan=PLAN, worker="w-a", lease_ms=1, max_lease_expiries=3,
        op="op-2",
    )  # fmt: skip
    live = await map_calls.claim_items(
        sm, "parser", 0, rows[1:], plan=PLAN, worker="w-a", lease_ms=600_000,
        max_lease_expiries=3, op="op-3",
    )  # fmt: skip
    assert lost[0].claim is not None and live[0].claim is not None
    requeuer = Requeuer(sm, [_Leased()], interval_s=0.0)

    async def idle_past_the_bound() -> bool:  # the requeue's bound: lease + 1 s
        got = await pending(sm.client, sm.keys.ready(0, "parser"))
        return len(got) == 2 and min(r["idle"] for r in got) > 1_100

    await wait_until(idle_past_the_bound, within=10, what="the items' entries idle for 1.1 s")
    assert await requeuer.once() == 1  # the lapsed one; the live one keeps its entry
    assert await pending_ids(sm.client, sm.keys.ready(0, "parser")) == {rows[1][0]}
    [taken] = await _items(sm)
    assert (taken.item, taken.attempt) == (0, 2)
    assert (await sm.commit(taken, CommitRequest(output=b"{}"))).state == "running"
    assert (await sm.commit(live[0].claim, CommitRequest(output=b"{}"))).state == "pending"


class _Leased:
    name = "parser"
    lease_s = 0.0
