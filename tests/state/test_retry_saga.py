"""retry_saga: an operator re-runs a saga from a step in a new epoch; every return code."""

from __future__ import annotations

from typing import Any

import pytest

from saga.state import operator
from saga.state.codes import RC
from saga.state.errors import SagaNotFoundError, StepConflictError
from saga.state.keys import GROUP, Keys
from saga.state.machine import StateMachine
from saga.state.model import FailAction, SagaState
from saga.state.requests import CommitRequest, FailRequest
from saga.state.scripts import evalsha
from tests.state.helpers import (
    claim_next,
    events,
    history,
    pending_ids,
    read_ready,
    saga_hash,
    snapshot,
    stream_rows,
)

pytestmark = pytest.mark.anyio


async def _failed_at_parser(sm: StateMachine) -> None:
    await sm.start("r1", "u1", "router")
    c = await claim_next(sm, "router", "w-a")
    await sm.commit(c, CommitRequest(output=b'{"r":1}', next_step="parser"))
    c = await claim_next(sm, "parser", "w-a")
    req = FailRequest(action=FailAction.DEAD, error_class="Bad", error_message="bad input")
    assert (await sm.fail(c, req)).state == "failed"


def _script_call(
    keys: Keys, record: str, from_step: str, prev: str, current: str, *, op: str = "op-x"
) -> tuple[list[str], list[Any]]:
    ks = [
        keys.saga(record),
        keys.history(record),
        keys.ready(0, from_step),
        keys.ready(0, current),
        keys.delayed(0, current),
        keys.dead(0, current),
        keys.inflight(0, current),
        keys.deferred(0, current),
        *keys.state_indexes(0),
    ]
    return ks, [from_step, prev, current, "0", GROUP, op, 1000, "test"]


async def test_retry_ok_bumps_epoch_keeps_history_and_clears_dead_letter(
    sm: StateMachine, keys: Keys
) -> None:
    """A retry bumps the epoch, keeps history, drops the dead letter; attempts restart at 1."""
    await _failed_at_parser(sm)
    old_history = await history(sm.client, keys, "r1")
    assert len(await stream_rows(sm.client, keys.dead(0, "parser"))) == 1
    res = await operator.retry(sm, "r1", "parser", "router", actor="ops")
    assert (res.epoch, res.duplicate) == (2, False)
    assert await stream_rows(sm.client, keys.dead(0, "parser")) == []
    h = await saga_hash(sm.client, keys, "r1")
    assert (h["state"], h["step"], h["epoch"], h["entry"], h["dead_id"], h["token"]) == (
        "pending",
        "parser",
        "2",
        res.entry_id,
        "",
        "",
    )
    new_history = await history(sm.client, keys, "r1")
    assert new_history[: len(old_history)] == old_history
    [retried] = new_history[len(old_history) :]
    assert (retried["e"], retried["s"], retried["ep"]) == ("retried", "parser", "2")
    assert retried["x"] == "from failed at parser by ops"
    assert await sm.client.zscore(keys.state_index(0, SagaState.PENDING), "r1") is not None
    assert await sm.client.zscore(keys.state_index(0, SagaState.FAILED), "r1") is None
    c = await claim_next(sm, "parser", "w-b")
    assert (c.entry_id, c.epoch, c.attempt, c.input) == (res.entry_id, 2, 1, b'{"r":1}')
    assert c.token.startswith("2:")


async def test_retry_of_completed_saga_removes_retention(sm: StateMachine, keys: Keys) -> None:
    """Retrying a completed saga ends its retention: the sweep no longer deletes it
    (and a TTL an earlier release set at completion is removed)."""
    await sm.start("r1", "u1", "grouper")
    c = await claim_next(sm, "grouper", "w-a")
    await sm.commit(c, CommitRequest(output=b"{}"))
    assert await sm.client.hget(keys.saga("r1"), "ret")
    await sm.client.expire(keys.saga("r1"), 3600)  # as an earlier release completed it
    await sm.client.expire(keys.history("r1"), 3600)
    await operator.retry(sm, "r1", "grouper", "_input")
    assert await sm.client.hget(keys.saga("r1"), "ret") == b""
    assert await sm.client.ttl(keys.saga("r1")) == -1
    assert await sm.client.ttl(keys.history("r1")) == -1


async def test_retry_while_running_is_busy_unless_forced(sm: StateMachine, keys: Keys) -> None:
    """A retry under a live lease is refused (BUSY) and writes nothing."""
    await sm.start("r1", "u1", "router")
    await claim_next(sm, "router", "w-a", lease_ms=60_000)
    before = await snapshot(sm.client, keys.prefix)
    with pytest.raises(StepConflictError, match="worker w-a"):
        await operator.retry(sm, "r1", "router", "_input")
    assert await snapshot(sm.client, keys.prefix) == before


async def test_forced_retry_fences_out_the_running_attempt(sm: StateMachine, keys: Keys) -> None:
    """A forced retry acks the running entry and the old attempt's commit gets LEASE_LOST."""
    await sm.start("r1", "u1", "router")
    running = await claim_next(sm, "router", "w-a", lease_ms=60_000)
    res = await operator.retry(sm, "r1", "router", "_input", force=True)
    assert res.epoch == 2
    assert await pending_ids(sm.client, keys.ready(0, "router")) == set()
    assert (await history(sm.client, keys, "r1"))[-1]["x"].endswith("(forced)")
    out = await sm.commit(running, CommitRequest(output=b"{}", next_step="parser"))
    assert out.code == RC.LEASE_LOST
    assert "out:router" not in await saga_hash(sm.client, keys, "r1")
    assert await read_ready(sm.client, keys, "router", "w-b") == [(res.entry_id, "r1")]


async def test_retry_without_input_for_the_step_is_wrong_state(
    sm: StateMachine, keys: Keys
) -> None:
    """Retrying from the parser before the router ever committed is refused, writing nothing."""
    await sm.start("r1", "u1", "router")
    before = await snapshot(sm.client, keys.prefix)
    with pytest.raises(StepConflictError, match="no output of step 'router'"):
        await operator.retry(sm, "r1", "parser", "router")
    assert await snapshot(sm.client, keys.prefix) == before
    ks, args = _script_call(keys, "r1", "parser", "router", "router")
    reply = await evalsha(sm.client, "retry_saga", ks, args)
    assert (reply[0], reply[1], reply[2]) == (RC.WRONG_STATE, b"missing_input", b"router")


async def test_retry_script_refuses_when_current_step_moved(sm: StateMachine, keys: Keys) -> None:
    """The script refuses (step_moved) when the caller's view of the current step is stale."""
    await sm.start("r1", "u1", "router")
    before = await snapshot(sm.client, keys.prefix)
    ks, args = _script_call(keys, "r1", "router", "_input", "parser")
    reply = await evalsha(sm.client, "retry_saga", ks, args)
    assert (reply[0], reply[1], reply[2]) == (RC.WRONG_STATE, b"step_moved", b"router")
    assert await snapshot(sm.client, keys.prefix) == before


async def test_retry_same_op_twice_is_duplicate(sm: StateMachine, keys: Keys) -> None:
    """A retry re-sent with its op id returns the first result and writes nothing."""
    await _failed_at_parser(sm)
    first = await operator.retry(sm, "r1", "parser", "router", op="op-1")
    before = await snapshot(sm.client, keys.prefix)
    again = await operator.retry(sm, "r1", "parser", "router", op="op-1")
    assert (again.epoch, again.entry_id, again.duplicate) == (first.epoch, first.entry_id, True)
    assert await snapshot(sm.client, keys.prefix) == before
    assert (await events(sm.client, keys, "r1")).count("retried") == 1


async def test_retry_without_saga_is_not_found(sm: StateMachine, keys: Keys) -> None:
    """A retry of an unknown record raises SagaNotFoundError; the script says NOT_FOUND."""
    with pytest.raises(SagaNotFoundError):
        await operator.retry(sm, "ghost", "router", "_input")
    ks, args = _script_call(keys, "ghost", "router", "_input", "router")
    reply = await evalsha(sm.client, "retry_saga", ks, args)
    assert list(reply) == [RC.NOT_FOUND]
    assert not await sm.client.exists(keys.saga("ghost"), keys.history("ghost"))
