"""fail_step: retry, park or dead-letter a failed attempt; every return code of its header."""

from __future__ import annotations

import msgspec
import pytest

from saga.state.codes import RC
from saga.state.keys import Keys
from saga.state.machine import StateMachine
from saga.state.model import FailAction, SagaState
from saga.state.recovery import recover_idle
from saga.state.requests import CommitRequest, FailRequest
from tests.state.helpers import (
    but_fop,
    claim_next,
    history,
    pending,
    saga_hash,
    server_ms,
    snapshot,
    stream_rows,
    wait_lease_expired,
)

pytestmark = pytest.mark.anyio


def _req(action: FailAction, delay_ms: int = 0) -> FailRequest:
    return FailRequest(
        action=action,
        error_class="Boom",
        error_message="it broke",
        delay_ms=delay_ms,
        worker="w-a",
    )


async def test_fail_retry_schedules_delayed_retry_and_counts_attempt(
    sm: StateMachine, keys: Keys
) -> None:
    """A retryable failure puts the record in the delayed set at its due time; attempt counted."""
    await sm.start("r1", "u1", "router")
    c = await claim_next(sm, "router", "w-a")
    t0 = await server_ms(sm.client)
    out = await sm.fail(c, _req(FailAction.RETRY, delay_ms=60_000))
    assert (out.code, out.state) == (RC.OK, "waiting_retry")
    due = int(out.detail)
    assert t0 + 60_000 <= due <= await server_ms(sm.client) + 60_000
    assert await sm.client.zscore(keys.delayed(0, "router"), "r1") == due
    h = await saga_hash(sm.client, keys, "r1")
    assert (h["state"], h["due"], h["token"], h["entry"]) == ("waiting_retry", str(due), "", "")
    assert (h["att:router"], h["ec"], h["em"]) == ("1:1", "Boom", "it broke")
    assert await pending(sm.client, keys.ready(0, "router")) == []
    ev = (await history(sm.client, keys, "r1"))[-1]
    assert (ev["e"], ev["a"], ev["due"], ev["ec"], ev["em"]) == (
        "retry_scheduled",
        "1",
        str(due),
        "Boom",
        "it broke",
    )
    assert await sm.client.hget(keys.stats(0), "retried:router") == b"1"
    assert await sm.client.zscore(keys.state_index(0, SagaState.WAITING_RETRY), "r1") is not None
    assert await sm.client.zscore(keys.state_index(0, SagaState.RUNNING), "r1") is None


async def test_fail_park_refunds_the_attempt(sm: StateMachine, keys: Keys) -> None:
    """A parked failure (circuit open) waits like a retry but does not spend the attempt."""
    await sm.start("r1", "u1", "router")
    c = await claim_next(sm, "router", "w-a")
    out = await sm.fail(c, _req(FailAction.PARK, delay_ms=1000))
    assert (out.code, out.state) == (RC.OK, "waiting_retry")
    assert await sm.client.zscore(keys.delayed(0, "router"), "r1") == int(out.detail)
    assert (await saga_hash(sm.client, keys, "r1"))["att:router"] == "1:0"
    assert (await history(sm.client, keys, "r1"))[-1]["e"] == "parked"
    assert await sm.client.hget(keys.stats(0), "retried:router") is None


async def test_fail_dead_dead_letters_with_reason(sm: StateMachine, keys: Keys) -> None:
    """A permanent failure appends a dead letter with the reason and marks the saga failed."""
    await sm.start("r1", "u1", "router")
    c = await claim_next(sm, "router", "w-a")
    out = await sm.fail(c, _req(FailAction.DEAD))
    assert (out.code, out.state) == (RC.OK, "failed")
    [(dead_id, dead)] = await stream_rows(sm.client, keys.dead(0, "router"))
    assert out.detail == dead_id
    assert (dead["rid"], dead["uid"], dead["s"], dead["a"], dead["ep"]) == (
        "r1",
        "u1",
        "router",
        "1",
        "1",
    )
    assert (dead["ec"], dead["em"]) == ("Boom", "it broke")
    h = await saga_hash(sm.client, keys, "r1")
    assert (h["state"], h["dead_id"], h["token"], h["entry"]) == ("failed", dead_id, "", "")
    assert await sm.client.zscore(keys.state_index(0, SagaState.FAILED), "r1") is not None
    assert await sm.client.zscore(keys.state_index(0, SagaState.RUNNING), "r1") is None
    assert await sm.client.zscore(keys.delayed(0, "router"), "r1") is None
    assert await pending(sm.client, keys.ready(0, "router")) == []
    assert (await history(sm.client, keys, "r1"))[-1]["e"] == "dead_lettered"
    assert await sm.client.hget(keys.stats(0), "dead:router") == b"1"


@pytest.mark.parametrize("action", list(FailAction))
async def test_fail_same_token_twice_is_duplicate_and_writes_nothing(
    sm: StateMachine, keys: Keys, action: FailAction
) -> None:
    """A second fail of the same attempt returns DUPLICATE and writes nothing."""
    await sm.start("r1", "u1", "router")
    c = await claim_next(sm, "router", "w-a")
    first = await sm.fail(c, _req(action))
    before = await snapshot(sm.client, keys.prefix)
    again = await sm.fail(c, msgspec.structs.replace(_req(action), error_message="other"))
    assert (again.code, again.state) == (RC.DUPLICATE, first.state)
    assert await snapshot(sm.client, keys.prefix) == before


async def test_fail_with_stale_token_is_lease_lost(sm: StateMachine, keys: Keys) -> None:
    """A zombie's fail after a reclaim is refused: hash unchanged, the live entry kept pending."""
    await sm.start("r1", "u1", "router")
    zombie = await claim_next(sm, "router", "w-a", lease_ms=1)
    await wait_lease_expired(sm.client, zombie.lease_until_ms)
    got = await recover_idle(sm, "router", 0, worker="w-b", min_idle_ms=0)
    entries = [(e, f[b"rid"].decode()) for e, f in got.entries]
    [live] = await sm.claim(
        "router", 0, entries, worker="w-b", lease_ms=60_000, max_lease_expiries=3
    )
    assert live.code == RC.OK
    before = await saga_hash(sm.client, keys, "r1")
    out = await sm.fail(zombie, _req(FailAction.DEAD))
    assert (out.code, out.state) == (RC.LEASE_LOST, "running")
    assert but_fop(await saga_hash(sm.client, keys, "r1")) == before
    assert await stream_rows(sm.client, keys.dead(0, "router")) == []
    pel = await pending(sm.client, keys.ready(0, "router"))
    assert [(p["id"], p["consumer"]) for p in pel] == [(zombie.entry_id, "w-b")]
    assert (await history(sm.client, keys, "r1"))[-1]["e"] == "fenced"


async def test_fail_without_saga_is_not_found(sm: StateMachine, keys: Keys) -> None:
    """A fail for a record whose saga is gone returns NOT_FOUND and writes nothing."""
    await sm.start("r1", "u1", "router")
    c = await claim_next(sm, "router", "w-a")
    ghost = msgspec.structs.replace(c, record_id="ghost")
    before = await snapshot(sm.client, keys.prefix)
    out = await sm.fail(ghost, _req(FailAction.RETRY))
    assert out.code == RC.NOT_FOUND
    assert await snapshot(sm.client, keys.prefix) == before


async def test_a_refused_late_failure_is_recorded_once_with_its_error(
    sm: StateMachine, keys: Keys
) -> None:
    """A zombie's late failure: one 'fenced' event naming its error, and a re-send of the
    same call after other events were written adds no second one."""
    await sm.start("r1", "u1", "router")
    zombie = await claim_next(sm, "router", "w-a", lease_ms=1)
    await wait_lease_expired(sm.client, zombie.lease_until_ms)
    got = await recover_idle(sm, "router", 0, worker="w-b", min_idle_ms=0)
    entries = [(e, f[b"rid"].decode()) for e, f in got.entries]
    [live] = await sm.claim("router", 0, entries, worker="w-b", lease_ms=60_000,
                            max_lease_expiries=3)  # fmt: skip
    assert live.claim is not None
    late = FailRequest(action=FailAction.RETRY, delay_ms=0, error_class="SlowError",
                       error_message="took too long", worker="w-a", op="zombie-op")  # fmt: skip
    assert (await sm.fail(zombie, late)).code == RC.LEASE_LOST
    await sm.commit(live.claim, CommitRequest(output=b"{}", next_step="parser"))
    assert (await sm.fail(zombie, late)).code == RC.LEASE_LOST  # re-sent: its reply was lost
    fenced = [e for e in await history(sm.client, keys, "r1") if e["e"] == "fenced"]
    assert [e["x"] for e in fenced] == ["stale token 1:1; late error SlowError: took too long"]


@pytest.mark.parametrize("action", list(FailAction))
async def test_a_failure_records_the_step_version_that_failed(
    sm: StateMachine, keys: Keys, action: FailAction
) -> None:
    """A versioned step's failure carries its version ('sv') in the event and, dead, in the
    dead letter (read back by dead_letters); version 1 writes no 'sv' (issue 34)."""
    from saga.state.dead_letters import dead_letter_of

    await sm.start("r1", "u1", "router")
    await sm.start("r2", "u1", "router")
    for rid, version in (("r1", 3), ("r2", 1)):
        c = await claim_next(sm, "router", "w-a")
        assert c.record_id == rid
        req = msgspec.structs.replace(_req(action, delay_ms=60_000), step_version=version)
        assert (await sm.fail(c, req)).code == RC.OK
    assert (await history(sm.client, keys, "r1"))[-1]["sv"] == "3"
    assert "sv" not in (await history(sm.client, keys, "r2"))[-1]
    if action == FailAction.DEAD:
        rows = [f for _, f in await stream_rows(sm.client, keys.dead(0, "router"))]
        assert [f.get("sv") for f in rows] == ["3", None]
        assert [d.step_version for d in await dead_letter_of(sm.client, keys, "r1")] == [3]
        assert [d.step_version for d in await dead_letter_of(sm.client, keys, "r2")] == [1]
