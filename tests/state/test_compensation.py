"""compensate_saga, claim_undo, commit_undo, fail_undo and fail_step's dead path into
compensation: the happy paths and every return code of their headers."""

from __future__ import annotations

from typing import Any

import pytest

from saga.state import operator
from saga.state.codes import RC
from saga.state.errors import StepConflictError
from saga.state.keys import Keys
from saga.state.machine import StateMachine
from saga.state.model import Claim, FailAction, SagaState
from saga.state.requests import CommitRequest, FailRequest
from saga.state.streams import ensure_groups
from tests.state.helpers import (
    NEXT,
    claim_next,
    history,
    read_ready,
    saga_hash,
    snapshot,
    stream_rows,
)

pytestmark = pytest.mark.anyio
UNDOABLE = ("grouper", "router")  # latest first; the parser has nothing to undo


@pytest.fixture
async def usm(sm: StateMachine, keys: Keys) -> StateMachine:
    await ensure_groups(sm.client, keys, [f"undo:{s}" for s in UNDOABLE])
    return sm


async def _commit(sm: StateMachine, step: str, out: bytes = b'{"x":1}') -> None:
    c = await claim_next(sm, step, "w-a")
    got = await sm.commit(c, CommitRequest(output=out, next_step=NEXT[step], worker="w-a"))
    assert got.code == RC.OK


async def _dead(sm: StateMachine, step: str, undo: tuple[str, ...] = UNDOABLE) -> Any:
    c = await claim_next(sm, step, "w-a")
    req = FailRequest(action=FailAction.DEAD, error_class="E", error_message="boom", undo=undo)
    return await sm.fail(c, req)


async def _claim_undo(sm: StateMachine, step: str, worker: str = "w-u", **kw: Any) -> Claim:
    prev = {"grouper": "parser", "router": "_input"}[step]
    return await claim_next(sm, f"undo:{step}", worker, prev_step=prev, **kw)


async def test_permanent_failure_compensates_committed_steps_latest_first(
    usm: StateMachine, keys: Keys
) -> None:
    """A saga dead at the grouper undoes the router only (the parser has no compensation,
    the grouper never committed), with the router's input, output and commit token."""
    sm = usm
    await sm.start("r1", "u1", "router", input_json=b'{"doc":"a"}')
    await _commit(sm, "router", b'{"pages":2}')
    await _commit(sm, "parser")
    out = await _dead(sm, "grouper")
    assert (out.code, out.state, out.detail) == (RC.OK, "compensating", "undo:router")
    h = await saga_hash(sm.client, keys, "r1")
    assert (h["state"], h["step"], h["undo"], h["epoch"]) == ("compensating", "undo:router",
                                                               "router", "2")  # fmt: skip
    assert await stream_rows(sm.client, keys.dead(0, "grouper")) == []
    c = await _claim_undo(sm, "router")
    assert (c.input, c.extra["output"], c.extra["undo"]) == (b'{"doc":"a"}', b'{"pages":2}',
                                                              b"router")  # fmt: skip
    assert c.extra["done"].startswith(b"1:")  # committed in epoch 1: its key's epoch
    got = await sm.commit(c, CommitRequest(output=b"{}", worker="w-u"))
    assert (got.code, got.state) == (RC.OK, "compensated")
    h = await saga_hash(sm.client, keys, "r1")
    assert h["state"] == "compensated" and "out:router" not in h
    assert await sm.client.zscore(keys.state_index(0, SagaState.COMPENSATED), "r1") is not None
    evs = [(e["e"], e["s"]) for e in await history(sm.client, keys, "r1")]
    assert evs[-3:] == [("dead_lettered", "grouper"), ("compensating", "undo:router"),
                        ("committed", "undo:router")]  # fmt: skip


async def test_compensate_refuses_completed(usm: StateMachine, keys: Keys) -> None:
    """A completed saga is not compensated (its steps did their job)."""
    sm = usm
    await sm.start("r1", "u1", "router")
    for step in ("router", "parser", "grouper"):
        await _commit(sm, step)
    with pytest.raises(StepConflictError, match="completed"):
        await operator.compensate(sm, "r1", UNDOABLE)


async def test_cancel_compensate_running_saga_undoes_in_reverse(
    usm: StateMachine, keys: Keys
) -> None:
    """cancel --compensate of a saga running its grouper after a committed grouper of an
    earlier epoch: grouper's undo first, then the router's; the running attempt is fenced."""
    sm = usm
    await sm.start("r1", "u1", "router")
    for step in ("router", "parser", "grouper"):
        await _commit(sm, step)
    await operator.retry(sm, "r1", "grouper", "parser", steps=("router", "parser", "grouper"))
    zombie = await claim_next(sm, "grouper", "w-z")
    res = await operator.compensate(sm, "r1", UNDOABLE, actor="test")
    assert (res.state, res.step, res.duplicate) == ("compensating", "undo:grouper", False)
    late = await sm.commit(zombie, CommitRequest(output=b"{}", worker="w-z"))
    assert late.code == RC.LEASE_LOST
    again = await operator.compensate(sm, "r1", UNDOABLE)
    assert again.duplicate
    c1 = await _claim_undo(sm, "grouper")
    assert c1.extra["undo"] == b"grouper,router"
    wrong = await sm.commit(c1, CommitRequest(output=b"{}", worker="w-u"))  # next omitted
    assert wrong.code == RC.WRONG_STATE
    ok = await sm.commit(c1, CommitRequest(output=b"{}", next_step="undo:router", worker="w-u"))
    assert (ok.code, ok.state) == (RC.OK, "compensating")
    dup = await sm.commit(c1, CommitRequest(output=b"{}", next_step="undo:router", worker="w-u"))
    assert dup.code == RC.DUPLICATE
    c2 = await _claim_undo(sm, "router")
    assert (await sm.commit(c2, CommitRequest(output=b"{}", worker="w-u"))).state == "compensated"
    steps = [e["s"] for e in await history(sm.client, keys, "r1") if e["e"] == "committed"]
    assert steps[-2:] == ["undo:grouper", "undo:router"]


async def test_nothing_to_undo_ends_compensated_at_once(usm: StateMachine, keys: Keys) -> None:
    """cancel --compensate of a saga with no committed compensable step: compensated."""
    sm = usm
    await sm.start("r1", "u1", "router")
    res = await operator.compensate(sm, "r1", UNDOABLE)
    assert (res.state, res.step) == ("compensated", "router")
    with pytest.raises(StepConflictError, match="compensated"):
        await operator.cancel(sm, "r1")


async def test_failed_undo_retries_then_dead_letters(usm: StateMachine, keys: Keys) -> None:
    """A failing undo is retried (the saga stays compensating, promoted back), then
    dead-lettered with its reason (compensation_failed); retry resumes it in a new epoch."""
    sm = usm
    await sm.start("r1", "u1", "router")
    await _commit(sm, "router")
    await _dead(sm, "parser")
    c = await _claim_undo(sm, "router")
    retry = FailRequest(action=FailAction.RETRY, error_class="E", error_message="down",
                        delay_ms=0)  # fmt: skip
    got = await sm.fail(c, retry)
    assert (got.code, got.state) == (RC.OK, "compensating")
    assert (await sm.fail(c, retry)).code == RC.DUPLICATE
    assert await sm.promote("undo:router", 0, ["r1"]) == (1, 0)
    c2 = await _claim_undo(sm, "router")
    assert c2.attempt == 2
    dead = FailRequest(action=FailAction.DEAD, error_class="Gone", error_message="for good")
    got = await sm.fail(c2, dead)
    assert (got.code, got.state) == (RC.OK, "compensation_failed")
    rows = await stream_rows(sm.client, keys.dead(0, "undo:router"))
    assert [(r["rid"], r["ec"], r["em"]) for _, r in rows] == [("r1", "Gone", "for good")]
    res = await operator.compensate(sm, "r1", UNDOABLE)  # saga retry of compensation_failed
    assert (res.state, res.step) == ("compensating", "undo:router")
    assert await stream_rows(sm.client, keys.dead(0, "undo:router")) == []
    c3 = await _claim_undo(sm, "router")
    assert (c3.attempt, c3.epoch) == (1, 3)


async def test_stale_and_held_undo_claims(usm: StateMachine, keys: Keys) -> None:
    """A live undo lease is held; an expired one is taken over (its commit fenced); the
    last allowed expiry ends compensation_failed; an entry of a cancelled saga is stale."""
    sm = usm
    await sm.start("r1", "u1", "router")
    await _commit(sm, "router")
    await _dead(sm, "parser")
    entries = await read_ready(sm.client, keys, "undo:router", "w-a")
    first = await sm.claim("undo:router", 0, entries, worker="w-a", lease_ms=30_000,
                           max_lease_expiries=2, prev_step="_input")  # fmt: skip
    assert first[0].code == RC.OK
    held = await sm.claim("undo:router", 0, entries, worker="w-b", lease_ms=30_000,
                          max_lease_expiries=2, prev_step="_input")  # fmt: skip
    assert held[0].code == RC.LEASE_HELD
    await sm.client.hset(keys.saga("r1"), "lease", 0)
    taken = await sm.claim("undo:router", 0, entries, worker="w-b", lease_ms=30_000,
                           max_lease_expiries=2, prev_step="_input")  # fmt: skip
    assert taken[0].code == RC.OK and taken[0].claim and taken[0].claim.expired == 1
    late = await sm.commit(first[0].claim, CommitRequest(output=b"{}"))  # type: ignore[arg-type]
    assert late.code == RC.LEASE_LOST
    await sm.client.hset(keys.saga("r1"), "lease", 0)
    dead = await sm.claim("undo:router", 0, entries, worker="w-b", lease_ms=30_000,
                          max_lease_expiries=2, prev_step="_input")  # fmt: skip
    assert dead[0].code == RC.DEAD_LETTERED
    assert (await saga_hash(sm.client, keys, "r1"))["state"] == "compensation_failed"
    await operator.cancel(sm, "r1")
    before = await snapshot(sm.client, keys.prefix)
    stale = await sm.claim("undo:router", 0, entries, worker="w-b", lease_ms=30_000,
                           max_lease_expiries=2, prev_step="_input")  # fmt: skip
    assert stale[0].code == RC.STALE_ENTRY
    assert before.keys() == (await snapshot(sm.client, keys.prefix)).keys()


async def test_retry_refused_while_compensating(usm: StateMachine, keys: Keys) -> None:
    """A manual retry waits for the compensation (cancel it first)."""
    sm = usm
    await sm.start("r1", "u1", "router")
    await _commit(sm, "router")
    await _dead(sm, "parser")
    with pytest.raises(StepConflictError):
        await operator.retry(sm, "r1", "parser", "router", steps=("router", "parser"))


async def test_heartbeat_extends_an_undo_lease(usm: StateMachine, keys: Keys) -> None:
    """extend_lease accepts an undo attempt's token in a compensating saga."""
    sm = usm
    await sm.start("r1", "u1", "router")
    await _commit(sm, "router")
    await _dead(sm, "parser")
    c = await _claim_undo(sm, "router")
    assert await sm.heartbeat(c, worker="w-u", lease_ms=60_000) > c.lease_until_ms


async def test_dead_without_undoable_output_is_a_plain_dead_letter(
    usm: StateMachine, keys: Keys
) -> None:
    """fail_step with undo steps but none committed: failed with a dead letter, as before."""
    sm = usm
    await sm.start("r1", "u1", "router")
    out = await _dead(sm, "router")
    assert (out.code, out.state) == (RC.OK, "failed")
    assert len(await stream_rows(sm.client, keys.dead(0, "router"))) == 1


async def test_compensation_reads_back_typed(usm: StateMachine, keys: Keys) -> None:
    """get_saga_and_history reads the new states, the undo attempts and 'compensating'."""
    from saga.state.model import EventType
    from saga.state.reads import get_saga_and_history

    sm = usm
    await sm.start("r1", "u1", "router")
    await _commit(sm, "router")
    await _dead(sm, "parser")
    c = await _claim_undo(sm, "router")
    await sm.commit(c, CommitRequest(output=b"{}", worker="w-u"))
    saga, events = await get_saga_and_history(sm.client, keys, "r1")
    assert (saga.state, saga.step, saga.error_message) == (SagaState.COMPENSATED, "undo:router",
                                                           "boom")  # fmt: skip
    assert saga.attempts["undo:router"] == 1 and "router" not in saga.outputs
    assert saga.undone_outputs == {"router": '{"x":1}'}  # still shown, marked undone
    begin = next(e for e in events if e.event == EventType.COMPENSATING)
    assert (begin.step, begin.next_step, begin.epoch) == ("undo:router", "undo:router", 2)
