"""cancel_saga: stop a saga wherever it is; every return code of its header."""

from __future__ import annotations

import pytest

from saga.state import operator
from saga.state.codes import RC
from saga.state.errors import SagaNotFoundError, StepConflictError
from saga.state.keys import GROUP, INDEXED, Keys
from saga.state.machine import StateMachine
from saga.state.model import FailAction, SagaState
from saga.state.requests import CommitRequest, FailRequest
from saga.state.scripts import evalsha
from tests.state.helpers import (
    claim_next,
    history,
    pending_ids,
    read_ready,
    saga_hash,
    snapshot,
    stream_rows,
)

pytestmark = pytest.mark.anyio


def _script_keys(keys: Keys, record: str, step: str) -> list[str]:
    return [
        keys.saga(record),
        keys.history(record),
        keys.ready(0, step),
        keys.delayed(0, step),
        keys.dead(0, step),
        keys.inflight(0, step),
        keys.deferred(0, step),
        *keys.state_indexes(0),
    ]


async def _assert_cancelled_only(sm: StateMachine, keys: Keys, record: str) -> None:
    assert (await saga_hash(sm.client, keys, record))["state"] == "cancelled"
    for state in INDEXED:
        score = await sm.client.zscore(keys.state_index(0, state), record)
        assert (score is not None) == (state == SagaState.CANCELLED), state


async def test_cancel_pending_saga_acks_its_delivered_entry(sm: StateMachine, keys: Keys) -> None:
    """Cancelling a pending saga acks its entry, records who asked and moves its index."""
    await sm.start("r1", "u1", "router")
    await read_ready(sm.client, keys, "router", "w-a")  # delivered, not yet claimed
    assert await operator.cancel(sm, "r1", actor="ops: duplicate upload") == "pending"
    await _assert_cancelled_only(sm, keys, "r1")
    assert await pending_ids(sm.client, keys.ready(0, "router")) == set()
    ev = (await history(sm.client, keys, "r1"))[-1]
    assert (ev["e"], ev["s"], ev["x"]) == ("cancelled", "router", "ops: duplicate upload")


async def test_cancel_running_saga_fences_out_the_attempt(sm: StateMachine, keys: Keys) -> None:
    """Cancelling a running saga clears its token: the attempt's commit gets LEASE_LOST."""
    await sm.start("r1", "u1", "router")
    c = await claim_next(sm, "router", "w-a")
    assert await operator.cancel(sm, "r1") == "running"
    h = await saga_hash(sm.client, keys, "r1")
    assert (h["token"], h["lease"], h["entry"]) == ("", "0", "")
    assert await pending_ids(sm.client, keys.ready(0, "router")) == set()
    out = await sm.commit(c, CommitRequest(output=b"{}", next_step="parser"))
    assert (out.code, out.state) == (RC.LEASE_LOST, "cancelled")
    await _assert_cancelled_only(sm, keys, "r1")


async def test_cancel_waiting_retry_removes_delayed_member(sm: StateMachine, keys: Keys) -> None:
    """Cancelling a saga waiting for a retry removes it from the delayed set."""
    await sm.start("r1", "u1", "router")
    c = await claim_next(sm, "router", "w-a")
    await sm.fail(c, FailRequest(action=FailAction.RETRY, error_class="E", error_message="m"))
    assert await operator.cancel(sm, "r1") == "waiting_retry"
    assert await sm.client.zcard(keys.delayed(0, "router")) == 0
    await _assert_cancelled_only(sm, keys, "r1")


async def test_cancel_failed_saga_removes_dead_letter(sm: StateMachine, keys: Keys) -> None:
    """Cancelling a dead-lettered saga removes its dead letter."""
    await sm.start("r1", "u1", "router")
    c = await claim_next(sm, "router", "w-a")
    await sm.fail(c, FailRequest(action=FailAction.DEAD, error_class="E", error_message="m"))
    assert await operator.cancel(sm, "r1") == "failed"
    assert await stream_rows(sm.client, keys.dead(0, "router")) == []
    await _assert_cancelled_only(sm, keys, "r1")


async def test_cancel_twice_is_duplicate_and_writes_nothing(sm: StateMachine, keys: Keys) -> None:
    """Cancelling a cancelled saga returns 'cancelled' and writes nothing."""
    await sm.start("r1", "u1", "router")
    await operator.cancel(sm, "r1")
    before = await snapshot(sm.client, keys.prefix)
    assert await operator.cancel(sm, "r1", actor="again") == "cancelled"
    assert await snapshot(sm.client, keys.prefix) == before
    reply = await evalsha(
        sm.client,
        "cancel_saga",
        _script_keys(keys, "r1", "router"),
        ["router", GROUP, "o", 1000, ""],
    )
    assert (reply[0], reply[1]) == (RC.DUPLICATE, b"cancelled")


async def test_cancel_completed_saga_is_wrong_state(sm: StateMachine, keys: Keys) -> None:
    """A completed saga cannot be cancelled; nothing is written."""
    await sm.start("r1", "u1", "grouper")
    c = await claim_next(sm, "grouper", "w-a")
    await sm.commit(c, CommitRequest(output=b"{}"))
    before = await snapshot(sm.client, keys.prefix)
    with pytest.raises(StepConflictError, match="completed"):
        await operator.cancel(sm, "r1")
    assert await snapshot(sm.client, keys.prefix) == before


async def test_cancel_script_refuses_when_current_step_moved(sm: StateMachine, keys: Keys) -> None:
    """The script refuses (step_moved) when the caller's view of the current step is stale."""
    await sm.start("r1", "u1", "router")
    before = await snapshot(sm.client, keys.prefix)
    reply = await evalsha(
        sm.client,
        "cancel_saga",
        _script_keys(keys, "r1", "parser"),
        ["parser", GROUP, "o", 1000, ""],
    )
    assert (reply[0], reply[1], reply[2]) == (RC.WRONG_STATE, b"step_moved", b"router")
    assert await snapshot(sm.client, keys.prefix) == before


async def test_cancel_without_saga_is_not_found(sm: StateMachine, keys: Keys) -> None:
    """Cancelling an unknown record raises SagaNotFoundError; the script says NOT_FOUND."""
    with pytest.raises(SagaNotFoundError):
        await operator.cancel(sm, "ghost")
    reply = await evalsha(
        sm.client,
        "cancel_saga",
        _script_keys(keys, "ghost", "router"),
        ["router", GROUP, "o", 1000, ""],
    )
    assert list(reply) == [RC.NOT_FOUND]
    assert not await sm.client.exists(keys.saga("ghost"), keys.history("ghost"))
