"""promote_retries: move due retries back to the ready stream, re-checked against Redis TIME."""

from __future__ import annotations

import pytest
from redis.exceptions import ResponseError

from saga.state import operator
from saga.state.codes import RC
from saga.state.keys import Keys
from saga.state.machine import StateMachine
from saga.state.model import FailAction, SagaState
from saga.state.requests import FailRequest
from tests.state.helpers import (
    claim_next,
    events,
    history,
    saga_hash,
    snapshot,
    stream_rows,
)

pytestmark = pytest.mark.anyio


async def _waiting(sm: StateMachine, record: str, delay_ms: int) -> int:
    """Start ``record`` and fail its router attempt with a retry after ``delay_ms``."""
    await sm.start(record, "u1", "router")
    c = await claim_next(sm, "router", "w-a")
    out = await sm.fail(
        c,
        FailRequest(action=FailAction.RETRY, error_class="E", error_message="m", delay_ms=delay_ms),
    )
    assert out.code == RC.OK
    return int(out.detail)


async def test_promote_leaves_retries_not_yet_due(sm: StateMachine, keys: Keys) -> None:
    """A retry whose due time is in the future stays in the delayed set; nothing is enqueued."""
    due = await _waiting(sm, "r1", 600_000)
    assert await sm.due_candidates("router", 0, 10) == [("r1", due)]
    before = await snapshot(sm.client, keys.prefix)
    assert await sm.promote("router", 0, ["r1"]) == (0, 1)
    assert await snapshot(sm.client, keys.prefix) == before


async def test_promote_enqueues_due_retries(sm: StateMachine, keys: Keys) -> None:
    """A due retry goes back to pending with a fresh ready entry and a 'promoted' event."""
    await _waiting(sm, "r1", 0)
    ready_before = await stream_rows(sm.client, keys.ready(0, "router"))
    assert await sm.promote("router", 0, ["r1"]) == (1, 0)
    assert await sm.client.zcard(keys.delayed(0, "router")) == 0
    rows = await stream_rows(sm.client, keys.ready(0, "router"))
    [(entry, fields)] = rows[len(ready_before) :]
    assert fields == {"rid": "r1", "ep": "1", "v": "1"}
    h = await saga_hash(sm.client, keys, "r1")
    assert (h["state"], h["entry"], h["due"], h["att:router"]) == ("pending", entry, "0", "1:1")
    ev = (await history(sm.client, keys, "r1"))[-1]
    assert (ev["e"], ev["s"], ev["ep"]) == ("promoted", "router", "1")
    assert await sm.client.zscore(keys.state_index(0, SagaState.PENDING), "r1") is not None
    assert await sm.client.zscore(keys.state_index(0, SagaState.WAITING_RETRY), "r1") is None
    c = await claim_next(sm, "router", "w-b")
    assert (c.entry_id, c.attempt) == (entry, 2)


async def test_promote_forced_due_by_score(sm: StateMachine, keys: Keys) -> None:
    """The script trusts the zset score: a member scored 0 is due whatever the saga's own due."""
    await _waiting(sm, "r1", 600_000)
    await sm.client.zadd(keys.delayed(0, "router"), {"r1": 0})
    assert await sm.promote("router", 0, ["r1"]) == (1, 0)


async def test_promote_skips_saga_cancelled_meanwhile(sm: StateMachine, keys: Keys) -> None:
    """A candidate cancelled between the read and the script is skipped; nothing is enqueued."""
    await _waiting(sm, "r1", 0)
    candidates = [rid for rid, _ in await sm.due_candidates("router", 0, 10)]
    assert candidates == ["r1"]
    await operator.cancel(sm, "r1")
    ready_len = await sm.client.xlen(keys.ready(0, "router"))
    assert await sm.promote("router", 0, candidates) == (0, 0)
    assert await sm.client.xlen(keys.ready(0, "router")) == ready_len
    assert (await saga_hash(sm.client, keys, "r1"))["state"] == "cancelled"
    assert (await events(sm.client, keys, "r1"))[-1] == "cancelled"


async def test_promote_removes_stale_member_without_enqueueing(
    sm: StateMachine, keys: Keys
) -> None:
    """A due member whose saga is no longer waiting at the step is removed and not enqueued."""
    await _waiting(sm, "r1", 0)
    await operator.cancel(sm, "r1")
    await sm.client.zadd(keys.delayed(0, "router"), {"r1": 0})  # a leftover member
    ready_len = await sm.client.xlen(keys.ready(0, "router"))
    hist_len = await sm.client.xlen(keys.history("r1"))
    assert await sm.promote("router", 0, ["r1"]) == (0, 0)
    assert await sm.client.zcard(keys.delayed(0, "router")) == 0
    assert await sm.client.xlen(keys.ready(0, "router")) == ready_len
    assert await sm.client.xlen(keys.history("r1")) == hist_len
    assert (await saga_hash(sm.client, keys, "r1"))["state"] == "cancelled"


async def test_promote_refuses_more_than_100_candidates(sm: StateMachine) -> None:
    """A candidate list above the script's bound is refused before any write."""
    with pytest.raises(ResponseError, match="at most 100"):
        await sm.promote("router", 0, [f"r{i}" for i in range(101)])
