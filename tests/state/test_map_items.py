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
from tests.state.helpers import claim_next, pending

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


async def test_the_controllers_requeue_leaves_an_items_entry_to_a_worker(
    sm: StateMachine,
) -> None:
    """An item whose worker died (its lease lapsed): the controller's requeue pass leaves
    its entry pending (requeue_idle would drop it as not the saga's); a worker's recovery
    takes it over, and its commit fans in."""
    from saga.controller.requeue import Requeuer
    from saga.state import recovery

    sm.maps["parser"] = PLAN
    await ensure_groups(sm.client, sm.keys, ["router", "parser", "grouper"])
    await sm.start("mr-1", "u1", "router")
    c = await claim_next(sm, "router", "w-a")
    await sm.commit(c, CommitRequest(output=b"[{}]", next_step="parser"))
    assert await _items(sm) == []  # the spawn
    reply = await sm.client.xreadgroup(GROUP, "w-a", {sm.keys.ready(0, "parser"): ">"}, count=1)
    [(entry, fields)] = reply[0][1]
    row = (text(entry), "mr-1", text(fields[b"i"]), int(fields[b"ep"]))
    [lost] = await map_calls.claim_items(
        sm, "parser", 0, [row], plan=PLAN, worker="w-a", lease_ms=1, max_lease_expiries=3,
        op="op-2",
    )  # fmt: skip
    assert lost.claim is not None
    requeuer = Requeuer(sm, [_Leased()], interval_s=0.0)

    async def idle_past_the_bound() -> bool:  # the requeue's bound: lease + 1 s
        rows = await pending(sm.client, sm.keys.ready(0, "parser"))
        return bool(rows) and min(r["idle"] for r in rows) > 1_100

    await wait_until(idle_past_the_bound, within=10, what="the item's entry idle for 1.1 s")
    assert await requeuer.once() == 0
    rec = await recovery.recover_idle(sm, "parser", 0, worker="w-b", min_idle_ms=0)
    rows = [(e, text(f[b"rid"]), text(f[b"i"]), int(f[b"ep"])) for e, f in rec.entries]
    assert [r[0] for r in rows] == [text(entry)]  # still pending: not dropped
    [taken] = await map_calls.claim_items(
        sm, "parser", 0, rows, plan=PLAN, worker="w-b", lease_ms=60_000, max_lease_expiries=3,
        op="op-3",
    )  # fmt: skip
    assert taken.claim is not None and taken.claim.attempt == 2
    assert (await sm.commit(taken.claim, CommitRequest(output=b"{}"))).state == "pending"


class _Leased:
    name = "parser"
    lease_s = 0.0
