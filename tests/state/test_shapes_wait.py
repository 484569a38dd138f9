"""park_wait, signal_saga and time_out_wait against a real server: the parser step of
router -> parser -> grouper stands in for a wait step (no user code runs there)."""

from __future__ import annotations

import pytest

from saga.state import operator, signals
from saga.state.codes import RC
from saga.state.errors import SagaNotFoundError, StepConflictError
from saga.state.keys import GROUP, Keys
from saga.state.machine import StateMachine
from saga.state.model import Claim, EventType, SagaState
from saga.state.reads import get_saga_and_history
from saga.state.requests import CommitRequest
from saga.state.signals import WaitPlan
from tests.state.helpers import claim_next, events, saga_hash, server_ms, snapshot, stream_rows

pytestmark = pytest.mark.anyio


async def _at_wait(sm: StateMachine, record: str = "r1") -> Claim:
    """Start ``record``, commit its router, and claim its parser (the wait step)."""
    await sm.start(record, "u1", "router", input_json=b'{"n":1}')
    c = await claim_next(sm, "router", "w-a")
    out = await sm.commit(c, CommitRequest(output=b'{"pages":3}', next_step="parser"))
    assert out.code == RC.OK
    return await claim_next(sm, "parser", "w-a", prev_step="router")


def _plan(**kw: object) -> WaitPlan:
    fields: dict[str, object] = {"event": "approved", "next_step": "grouper"} | kw
    return WaitPlan(**fields)  # type: ignore[arg-type]


async def test_park_then_signal_moves_on_with_the_signals_data(
    sm: StateMachine, keys: Keys
) -> None:
    """A wait parks the saga (no lease, entry acknowledged); the signal's data becomes
    the wait's output and the next step is enqueued, once."""
    c = await _at_wait(sm)
    out = await signals.park(sm, c, _plan(due_ms=await server_ms(sm.client) + 600_000), worker="w")
    assert (out.code, out.state) == (RC.OK, SagaState.WAITING)
    h = await saga_hash(sm.client, keys, "r1")
    assert (h["state"], h["token"], h["entry"], h["wev"]) == ("waiting", "", "", "approved")
    assert await sm.client.zscore(keys.waits(0), "r1") == int(out.detail)
    assert (await sm.client.xpending(keys.ready(0, "parser"), GROUP))["pending"] == 0
    res = await signals.signal(sm, "r1", "approved", data=b'{"by":"ann"}', signal_id="s1")
    assert (res.outcome, res.state, res.next_step) == ("consumed", "pending", "grouper")
    h = await saga_hash(sm.client, keys, "r1")
    assert (h["step"], h["out:parser"], h["done:parser"]) == ("grouper", '{"by":"ann"}', c.token)
    assert "wev" not in h and await sm.client.zscore(keys.waits(0), "r1") is None
    assert len(await stream_rows(sm.client, keys.ready(0, "grouper"))) == 1
    g = await claim_next(sm, "grouper", "w-a", prev_step="parser")
    assert g.input == b'{"by":"ann"}'
    assert (await events(sm.client, keys, "r1"))[-2:] == ["waiting", "signalled"]


async def test_a_signal_before_the_wait_is_kept_and_consumed_there(
    sm: StateMachine, keys: Keys
) -> None:
    """A signal that arrives while the saga is still at an earlier step is kept; the
    wait consumes it at once when it gets there (no parking)."""
    await sm.start("r1", "u1", "router")
    res = await signals.signal(sm, "r1", "approved", data=b'{"ok":true}', signal_id="s1")
    assert (res.outcome, res.state) == ("kept", "pending")
    c = await claim_next(sm, "router", "w-a")
    await sm.commit(c, CommitRequest(output=b"{}", next_step="parser"))
    w = await claim_next(sm, "parser", "w-a", prev_step="router")
    out = await signals.park(sm, w, _plan(), worker="w")
    assert (out.code, out.state, out.detail) == (RC.OK, "pending", "grouper")
    h = await saga_hash(sm.client, keys, "r1")
    assert (h["out:parser"], h["step"]) == ('{"ok":true}', "grouper")
    assert "sig:approved" not in h
    assert "signal_kept" in await events(sm.client, keys, "r1")


async def test_a_duplicate_signal_id_is_a_no_op(sm: StateMachine, keys: Keys) -> None:
    """The same signal id twice changes nothing the second time, before or after a wait."""
    await sm.start("r1", "u1", "router")
    await signals.signal(sm, "r1", "approved", data=b"{}", signal_id="s1")
    before = await snapshot(sm.client, keys.prefix)
    again = await signals.signal(sm, "r1", "approved", data=b'{"x":1}', signal_id="s1")
    assert again.outcome == "seen"
    assert await snapshot(sm.client, keys.prefix) == before
    other = await signals.signal(sm, "r1", "approved", data=b'{"x":2}', signal_id="s2")
    assert other.outcome == "dropped"
    assert (await saga_hash(sm.client, keys, "r1"))["sig:approved"] == "{}"


async def test_a_repeated_park_is_a_duplicate_and_a_zombie_is_fenced(
    sm: StateMachine, keys: Keys
) -> None:
    """A park re-sent after a dropped reply is answered DUPLICATE and writes nothing; a
    stale token is refused with LEASE_LOST."""
    c = await _at_wait(sm)
    await signals.park(sm, c, _plan(), worker="w")
    before = await snapshot(sm.client, keys.prefix)
    again = await signals.park(sm, c, _plan(), worker="w")
    assert again.code == RC.DUPLICATE
    assert await snapshot(sm.client, keys.prefix) == before
    stale = Claim(**{f: getattr(c, f) for f in c.__struct_fields__} | {"token": "1:9"})
    assert (await signals.park(sm, stale, _plan(), worker="w")).code == RC.LEASE_LOST


@pytest.mark.parametrize(
    ("path", "state", "step"),
    [
        ("default", "pending", "grouper"),
        ("continue", "pending", "grouper"),
        ("fail", "failed", "parser"),
        ("compensate", "compensating", "undo:router"),
    ],
)
async def test_a_due_timer_takes_the_declared_path(
    sm: StateMachine, keys: Keys, path: str, state: str, step: str
) -> None:
    """The sweep times out a due wait by its declared path: the default as the output, the
    input passed through (a sleep), a dead letter at the wait, or compensation."""
    c = await _at_wait(sm)
    plan = _plan(due_ms=1, on_timeout=path, default=b'{"by":"nobody"}', undo=("router",))
    await signals.park(sm, c, plan, worker="w")
    assert await signals.time_out_due(sm, 0, await server_ms(sm.client)) == {path: 1}
    h = await saga_hash(sm.client, keys, "r1")
    assert (h["state"], h["step"]) == (state, step)
    assert await sm.client.zscore(keys.waits(0), "r1") is None
    if path == "default":
        assert h["out:parser"] == '{"by":"nobody"}'
    if path == "continue":
        assert h["out:parser"] == '{"pages":3}'
    if path == "fail":
        assert len(await stream_rows(sm.client, keys.dead(0, "parser"))) == 1
        assert h["ec"] == "WaitTimeoutError" and h["ret"]
    if path == "compensate":
        assert len(await stream_rows(sm.client, keys.ready(0, "undo:router"))) == 1
    assert await signals.time_out_due(sm, 0, await server_ms(sm.client)) == {}


async def test_a_timer_not_due_is_left_and_a_cancelled_wait_is_removed_at_once(
    sm: StateMachine, keys: Keys
) -> None:
    """The script re-checks the server's clock (a sweeper's clock ahead changes
    nothing); cancel removes the saga's timer at once (the sweep finds nothing), and a
    signal to it is refused in one sentence."""
    c = await _at_wait(sm)
    await signals.park(sm, c, _plan(due_ms=await server_ms(sm.client) + 600_000), worker="w")
    assert await signals.time_out_due(sm, 0, 10**15) == {"not_due": 1}
    assert (await saga_hash(sm.client, keys, "r1"))["state"] == "waiting"
    assert await operator.cancel(sm, "r1") == "waiting"
    assert await sm.client.zcard(keys.waits(0)) == 0
    assert await signals.time_out_due(sm, 0, 10**15) == {}
    with pytest.raises(StepConflictError, match="has ended"):
        await signals.signal(sm, "r1", "approved")


async def test_a_signal_to_no_saga_is_refused(sm: StateMachine) -> None:
    """A signal for a record without a saga raises SagaNotFoundError."""
    with pytest.raises(SagaNotFoundError):
        await signals.signal(sm, "nobody", "approved")


async def test_the_waits_events_read_back_typed(sm: StateMachine, keys: Keys) -> None:
    """signal_kept, waiting (its timer as due_ms), signalled (the next step) and
    wait_timed_out (the path taken) read back as typed events; the saga shows its wait."""
    await sm.start("r1", "u1", "router")
    await signals.signal(sm, "r1", "other", signal_id="s9")
    c = await claim_next(sm, "router", "w-a")
    await sm.commit(c, CommitRequest(output=b"{}", next_step="parser"))
    w = await claim_next(sm, "parser", "w-a", prev_step="router")
    await signals.park(sm, w, _plan(due_ms=1, on_timeout="default", default=b"{}"), worker="w")
    saga, _ = await get_saga_and_history(sm.client, keys, "r1")
    assert (saga.state, saga.wait_event, saga.due_ms) == (SagaState.WAITING, "approved", 1)
    await signals.time_out_due(sm, 0, await server_ms(sm.client))
    _, evs = await get_saga_and_history(sm.client, keys, "r1")
    kept, (waiting, fired) = evs[1], evs[-2:]
    assert (kept.event, kept.step, kept.detail) == (EventType.SIGNAL_KEPT, "router", "other s9")
    assert (waiting.event, waiting.step, waiting.due_ms) == (EventType.WAITING, "parser", 1)
    assert (fired.event, fired.detail, fired.next_step) == (
        EventType.WAIT_TIMED_OUT, "default", "grouper",
    )  # fmt: skip
    await sm.start("r2", "u1", "router")
    c = await claim_next(sm, "router", "w-a")
    await sm.commit(c, CommitRequest(output=b"{}", next_step="parser"))
    w = await claim_next(sm, "parser", "w-a", prev_step="router")
    await signals.park(sm, w, _plan(), worker="w")
    await signals.signal(sm, "r2", "approved", signal_id="s1")
    _, evs = await get_saga_and_history(sm.client, keys, "r2")
    assert (evs[-1].event, evs[-1].next_step, evs[-1].detail) == (
        EventType.SIGNALLED, "grouper", "approved s1",
    )  # fmt: skip
