"""Priorities in start_saga, claim_steps and release_lowered against a real server: an
urgent saga's entry overtakes a backlog of priority-0 ones (they are lowered, then put
back in order), the age bound lets an old priority-0 saga through, a re-sent batch
lowers nothing twice, and a quiet stream gets its lowered entries back."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from saga.state.codes import RC
from saga.state.errors import InvalidIdError
from saga.state.keys import Keys
from saga.state.limits import StateLimits
from saga.state.machine import StateMachine
from saga.state.streams import ensure_groups
from tests.state.helpers import (
    LEASE_MS,
    MAX_LEASE_EXPIRIES,
    STEPS,
    read_ready,
    saga_hash,
    server_ms,
    wait_until,
)

pytestmark = pytest.mark.anyio


async def start(sm: StateMachine, rid: str, priority: int = 0) -> None:
    await sm.start(rid, "u-1", "router", input_json=b'{"document": "x"}', priority=priority)


async def claim(sm: StateMachine, count: int, op: str | None = None) -> list[Any]:
    entries = await read_ready(sm.client, sm.keys, "router", "w1", count=count)
    return await sm.claim(
        "router", 0, entries, worker="w1", lease_ms=LEASE_MS,
        max_lease_expiries=MAX_LEASE_EXPIRIES, prev_step="_input", op=op,
    )  # fmt: skip


def codes(outs: list[Any]) -> list[tuple[str, str]]:
    return [(o.record_id, o.code.name) for o in outs]


async def test_an_urgent_saga_overtakes_the_backlog(
    sm: StateMachine, redis: Any, keys: Keys
) -> None:
    """Three priority-0 sagas wait, then an urgent one is started: the claims lower the
    three (DEFERRED, acknowledged, no entry), claim the urgent one, and put the three
    back at the end of that claim, oldest first; they are claimed next."""
    for rid in ("low-1", "low-2", "low-3"):
        await start(sm, rid)
    await start(sm, "high", priority=5)
    assert (await saga_hash(redis, keys, "high"))["pri"] == "5"
    assert await redis.zcard(keys.urgent(0, "router")) == 1
    first = await claim(sm, 2)
    assert codes(first) == [("low-1", "DEFERRED"), ("low-2", "DEFERRED")]
    assert (await saga_hash(redis, keys, "low-1"))["entry"] == ""
    second = await claim(sm, 2)
    assert codes(second) == [("low-3", "DEFERRED"), ("high", "OK")]
    assert await redis.zcard(keys.urgent(0, "router")) == 0
    assert await redis.zcard(keys.lowered(0, "router")) == 0  # released at the claim's end
    third = await claim(sm, 10)
    assert codes(third) == [("low-1", "OK"), ("low-2", "OK"), ("low-3", "OK")]
    assert (await redis.xpending(keys.ready(0, "router"), "executors"))["pending"] == 4


async def test_the_age_bound_lets_old_sagas_through(redis: Any, keys: Keys) -> None:
    """A priority-0 saga older than the bound is claimed in its turn although a young
    urgent saga waits: priorities hold a saga back for at most the bound."""
    await ensure_groups(redis, keys, STEPS)
    sm = StateMachine(redis, keys, StateLimits(priority_boost_ms=400))
    await start(sm, "low")
    created = int((await saga_hash(redis, keys, "low"))["created"])

    async def past_the_bound() -> bool:
        return await server_ms(redis) > created + 450

    await wait_until(past_the_bound, what="the server's clock past the age bound")
    await start(sm, "high", priority=1)
    assert codes(await claim(sm, 2)) == [("low", "OK"), ("high", "OK")]


async def test_priorities_off_and_bad_priorities(redis: Any, keys: Keys) -> None:
    """SAGA_PRIORITY_AGE_BOOST=0 turns lowering off (FIFO); a priority out of 0-9 is
    refused before anything is written."""
    await ensure_groups(redis, keys, STEPS)
    sm = StateMachine(redis, keys, StateLimits(priority_boost_ms=0))
    await start(sm, "low")
    await start(sm, "high", priority=9)
    assert codes(await claim(sm, 2)) == [("low", "OK"), ("high", "OK")]
    with pytest.raises(InvalidIdError, match="priority must be 0-9"):
        await start(sm, "bad", priority=10)
    assert not await redis.exists(keys.saga("bad"))


async def test_a_resent_batch_lowers_nothing_twice(
    sm: StateMachine, redis: Any, keys: Keys
) -> None:
    """The same claim call again (a lost reply) answers DEFERRED again and changes
    nothing: one lowered member, the saga still without an entry."""
    await start(sm, "low")
    await start(sm, "high", priority=1)
    entries = await read_ready(sm.client, sm.keys, "router", "w1", count=1)
    call = dict(worker="w1", lease_ms=LEASE_MS, max_lease_expiries=MAX_LEASE_EXPIRIES,
                prev_step="_input", op="op-1")  # fmt: skip
    a = await sm.claim("router", 0, entries, **call)  # type: ignore[arg-type]
    b = await sm.claim("router", 0, entries, **call)  # type: ignore[arg-type]
    assert [o.code for o in a] == [o.code for o in b] == [RC.DEFERRED]
    assert await redis.zrange(keys.lowered(0, "router"), 0, -1) == [b"low|1"]


async def test_a_quiet_stream_gets_its_lowered_entries_back(
    sm: StateMachine, redis: Any, keys: Keys
) -> None:
    """The urgent saga is cancelled before any claim reaches it: release_lowered (the
    promote loops) gives nothing back while it is listed and younger than the bound, and
    everything once it is gone; the released entry claims as the saga's own."""
    await start(sm, "low")
    await start(sm, "high", priority=1)
    assert codes(await claim(sm, 1)) == [("low", "DEFERRED")]
    assert await sm.release_lowered("router", 0) == 0
    await redis.zrem(keys.urgent(0, "router"), "high")  # as the age bound would drop it
    assert await sm.release_lowered("router", 0) == 1
    assert await sm.release_lowered("router", 0) == 0
    outs = await claim(sm, 10)
    assert codes(outs) == [("high", "OK"), ("low", "OK")]
    claimed = {o.record_id: o.claim for o in outs}
    assert msgspec.json.decode(claimed["low"].input) == {"document": "x"}
