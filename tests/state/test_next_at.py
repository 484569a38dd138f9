"""A step's "run the next step at / after T" against a real server: commit_steps parks
the saga as a timer in its partition's waits (no ready entry), time_out_wait's 'resume'
path enqueues the next step when due, once; cancel and compensate remove the timer at
once; purge refuses a waiting saga."""

from __future__ import annotations

import anyio
import pytest

from saga.state import operator, signals
from saga.state.codes import RC
from saga.state.keys import Keys
from saga.state.machine import StateMachine
from saga.state.model import Claim, EventType, SagaState
from saga.state.purge import Purger
from saga.state.reads import get_saga_and_history
from saga.state.requests import CommitRequest, Outcome
from tests.state.helpers import claim_next, saga_hash, server_ms, stream_rows

pytestmark = pytest.mark.anyio


async def _router_commit(sm: StateMachine, **kw: int) -> tuple[Claim, Outcome]:
    """Start r1, claim its router and commit it with the given not-before fields."""
    await sm.start("r1", "u1", "router")
    c = await claim_next(sm, "router", "w-a")
    out = await sm.commit(c, CommitRequest(output=b'{"n":1}', next_step="parser", **kw))  # type: ignore[arg-type]
    return c, out


async def test_run_after_parks_the_saga_as_a_timer_and_resume_enqueues_it_once(
    sm: StateMachine, keys: Keys
) -> None:
    """A commit with a delay leaves no ready entry: the saga waits at the next step with its
    timer in the waits zset; when due, 'resume' adds the entry (timer_fired), only once."""
    before = await server_ms(sm.client)
    c, out = await _router_commit(sm, run_after_ms=300)
    assert (out.code, out.state) == (RC.OK, SagaState.WAITING)
    h = await saga_hash(sm.client, keys, "r1")
    assert (h["state"], h["step"], h["entry"], h["wto"], h["wnext"]) == (
        "waiting", "parser", "", "resume", "parser")  # fmt: skip
    due = int(h["due"])
    assert before + 300 <= due <= before + 300 + 2_000
    assert await sm.client.zscore(keys.waits(0), "r1") == due
    assert await stream_rows(sm.client, keys.ready(0, "parser")) == []
    assert await signals.time_out_one(sm, "r1") == "not_due"
    # A re-sent commit of the same attempt writes nothing more.
    req = CommitRequest(output=b'{"n":1}', next_step="parser", run_after_ms=300)
    again = await sm.commit(c, req)
    assert again.code == RC.DUPLICATE
    path = "not_due"
    while path == "not_due":  # before its due time the sweep leaves it
        assert await server_ms(sm.client) <= due + 2_000, "the timer never fired"
        path = await signals.time_out_one(sm, "r1")
        await anyio.sleep(0.01)
    assert path == "resume" and await server_ms(sm.client) >= due
    assert await signals.time_out_one(sm, "r1") == "gone"
    assert await signals.time_out_due(sm, 0, due + 10_000) == {}
    assert len(await stream_rows(sm.client, keys.ready(0, "parser"))) == 1
    saga, events = await get_saga_and_history(sm.client, keys, "r1")
    assert (saga.state, saga.step, saga.due_ms) == (SagaState.PENDING, "parser", 0)
    committed = next(e for e in events if e.event == EventType.COMMITTED)
    fired = [e for e in events if e.event == EventType.TIMER_FIRED]
    assert committed.due_ms == due and len(fired) == 1
    assert (fired[0].step, fired[0].due_ms) == ("parser", due)
    p = await claim_next(sm, "parser", "w-a", prev_step="router")
    assert p.input == b'{"n":1}'
    assert await sm.client.zcard(keys.waits(0)) == 0


async def test_a_time_already_past_enqueues_at_once(sm: StateMachine, keys: Keys) -> None:
    """run_at in the past is no timer: the next step's entry is added by the commit."""
    _, out = await _router_commit(sm, run_at_ms=(await server_ms(sm.client)) - 5_000)
    assert (out.code, out.state) == (RC.OK, SagaState.PENDING)
    assert await sm.client.zcard(keys.waits(0)) == 0
    assert len(await stream_rows(sm.client, keys.ready(0, "parser"))) == 1


async def test_an_absolute_time_is_the_timers_due_time(sm: StateMachine, keys: Keys) -> None:
    """run_at (epoch ms) becomes the timer's score exactly."""
    at = await server_ms(sm.client) + 3_600_000
    _, out = await _router_commit(sm, run_at_ms=at)
    assert out.state == SagaState.WAITING
    assert await sm.client.zscore(keys.waits(0), "r1") == at


async def test_the_last_step_ignores_a_not_before(sm: StateMachine, keys: Keys) -> None:
    """With no next step the saga completes: a not-before has nothing to delay."""
    await sm.start("r1", "u1", "grouper")
    c = await claim_next(sm, "grouper", "w-a")
    out = await sm.commit(c, CommitRequest(output=b"{}", run_after_ms=60_000))
    assert out.state == SagaState.COMPLETED
    assert await sm.client.zcard(keys.waits(0)) == 0


async def test_cancel_removes_the_timer_at_once(sm: StateMachine, keys: Keys) -> None:
    """Cancel of a saga waiting on a timer removes it from the waits; nothing fires."""
    await _router_commit(sm, run_after_ms=60_000)
    assert await operator.cancel(sm, "r1") == "waiting"
    assert await sm.client.zcard(keys.waits(0)) == 0
    h = await saga_hash(sm.client, keys, "r1")
    assert h["state"] == "cancelled" and "wto" not in h and "wdue" not in h


async def test_compensate_removes_the_timer_at_once(sm: StateMachine, keys: Keys) -> None:
    """Compensate of a saga waiting on a timer removes it and undoes its committed steps."""
    await _router_commit(sm, run_after_ms=60_000)
    res = await operator.compensate(sm, "r1", ["router"])
    assert res.state == SagaState.COMPENSATING
    assert await sm.client.zcard(keys.waits(0)) == 0
    assert "wto" not in await saga_hash(sm.client, keys, "r1")


async def test_purge_refuses_a_waiting_saga_until_cancelled(sm: StateMachine, keys: Keys) -> None:
    """purge refuses a saga waiting on a timer, in one sentence; after cancel it purges."""
    await _router_commit(sm, run_after_ms=60_000)
    purger = Purger(sm.client, keys, ("router", "parser", "grouper"))
    report = await purger.record("r1", apply=True)
    assert report.refused == "it is waiting; cancel it first (saga cancel r1)"
    assert await sm.client.exists(keys.saga("r1"))
    await operator.cancel(sm, "r1")
    report = await purger.record("r1", apply=True)
    assert not report.refused and not await sm.client.exists(keys.saga("r1"))
    assert await sm.client.zcard(keys.waits(0)) == 0
