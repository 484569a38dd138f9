"""extend_lease: a token-checked heartbeat; every return code of its header."""

from __future__ import annotations

import msgspec
import pytest

from saga.state.errors import LeaseLostError, SagaNotFoundError
from saga.state.keys import Keys
from saga.state.machine import StateMachine
from saga.state.recovery import recover_idle
from saga.state.requests import CommitRequest
from tests.state.helpers import (
    claim_next,
    pending,
    saga_hash,
    server_ms,
    snapshot,
    wait_lease_expired,
    wait_until,
)

pytestmark = pytest.mark.anyio


async def test_heartbeat_extends_lease_and_resets_entry_idle(sm: StateMachine, keys: Keys) -> None:
    """A heartbeat moves the lease deadline forward and resets the entry's idle time."""
    await sm.start("r1", "u1", "router")
    c = await claim_next(sm, "router", "w-a", lease_ms=1000)
    stream = keys.ready(0, "router")

    async def idle_enough() -> bool:
        return bool((await pending(sm.client, stream))[0]["idle"] >= 100)

    await wait_until(idle_enough, what="entry idle >= 100 ms")
    t0 = await server_ms(sm.client)
    until = await sm.heartbeat(c, worker="w-a", lease_ms=60_000)
    assert t0 + 60_000 <= until <= await server_ms(sm.client) + 60_000
    assert (await saga_hash(sm.client, keys, "r1"))["lease"] == str(until)
    [entry] = await pending(sm.client, stream)
    assert (entry["id"], entry["consumer"]) == (c.entry_id, "w-a")
    assert entry["idle"] < 100
    assert entry["deliveries"] == 1  # JUSTID: a heartbeat is not a redelivery


async def test_heartbeat_takes_entry_back_from_a_recovering_worker(
    sm: StateMachine, keys: Keys
) -> None:
    """A live owner's heartbeat moves its entry back after another worker's XAUTOCLAIM."""
    await sm.start("r1", "u1", "router")
    c = await claim_next(sm, "router", "w-a")
    await recover_idle(sm, "router", 0, worker="w-b", min_idle_ms=0)
    assert (await pending(sm.client, keys.ready(0, "router")))[0]["consumer"] == "w-b"
    await sm.heartbeat(c, worker="w-a", lease_ms=60_000)
    assert (await pending(sm.client, keys.ready(0, "router")))[0]["consumer"] == "w-a"


async def test_heartbeat_with_stale_token_raises_lease_lost(sm: StateMachine, keys: Keys) -> None:
    """A heartbeat of a reclaimed attempt raises LeaseLostError and writes nothing."""
    await sm.start("r1", "u1", "router")
    zombie = await claim_next(sm, "router", "w-a", lease_ms=1)
    await wait_lease_expired(sm.client, zombie.lease_until_ms)
    got = await recover_idle(sm, "router", 0, worker="w-b", min_idle_ms=0)
    entries = [(e, f[b"rid"].decode()) for e, f in got.entries]
    await sm.claim("router", 0, entries, worker="w-b", lease_ms=60_000, max_lease_expiries=3)
    before = await snapshot(sm.client, keys.prefix)
    with pytest.raises(LeaseLostError):
        await sm.heartbeat(zombie, worker="w-a", lease_ms=60_000)
    assert await snapshot(sm.client, keys.prefix) == before


async def test_heartbeat_after_commit_raises_lease_lost(sm: StateMachine) -> None:
    """Once an attempt committed its lease is over: a late heartbeat raises LeaseLostError."""
    await sm.start("r1", "u1", "router")
    c = await claim_next(sm, "router", "w-a")
    await sm.commit(c, CommitRequest(output=b"{}", next_step="parser"))
    with pytest.raises(LeaseLostError):
        await sm.heartbeat(c, worker="w-a", lease_ms=60_000)


async def test_heartbeat_without_saga_raises_not_found(sm: StateMachine, keys: Keys) -> None:
    """A heartbeat for a record with no saga raises SagaNotFoundError and writes nothing."""
    await sm.start("r1", "u1", "router")
    c = await claim_next(sm, "router", "w-a")
    before = await snapshot(sm.client, keys.prefix)
    with pytest.raises(SagaNotFoundError):
        await sm.heartbeat(msgspec.structs.replace(c, record_id="ghost"), worker="w-a", lease_ms=1)
    assert await snapshot(sm.client, keys.prefix) == before


async def test_heartbeat_same_op_twice_is_duplicate(sm: StateMachine, keys: Keys) -> None:
    """A heartbeat re-sent with its op id returns the first deadline and writes nothing."""
    await sm.start("r1", "u1", "router")
    c = await claim_next(sm, "router", "w-a")
    first = await sm.heartbeat(c, worker="w-a", lease_ms=60_000, op="hb-1")
    before = await snapshot(sm.client, keys.prefix)
    await wait_lease_expired(sm.client, await server_ms(sm.client) + 2)  # the clock moves on
    assert await sm.heartbeat(c, worker="w-a", lease_ms=60_000, op="hb-1") == first
    assert await snapshot(sm.client, keys.prefix) == before
