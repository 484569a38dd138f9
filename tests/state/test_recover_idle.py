"""recover_idle: XAUTOCLAIM entries idle past the lease; deleted entries are recorded."""

from __future__ import annotations

import pytest
from redis.exceptions import ResponseError

from saga.state.keys import GROUP, Keys
from saga.state.machine import StateMachine
from saga.state.recovery import recover_idle
from saga.state.scripts import evalsha
from tests.state.helpers import claim_next, pending, read_ready, stream_rows, wait_until

pytestmark = pytest.mark.anyio


async def test_recover_takes_over_entries_idle_past_min_idle(sm: StateMachine, keys: Keys) -> None:
    """Entries idle longer than min_idle move to the recovering worker; fresher ones stay."""
    stream = keys.ready(0, "router")
    await sm.start("r1", "u1", "router")
    c = await claim_next(sm, "router", "w-a")

    async def idle_enough() -> bool:
        return bool((await pending(sm.client, stream))[0]["idle"] >= 80)

    await wait_until(idle_enough, what="entry idle >= 80 ms")
    await sm.start("r2", "u1", "router")
    await read_ready(sm.client, keys, "router", "w-a")  # r2's entry: delivered just now
    got = await recover_idle(sm, "router", 0, worker="w-b", min_idle_ms=80)
    assert [(e, f[b"rid"]) for e, f in got.entries] == [(c.entry_id, b"r1")]
    assert got.deleted == [] and got.next_start == "0-0"
    owners = {p["id"]: (p["consumer"], p["deliveries"]) for p in await pending(sm.client, stream)}
    assert owners[c.entry_id] == ("w-b", 2)
    assert sorted(o for o, _ in owners.values()) == ["w-a", "w-b"]


async def test_recover_pages_through_with_a_cursor(sm: StateMachine, keys: Keys) -> None:
    """COUNT bounds each call; the returned start id continues the scan."""
    for rid in ("r1", "r2", "r3"):
        await sm.start(rid, "u1", "router")
    await read_ready(sm.client, keys, "router", "w-a")
    first = await recover_idle(sm, "router", 0, worker="w-b", min_idle_ms=0, count=2)
    assert len(first.entries) == 2 and first.next_start != "0-0"
    rest = await recover_idle(
        sm, "router", 0, worker="w-b", min_idle_ms=0, count=2, start=first.next_start
    )
    assert [f[b"rid"] for _, f in rest.entries] == [b"r3"]


async def test_recover_records_entries_deleted_while_pending(sm: StateMachine, keys: Keys) -> None:
    """A pending entry deleted from the stream is reported and recorded in the quarantine."""
    stream = keys.ready(0, "router")
    await sm.start("r1", "u1", "router")
    [(entry, _)] = await read_ready(sm.client, keys, "router", "w-a")
    await sm.client.xdel(stream, entry)
    got = await recover_idle(sm, "router", 0, worker="w-b", min_idle_ms=0)
    assert (got.entries, got.deleted) == ([], [entry])
    [(_, q)] = await stream_rows(sm.client, keys.quarantine(0))
    assert (q["entry"], q["stream"], q["reason"]) == (entry, stream, "entry deleted while pending")
    assert await pending(sm.client, stream) == []


async def test_recover_script_refuses_count_above_100(sm: StateMachine, keys: Keys) -> None:
    """The script bounds XAUTOCLAIM's COUNT at 100."""
    ks = [keys.ready(0, "router"), keys.quarantine(0)]
    with pytest.raises(ResponseError, match="at most 100"):
        await evalsha(sm.client, "recover_idle", ks, [GROUP, "w-b", 0, 101, "0-0"])
