"""commit_steps: the exactly-once end of an attempt; every return code of its header."""

from __future__ import annotations

import msgspec
import pytest

from saga.state import operator
from saga.state.codes import RC
from saga.state.keys import Keys
from saga.state.machine import StateMachine, _day
from saga.state.model import Claim, FailAction, SagaState
from saga.state.reads import get_saga
from saga.state.recovery import recover_idle
from saga.state.requests import CommitRequest, FailRequest
from tests.state.helpers import (
    but_fop,
    claim_next,
    history,
    pending,
    pending_ids,
    read_ready,
    saga_hash,
    server_ms,
    snapshot,
    stream_rows,
    wait_lease_expired,
)

pytestmark = pytest.mark.anyio


async def test_commit_ok_enqueues_next_step_and_acks_input(sm: StateMachine, keys: Keys) -> None:
    """A commit stores the output, enqueues the next step and acknowledges the input entry."""
    await sm.start("r1", "u1", "router")
    c = await claim_next(sm, "router", "w-a")
    req = CommitRequest(
        output=b'{"pages":2}',
        next_step="parser",
        worker="w-a",
        pages=b"PAGES",
        checkpoint=b'{"c":1}',
        cost=0.25,
        tokens=42,
    )
    out = await sm.commit(c, req)
    assert (out.code, out.state, out.detail) == (RC.OK, "pending", "parser")
    assert (await sm.client.xpending(keys.ready(0, "router"), "executors"))["pending"] == 0
    h = await saga_hash(sm.client, keys, "r1")
    [(next_id, fields)] = await stream_rows(sm.client, keys.ready(0, "parser"))
    assert fields == {"rid": "r1", "ep": "1", "v": "1"}
    assert (h["state"], h["step"], h["entry"], h["prev"]) == (
        "pending",
        "parser",
        next_id,
        "router",
    )
    assert (h["out:router"], h["done:router"], h["ckpt:router"]) == (
        '{"pages":2}',
        c.token,
        '{"c":1}',
    )
    assert float(h["cost:router"]) == 0.25
    # The attempt's token, worker and lease stay in the hash until the next claim (three
    # fields fewer to write); a reader takes them for live only while the saga runs.
    assert (h["token"], h["worker"], int(h["lease"])) == (c.token, "w-a", c.lease_until_ms)
    view = await get_saga(sm.client, keys, "r1")
    assert (view.token, view.worker, view.lease_until_ms) == ("", "", 0)
    assert await sm.client.get(keys.pages("r1")) == b"PAGES"
    assert 0 < await sm.client.ttl(keys.pages("r1")) <= sm.limits.pages_ttl_s
    assert await sm.client.hget(keys.stats(0), "committed:router") == b"1"
    assert float(await sm.client.hget(keys.costs(0, _day()), "u1|router")) == 0.25
    ev = (await history(sm.client, keys, "r1"))[-1]
    assert (ev["e"], ev["s"], ev["a"], ev["ep"], ev["w"], ev["n"], ev["k"]) == (
        "committed",
        "router",
        "1",
        "1",
        "w-a",
        "parser",
        "42",
    )
    # Pending and running share one index: the hand-off to the next step moved nothing.
    assert await sm.client.zscore(keys.state_index(0, SagaState.PENDING), "r1") is not None


async def test_commit_ok_completing_sets_retention(sm: StateMachine, keys: Keys) -> None:
    """The last step's commit completes the saga and sets the end of its retention: 'ret'
    in the hash and the due time in the retired set (the sweep deletes it then), no TTL."""
    await sm.start("r1", "u1", "grouper")
    await sm.client.set(keys.pages("r1"), b"blob")
    c = await claim_next(sm, "grouper", "w-a")
    out = await sm.commit(c, CommitRequest(output=b"{}", delete_pages=True))
    assert (out.code, out.state, out.detail) == (RC.OK, "completed", "")
    h = await saga_hash(sm.client, keys, "r1")
    assert (h["state"], h["entry"], h["token"]) == ("completed", "", "")
    retention_ms = sm.limits.retention_s * 1000
    now = await server_ms(sm.client)
    assert now + retention_ms - 5000 <= int(h["ret"]) <= now + retention_ms
    assert await sm.client.zscore(keys.retired(0), "u1|r1") == int(h["ret"])
    for key in (keys.saga("r1"), keys.history("r1")):
        assert await sm.client.ttl(key) == -1  # deleted by the sweep, not by expiry
    assert not await sm.client.exists(keys.pages("r1"))
    assert await sm.client.zscore(keys.state_index(0, SagaState.COMPLETED), "r1") is not None
    assert await pending(sm.client, keys.ready(0, "grouper")) == []


async def test_commit_same_token_twice_is_duplicate_and_writes_nothing(
    sm: StateMachine, keys: Keys
) -> None:
    """A second commit of the same attempt returns the recorded result and writes nothing."""
    await sm.start("r1", "u1", "router")
    c = await claim_next(sm, "router", "w-a")
    req = CommitRequest(output=b"{}", next_step="parser", cost=0.5)
    await sm.commit(c, req)
    before = await snapshot(sm.client, keys.prefix)
    hist_len = await sm.client.xlen(keys.history("r1"))
    again = await sm.commit(c, msgspec.structs.replace(req, output=b'{"other":1}'))
    assert (again.code, again.state, again.detail) == (RC.DUPLICATE, "pending", "parser")
    assert await snapshot(sm.client, keys.prefix) == before
    assert await sm.client.xlen(keys.history("r1")) == hist_len


async def test_commit_after_reclaim_is_lease_lost_and_keeps_current_entry(
    sm: StateMachine, keys: Keys
) -> None:
    """A zombie's commit after a reclaim is refused: 'fenced' event, hash unchanged, entry kept."""
    await sm.start("r1", "u1", "router")
    zombie = await claim_next(sm, "router", "w-a", lease_ms=1)
    await wait_lease_expired(sm.client, zombie.lease_until_ms)
    got = await recover_idle(sm, "router", 0, worker="w-b", min_idle_ms=0)
    [out] = await sm.claim(
        "router",
        0,
        [(e, f[b"rid"].decode()) for e, f in got.entries],
        worker="w-b",
        lease_ms=60_000,
        max_lease_expiries=3,
    )
    assert out.claim is not None and out.claim.entry_id == zombie.entry_id
    before = await saga_hash(sm.client, keys, "r1")
    lost = await sm.commit(zombie, CommitRequest(output=b"{}", next_step="parser", worker="w-a"))
    assert (lost.code, lost.state) == (RC.LEASE_LOST, "running")
    assert but_fop(await saga_hash(sm.client, keys, "r1")) == before
    ev = (await history(sm.client, keys, "r1"))[-1]
    assert (ev["e"], ev["s"], ev["w"], ev["x"]) == ("fenced", "router", "w-a", "stale token 1:1")
    pel = await pending(sm.client, keys.ready(0, "router"))
    assert [(p["id"], p["consumer"]) for p in pel] == [(zombie.entry_id, "w-b")]
    assert await stream_rows(sm.client, keys.ready(0, "parser")) == []
    ok = await sm.commit(out.claim, CommitRequest(output=b"{}", next_step="parser"))
    assert ok.code == RC.OK


async def test_commit_after_manual_retry_is_lease_lost_and_superseded_entry_acked(
    sm: StateMachine, keys: Keys
) -> None:
    """After a forced manual retry the old attempt's commit is refused and its entry is acked."""
    await sm.start("r1", "u1", "router")
    zombie = await claim_next(sm, "router", "w-a", lease_ms=60_000)
    res = await operator.retry(sm, "r1", "router", "_input", force=True)
    before = await saga_hash(sm.client, keys, "r1")
    lost = await sm.commit(zombie, CommitRequest(output=b"{}", next_step="parser"))
    assert (lost.code, lost.state) == (RC.LEASE_LOST, "pending")
    assert but_fop(await saga_hash(sm.client, keys, "r1")) == before
    assert await pending_ids(sm.client, keys.ready(0, "router")) == set()
    assert await read_ready(sm.client, keys, "router", "w-b") == [(res.entry_id, "r1")]
    assert (await history(sm.client, keys, "r1"))[-1]["e"] == "fenced"


async def test_commit_fenced_acks_its_own_entry_when_superseded_and_still_pending(
    sm: StateMachine, keys: Keys
) -> None:
    """A stale commit whose entry is not the saga's current one acknowledges that entry."""
    await sm.start("r1", "u1", "router")
    stream = keys.ready(0, "router")
    live = await claim_next(sm, "router", "w-a")
    # A duplicate enqueue of the same record (e.g. by an older release), delivered to a zombie.
    dup = (await sm.client.xadd(stream, {"rid": "r1", "ep": "1", "v": "1"})).decode()
    assert await read_ready(sm.client, keys, "router", "w-z") == [(dup, "r1")]
    zombie = msgspec.structs.replace(live, entry_id=dup, token="1:0")
    lost = await sm.commit(zombie, CommitRequest(output=b"{}", next_step="parser"))
    assert lost.code == RC.LEASE_LOST
    assert await pending_ids(sm.client, stream) == {live.entry_id}


async def test_commit_without_saga_is_not_found(sm: StateMachine, keys: Keys) -> None:
    """A commit for a record with no saga returns NOT_FOUND and writes nothing."""
    ghost = Claim(
        record_id="ghost",
        user_id="u1",
        step="router",
        entry_id="1-0",
        attempt=1,
        epoch=1,
        token="1:1",
        lease_until_ms=0,
        input=b"",
        document="",
        trace="",
        created_ms=0,
    )
    before = await snapshot(sm.client, keys.prefix)
    out = await sm.commit(ghost, CommitRequest(output=b"{}", next_step="parser"))
    assert out.code == RC.NOT_FOUND
    assert await snapshot(sm.client, keys.prefix) == before


async def test_a_commit_after_a_retry_clears_the_last_error(sm: StateMachine, keys: Keys) -> None:
    """The error a retry recorded stays on the saga while it waits, and goes with the
    commit that succeeds."""
    await sm.start("r1", "u1", "router")
    c = await claim_next(sm, "router", "w-a")
    fail = FailRequest(action=FailAction.RETRY, error_class="Boom", error_message="it broke")
    await sm.fail(c, fail)
    assert (await sm.promote("router", 0, ["r1"]))[0] == 1
    h = await saga_hash(sm.client, keys, "r1")
    assert (h["state"], h["ec"], h["em"]) == ("pending", "Boom", "it broke")
    c2 = await claim_next(sm, "router", "w-a")
    assert (await sm.commit(c2, CommitRequest(output=b"{}", next_step="parser"))).code == RC.OK
    h = await saga_hash(sm.client, keys, "r1")
    assert (h["state"], h["ec"], h["em"]) == ("pending", "", "")


async def test_commit_records_the_step_version_and_a_later_v1_run_clears_it(
    sm: StateMachine, keys: Keys
) -> None:
    """A version-2 commit writes sv:<step> and the event's sv; version 1 writes neither,
    and removes the sv:<step> a versioned run of an earlier epoch left."""
    await sm.start("r1", "u1", "router")
    c = await claim_next(sm, "router", "w-a")
    v2 = CommitRequest(output=b"{}", next_step="", worker="w-a", step_version=2)
    assert (await sm.commit(c, v2)).code == RC.OK
    assert (await saga_hash(sm.client, keys, "r1"))["sv:router"] == "2"
    [committed] = [e for e in await history(sm.client, keys, "r1") if e["e"] == "committed"]
    assert committed["sv"] == "2"
    await operator.retry(sm, "r1", "router", "_input", force=True)
    c = await claim_next(sm, "router", "w-a")
    v1 = CommitRequest(output=b"{}", next_step="", worker="w-a")
    assert (await sm.commit(c, v1)).code == RC.OK
    assert "sv:router" not in await saga_hash(sm.client, keys, "r1")
    last = [e for e in await history(sm.client, keys, "r1") if e["e"] == "committed"][-1]
    assert "sv" not in last
