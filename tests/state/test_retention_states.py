"""Every terminal state has its retention: the transition that ends a saga writes 'ret'
and its retired member from the state's own setting (StateLimits.retention), and the
sweep deletes the saga with its dead letter and pages at that time; a saga that comes
alive again (compensation of a failed saga) is no longer due."""

from __future__ import annotations

from typing import Any

import pytest

from saga.state import operator
from saga.state.keys import Keys
from saga.state.limits import KEPT, Retention, StateLimits
from saga.state.machine import StateMachine
from saga.state.model import FailAction, SagaState
from saga.state.requests import CommitRequest, FailRequest
from saga.state.retention import prune_retired
from saga.state.streams import ensure_groups
from tests.state.helpers import NEXT, STEPS, claim_next, saga_hash, server_ms, stream_rows

pytestmark = pytest.mark.anyio

DAYS = Retention(
    completed_s=100,
    failed_s=200,
    cancelled_s=300,
    compensated_s=400,
    compensation_failed_s=500,
    needs_review_s=600,
)
"""A different retention per state, so each test sees which one was applied."""


@pytest.fixture
async def rsm(redis: Any, keys: Keys) -> StateMachine:
    await ensure_groups(redis, keys, [*STEPS, "undo:router"])
    return StateMachine(redis, keys, StateLimits(retention=DAYS))


async def _due_in(sm: StateMachine, rid: str, user: str = "u1") -> int:
    """Seconds from now to the saga's 'ret' (rounded), checked against its retired member."""
    h = await saga_hash(sm.client, sm.keys, rid)
    assert await sm.client.zscore(sm.keys.retired(0), f"{user}|{rid}") == int(h["ret"])
    return round((int(h["ret"]) - await server_ms(sm.client)) / 1000)


async def _commit(sm: StateMachine, step: str, review: str = "") -> None:
    c = await claim_next(sm, step, "w")
    await sm.commit(c, CommitRequest(output=b"{}", next_step=NEXT[step], review=review))


async def _dead(sm: StateMachine, step: str, undo: tuple[str, ...] = ()) -> None:
    c = await claim_next(sm, step, "w", prev_step="_input" if step == "router" else "")
    req = FailRequest(action=FailAction.DEAD, error_class="E", error_message="x", undo=undo)
    await sm.fail(c, req)


async def _past(sm: StateMachine, rid: str) -> None:
    """Time passes: the saga's retention and its retired member are due now."""
    user = (await saga_hash(sm.client, sm.keys, rid))["uid"]
    await sm.client.hset(sm.keys.saga(rid), "ret", 0)
    await sm.client.zadd(sm.keys.retired(0), {f"{user}|{rid}": 0}, xx=True)


async def test_each_terminal_state_gets_its_own_retention(rsm: StateMachine) -> None:
    """Completed, needs review, failed, cancelled, compensated and compensation_failed
    each take their own setting, from the transition that ended them."""
    sm = rsm
    await sm.start("done", "u1", "router")
    for step in STEPS:
        await _commit(sm, step)
    await sm.start("flagged", "u1", "router")
    for step in STEPS:
        await _commit(sm, step, review="doubtful" if step == "parser" else "")
    await sm.start("dead", "u1", "router")
    await _dead(sm, "router")
    await sm.start("stuck", "u1", "router")
    await _commit(sm, "router")
    await _dead(sm, "parser", undo=("router",))
    c = await claim_next(sm, "undo:router", "w", prev_step="_input")
    await sm.fail(c, FailRequest(action=FailAction.DEAD, error_class="E", error_message="x"))
    # (last: their ready entries stay in the router's stream, stale)
    await sm.start("stopped", "u1", "router")
    await operator.cancel(sm, "stopped")
    await sm.start("undone", "u1", "router")
    assert (await operator.compensate(sm, "undone", ("router",))).state == "compensated"
    got = {rid: await _due_in(sm, rid) for rid in
           ("done", "flagged", "dead", "stopped", "undone", "stuck")}  # fmt: skip
    assert got == {"done": 100, "flagged": 600, "dead": 200, "stopped": 300, "undone": 400,
                   "stuck": 500}  # fmt: skip


async def test_accepting_a_review_starts_the_completed_retention(rsm: StateMachine) -> None:
    """A completed saga kept for its review is kept for the completed retention from the
    moment a person accepts it."""
    sm = rsm
    await sm.start("r1", "u1", "router")
    for step in STEPS:
        await _commit(sm, step, review="doubtful")
    assert await _due_in(sm, "r1") == 600
    await operator.accept_review(sm, "r1", STEPS)
    assert await _due_in(sm, "r1") == 100


async def test_a_failed_saga_is_deleted_with_its_dead_letter(rsm: StateMachine) -> None:
    """At the end of its retention the sweep deletes a dead-lettered saga's hash, history,
    pages and dead letter, and its index entries; before it, nothing."""
    sm, k = rsm, rsm.keys
    await sm.start("r1", "u1", "router")
    await sm.client.set(k.pages("r1"), b"pages")
    await _dead(sm, "router")
    assert len(await stream_rows(sm.client, k.dead(0, "router"))) == 1
    assert await prune_retired(sm, 0) == 0
    await _past(sm, "r1")
    assert await prune_retired(sm, 0) == 1
    assert await sm.client.exists(k.saga("r1"), k.history("r1"), k.pages("r1")) == 0
    assert await stream_rows(sm.client, k.dead(0, "router")) == []
    for index in (k.created_index(0), k.user_index(0, "u1"),
                  k.state_index(0, SagaState.FAILED), k.retired(0)):  # fmt: skip
        assert await sm.client.zscore(index, "r1") is None
    assert await sm.client.zcard(k.retired(0)) == 0


async def test_a_compensation_undoes_the_failed_sagas_retention(rsm: StateMachine) -> None:
    """A failed saga an operator compensates is alive again: no 'ret', not due; the sweep
    keeps it even when its old member comes due. Compensated, it is due again."""
    sm, k = rsm, rsm.keys
    await sm.start("r1", "u1", "router")
    await _commit(sm, "router")
    await _dead(sm, "parser")  # no undo named: a dead letter, failed
    assert await _due_in(sm, "r1") == 200
    res = await operator.compensate(sm, "r1", ("router",))
    assert res.state == "compensating"
    assert (await saga_hash(sm.client, k, "r1"))["ret"] == ""
    assert await sm.client.zscore(k.retired(0), "u1|r1") is None
    await sm.client.zadd(k.retired(0), {"u1|r1": 0})  # a stale member: kept alive
    assert await prune_retired(sm, 0) == 0
    assert await sm.client.exists(k.saga("r1")) == 1
    c = await claim_next(sm, "undo:router", "w", prev_step="_input")
    await sm.commit(c, CommitRequest(output=b"{}", next_step=""))
    assert await _due_in(sm, "r1") == 400


async def test_a_state_kept_until_purged_is_never_due(redis: Any, keys: Keys) -> None:
    """A retention of KEPT ('off'): no 'ret', no retired member; the sweep never sees it."""
    await ensure_groups(redis, keys, STEPS)
    sm = StateMachine(redis, keys, StateLimits(retention=Retention(cancelled_s=KEPT)))
    await sm.start("r1", "u1", "router")
    await operator.cancel(sm, "r1")
    assert (await saga_hash(redis, keys, "r1"))["ret"] == ""
    assert await redis.zcard(keys.retired(0)) == 0


async def test_a_saga_whose_step_moved_is_left_for_the_next_pass(rsm: StateMachine) -> None:
    """The sweep passes the dead-letter stream of the step it read; a saga at another step
    by the time the script runs keeps everything until a pass reads the right one."""
    sm, k = rsm, rsm.keys
    await sm.start("r1", "u1", "router")
    await _dead(sm, "router")
    await _past(sm, "r1")
    keys = [k.retired(0), k.created_index(0), *k.state_indexes(0), k.review_index(0)]
    rk = k.record("r1")
    keys += [rk.saga, rk.history, rk.pages, k.user_index(0, "u1"), k.dead(0, "parser")]
    from saga.state.scripts import evalsha

    reply = await evalsha(sm.client, "prune_retired", keys, ["u1|r1", "r1", "parser"])
    assert list(reply[1:]) == [0, 0, 1]
    assert await sm.client.exists(k.saga("r1")) == 1
    assert await prune_retired(sm, 0) == 1
    assert await stream_rows(sm.client, k.dead(0, "router")) == []
