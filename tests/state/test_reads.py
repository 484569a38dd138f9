"""Reads: the saga hash and its history decode into typed Structs, every event type included."""

from __future__ import annotations

from typing import Any

import pytest

from saga.state import operator
from saga.state.errors import SagaNotFoundError
from saga.state.keys import Keys
from saga.state.machine import StateMachine
from saga.state.model import EventType, FailAction, SagaState
from saga.state.reads import get_saga, get_saga_and_history
from saga.state.recovery import recover_idle
from saga.state.requests import CommitRequest, FailRequest
from tests.state.helpers import claim_next

pytestmark = pytest.mark.anyio


def _fail(action: FailAction) -> FailRequest:
    return FailRequest(action=action, error_class="E", error_message="boom", worker="w-a")


async def test_every_event_type_reads_back_typed(sm: StateMachine, keys: Keys) -> None:
    """A saga that went through every transition reads back with every EventType in order."""
    await sm.start("r1", "u1", "router", document="doc://1")
    c = await claim_next(sm, "router", "w-a")
    await sm.fail(c, _fail(FailAction.PARK))
    await sm.promote("router", 0, ["r1"])
    c = await claim_next(sm, "router", "w-a")
    await sm.client.hset(keys.saga("r1"), "lease", 0)  # time passes: the lease lapses
    got = await recover_idle(sm, "router", 0, worker="w-b", min_idle_ms=0)
    [out] = await sm.claim(
        "router",
        0,
        [(e, f[b"rid"].decode()) for e, f in got.entries],
        worker="w-b",
        lease_ms=60_000,
        max_lease_expiries=3,
    )
    assert out.claim is not None
    await sm.commit(c, CommitRequest(output=b"{}", next_step="parser"))  # zombie: fenced
    await sm.commit(
        out.claim,
        CommitRequest(output=b'{"p":1}', next_step="parser", cost=0.5, review="2 values rejected"),
    )
    await operator.accept_review(sm, "r1", ["router", "parser"], actor="ops")
    c = await claim_next(sm, "parser", "w-a")
    await sm.fail(c, _fail(FailAction.RETRY))
    await sm.promote("parser", 0, ["r1"])
    c = await claim_next(sm, "parser", "w-a")
    await sm.fail(c, _fail(FailAction.DEAD))
    await operator.retry(sm, "r1", "parser", "router")
    await operator.cancel(sm, "r1")

    saga, events = await get_saga_and_history(sm.client, keys, "r1")
    assert (saga.state, saga.step, saga.epoch, saga.document) == (
        SagaState.CANCELLED,
        "parser",
        2,
        "doc://1",
    )
    assert saga.outputs == {"router": '{"p":1}'}
    assert saga.attempts == {"router": 0, "parser": 0}  # attempts count the current epoch (2)
    assert saga.total_cost == 0.5
    assert [e.event for e in events] == [
        EventType.STARTED,
        EventType.PARKED,
        EventType.PROMOTED,
        EventType.RECLAIMED,
        EventType.FENCED,
        EventType.COMMITTED,
        EventType.REVIEWED,
        EventType.RETRY_SCHEDULED,
        EventType.PROMOTED,
        EventType.DEAD_LETTERED,
        EventType.RETRIED,
        EventType.CANCELLED,
    ]
    # 'compensating' reads back in test_compensation (it needs a compensable step), the
    # review decisions in test_review_decide (they need a completed, flagged saga), the
    # waits' in test_shapes_wait (they need a wait step; signal_expired in
    # test_signal_bounds), timer_fired in test_next_at, a
    # map's in tests/app/test_map.py (spawned, fanned_in: they need a map step).
    assert set(EventType) - {e.event for e in events} == {
        EventType.SPAWNED,
        EventType.FANNED_IN,
        EventType.COMPENSATING,
        EventType.REVIEW_DECIDED,
        EventType.REVIEW_COMPLETED,
        EventType.WAITING,
        EventType.SIGNAL_KEPT,
        EventType.SIGNAL_EXPIRED,
        EventType.SIGNALLED,
        EventType.GATE_PASSED,
        EventType.WAIT_TIMED_OUT,
        EventType.TIMER_FIRED,
    }
    reclaim = events[3]
    assert (reclaim.attempt, reclaim.previous_attempt, reclaim.previous_worker) == (2, 1, "w-a")
    assert 0 < reclaim.previous_claimed_ms <= reclaim.at_ms
    assert (events[5].review, events[6].detail) == ("2 values rejected", "ops")
    assert saga.review == {}
    committed = events[5]
    assert (committed.step, committed.attempt, committed.next_step, committed.cost) == (
        "router",
        2,
        "parser",
        0.5,
    )
    assert events[-3].error_class == "E" and events[-3].error_message == "boom"
    assert [e.at_ms for e in events] == sorted(e.at_ms for e in events)
    assert await get_saga(sm.client, keys, "r1") == saga


async def test_reading_an_unknown_record_raises_not_found(redis: Any, keys: Keys) -> None:
    """Reading a record without a saga raises SagaNotFoundError."""
    with pytest.raises(SagaNotFoundError):
        await get_saga(redis, keys, "ghost")
    with pytest.raises(SagaNotFoundError):
        await get_saga_and_history(redis, keys, "ghost")
