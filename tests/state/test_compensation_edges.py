"""Compensation at its edges: a saga dead-lettered by its claim (too many lease expiries)
enters compensation in that same script, and undo attempts bill their LLM cost exactly as
step attempts do (the saga's cost, the day's totals, the user's spend, cached answers)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from saga.state.codes import RC
from saga.state.days import utc_day
from saga.state.keys import Keys
from saga.state.machine import StateMachine
from saga.state.model import FailAction
from saga.state.recovery import recover_idle
from saga.state.requests import CommitRequest, FailRequest
from saga.state.streams import ensure_groups
from tests.state.helpers import claim_next, history, saga_hash, stream_rows, wait_lease_expired
from tests.state.test_compensation import UNDOABLE, _claim_undo, _commit, _dead

pytestmark = pytest.mark.anyio


@pytest.fixture
async def usm(sm: StateMachine, keys: Keys) -> StateMachine:
    await ensure_groups(sm.client, keys, [f"undo:{s}" for s in UNDOABLE])
    return sm


async def test_lease_expiries_dead_letter_into_compensation_in_the_claim(
    usm: StateMachine, keys: Keys
) -> None:
    """The parser's lease expires past its cap: the claim that would dead-letter the saga
    enters 'compensating' at once (no dead letter, no 'failed' in between), the router's
    undo enqueued, as fail_step's dead path does; a re-sent claim writes nothing more."""
    sm = usm
    await sm.start("r1", "u1", "router")
    await _commit(sm, "router")
    c = await claim_next(sm, "parser", "w-a", lease_ms=1)
    await wait_lease_expired(sm.client, c.lease_until_ms)
    got = await recover_idle(sm, "parser", 0, worker="w-b", min_idle_ms=0)
    entries = [(e, f[b"rid"].decode()) for e, f in got.entries]
    kw: Any = {"worker": "w-b", "lease_ms": 60_000, "max_lease_expiries": 1,
               "prev_step": "router", "undoable": UNDOABLE, "op": "op-claim"}  # fmt: skip
    [out] = await sm.claim("parser", 0, entries, **kw)
    assert (out.code, out.detail) == (RC.DEAD_LETTERED, "compensating")
    h = await saga_hash(sm.client, keys, "r1")
    assert (h["state"], h["step"], h["undo"], h["epoch"]) == (
        "compensating", "undo:router", "router", "2")  # fmt: skip
    assert (h["ec"], h["token"]) == ("LeaseExpired", "")
    assert await stream_rows(sm.client, keys.dead(0, "parser")) == []
    evs = await history(sm.client, keys, "r1")
    assert [(e["e"], e["s"], e.get("x")) for e in evs[-2:]] == [
        ("dead_lettered", "parser", "compensating"),
        ("compensating", "undo:router", evs[-1]["x"]),
    ]
    [again] = await sm.claim("parser", 0, entries, **kw)
    assert again.code == RC.STALE_ENTRY
    assert len(await history(sm.client, keys, "r1")) == len(evs)
    u = await _claim_undo(sm, "router")
    assert (await sm.commit(u, CommitRequest(output=b"{}", worker="w-u"))).state == "compensated"


async def _spend(sm: StateMachine, keys: Keys) -> dict[str, float]:
    month = utc_day()[1]
    raw = await sm.client.hgetall(keys.spend(0, month))
    return {k.decode(): float(v) for k, v in raw.items()}


async def test_undo_attempts_bill_like_step_attempts(usm: StateMachine, keys: Keys) -> None:
    """An undo's failed attempt and its commit each attribute their cost: to the saga
    (cost:undo:router), the day's totals per user and step, the user's spend that budgets
    check, and the history event (c, k); a cached answer's cost is added once."""
    sm = usm
    await sm.start("r1", "u1", "router")
    await _commit(sm, "router")
    await _dead(sm, "parser")
    date, _, dd = utc_day()
    u = await _claim_undo(sm, "router")
    fail = FailRequest(action=FailAction.RETRY, error_class="E", error_message="m",
                       delay_ms=0, cost=0.5, tokens=7)  # fmt: skip
    assert (await sm.fail(u, fail)).code == RC.OK
    await sm.promote("undo:router", 0, ["r1"])
    u = await _claim_undo(sm, "router")
    cached = keys.llm_cache("r1", "undo:router", "e2-abc")
    await sm.client.set(cached, json.dumps({"cost": 0.125}), ex=60)
    done = CommitRequest(output=b"{}", worker="w-u", cost=0.25, tokens=11, cost_keys=(cached,))
    assert (await sm.commit(u, done)).state == "compensated"
    assert float((await saga_hash(sm.client, keys, "r1"))["cost:undo:router"]) == 0.875
    totals = await sm.client.hgetall(keys.costs(0, date))
    assert float(totals[b"u1|undo:router"]) == 0.875 and int(totals[b"u1|undo:router|n"]) == 2
    assert await _spend(sm, keys) == {"u1": 0.875, f"u1|{dd}": 0.875}
    assert json.loads(await sm.client.get(cached))["by"] == u.token  # billed: not again
    evs = [e for e in await history(sm.client, keys, "r1") if e["s"] == "undo:router"]
    billed = [(e["e"], float(e["c"]), e["k"]) for e in evs if "c" in e]
    assert billed == [("retry_scheduled", 0.5, "7"), ("committed", 0.375, "11")]
