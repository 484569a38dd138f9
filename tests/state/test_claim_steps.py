"""claim_steps: claim a batch of ready entries; every return code of the script's header."""

from __future__ import annotations

import pytest
from redis.exceptions import ResponseError

from saga.state import operator
from saga.state.codes import RC
from saga.state.keys import Keys
from saga.state.machine import StateMachine
from saga.state.model import Claim, FailAction, SagaState
from saga.state.recovery import recover_idle
from saga.state.replies import ClaimOutcome
from saga.state.requests import FailRequest
from tests.state.helpers import (
    claim_next,
    events,
    history,
    pending,
    read_ready,
    saga_hash,
    server_ms,
    snapshot,
    stream_rows,
    wait_lease_expired,
)

pytestmark = pytest.mark.anyio


async def test_claim_ok_returns_everything_the_step_needs(sm: StateMachine, keys: Keys) -> None:
    """A claim issues attempt 1 with token '<epoch>:<seq>', a server-clock lease and the input."""
    started = await sm.start("r1", "u1", "router", input_json=b'{"a":1}', document="d", trace="t")
    entries = await read_ready(sm.client, keys, "router", "w-a")
    before_ms = await server_ms(sm.client)
    [out] = await sm.claim("router", 0, entries, worker="w-a", lease_ms=5000, max_lease_expiries=3)
    assert out.code == RC.OK and out.claim is not None
    c = out.claim
    assert (c.record_id, c.user_id, c.step, c.entry_id) == ("r1", "u1", "router", entries[0][0])
    assert (c.attempt, c.epoch, c.token) == (1, 1, "1:1")
    assert (c.input, c.document, c.trace) == (b'{"a":1}', "d", "t")
    assert c.created_ms == started.created_ms
    assert before_ms + 5000 <= c.lease_until_ms <= await server_ms(sm.client) + 5000
    h = await saga_hash(sm.client, keys, "r1")
    assert (h["state"], h["worker"], h["token"], h["lease"]) == (
        "running",
        "w-a",
        "1:1",
        str(c.lease_until_ms),
    )
    assert h["att:router"] == "1:1"
    # A claim writes no history event (the attempt's end records it); the hash has it.
    assert [e["e"] for e in await history(sm.client, keys, "r1")] == ["started"]
    assert int(h["claimed"]) == c.lease_until_ms - 5000
    # Pending and running share the "active" index: the claim moved nothing there.
    active = keys.state_index(0, SagaState.RUNNING)
    assert active == keys.state_index(0, SagaState.PENDING)
    assert await sm.client.zscore(active, "r1") == started.created_ms
    pel = await pending(sm.client, keys.ready(0, "router"))
    assert [(p["id"], p["consumer"]) for p in pel] == [(c.entry_id, "w-a")]


async def test_claim_batch_claims_every_entry_in_one_call(sm: StateMachine, keys: Keys) -> None:
    """One call claims a whole batch, returning one outcome per entry in order."""
    for rid in ("r1", "r2", "r3"):
        await sm.start(rid, "u1", "router")
    entries = await read_ready(sm.client, keys, "router", "w-a")
    outs = await sm.claim("router", 0, entries, worker="w-a", lease_ms=5000, max_lease_expiries=3)
    assert [(o.code, o.record_id) for o in outs] == [(RC.OK, r) for r in ("r1", "r2", "r3")]
    assert [o.claim.token for o in outs if o.claim] == ["1:1"] * 3  # a seq per saga


async def test_claim_returns_pages_and_extra_fields_when_asked(
    sm: StateMachine, keys: Keys
) -> None:
    """load_pages returns the pages blob and extra_fields return named saga fields."""
    from saga.state.requests import CommitRequest

    await sm.start("r1", "u1", "router")
    c = await claim_next(sm, "router", "w-a")
    req = CommitRequest(output=b"{}", next_step="parser", pages=b"PAGES", checkpoint=b'{"k":2}')
    await sm.commit(c, req)
    entries = await read_ready(sm.client, keys, "parser", "w-a")
    [out] = await sm.claim(
        "parser",
        0,
        entries,
        worker="w-a",
        lease_ms=5000,
        max_lease_expiries=3,
        load_pages=True,
        extra_fields=("ckpt:router", "nope"),
    )
    assert out.claim is not None
    assert out.claim.pages == b"PAGES"
    assert out.claim.extra == {"ckpt:router": b'{"k":2}', "nope": b""}
    assert out.claim.input == b"{}"


async def test_claim_same_op_same_worker_is_duplicate(sm: StateMachine, keys: Keys) -> None:
    """Re-sending a claim with its op id returns the same token and writes nothing."""
    await sm.start("r1", "u1", "router")
    entries = await read_ready(sm.client, keys, "router", "w-a")
    kw = {"worker": "w-a", "lease_ms": 5000, "max_lease_expiries": 3, "op": "op-1"}
    [first] = await sm.claim("router", 0, entries, **kw)  # type: ignore[arg-type]
    before = await snapshot(sm.client, keys.prefix)
    [again] = await sm.claim("router", 0, entries, **kw)  # type: ignore[arg-type]
    assert again.code == RC.DUPLICATE and again.claim == first.claim
    assert await snapshot(sm.client, keys.prefix) == before


async def test_claim_entry_without_saga_is_quarantined_and_acked(
    sm: StateMachine, keys: Keys
) -> None:
    """An entry whose record has no saga is moved to the quarantine stream and acknowledged."""
    stream = keys.ready(0, "router")
    orphan = (await sm.client.xadd(stream, {"rid": "ghost", "ep": "1", "v": "1"})).decode()
    entries = await read_ready(sm.client, keys, "router", "w-a")
    assert entries == [(orphan, "ghost")]
    [out] = await sm.claim("router", 0, entries, worker="w-a", lease_ms=5000, max_lease_expiries=3)
    assert (out.code, out.entry_id, out.record_id) == (RC.NOT_FOUND, orphan, "ghost")
    assert out.claim is None
    [(_, q)] = await stream_rows(sm.client, keys.quarantine(0))
    assert (q["entry"], q["rid"], q["stream"], q["reason"]) == (
        orphan,
        "ghost",
        stream,
        "saga not found",
    )
    assert (await sm.client.xpending(stream, "executors"))["pending"] == 0
    assert not await sm.client.exists(keys.saga("ghost"))


async def test_claim_stale_entry_after_manual_retry_is_acked_and_dropped(
    sm: StateMachine, keys: Keys
) -> None:
    """An entry superseded by a manual retry is acknowledged and dropped; the new one is claimed."""
    await sm.start("r1", "u1", "router")
    old = (await sm.client.hget(keys.saga("r1"), "entry")).decode()
    res = await operator.retry(sm, "r1", "router", "_input")
    entries = await read_ready(sm.client, keys, "router", "w-a")
    assert entries == [(old, "r1"), (res.entry_id, "r1")]
    outs = await sm.claim("router", 0, entries, worker="w-a", lease_ms=5000, max_lease_expiries=3)
    assert [o.code for o in outs] == [RC.STALE_ENTRY, RC.OK]
    assert outs[0].detail == "pending"
    assert outs[1].claim is not None and outs[1].claim.epoch == 2
    assert [p["id"] for p in await pending(sm.client, keys.ready(0, "router"))] == [res.entry_id]
    assert await events(sm.client, keys, "r1") == ["started", "retried"]


async def test_claim_under_live_lease_of_another_worker_is_lease_held(
    sm: StateMachine, keys: Keys
) -> None:
    """A second worker that recovers an entry under a live lease gets LEASE_HELD; nothing moves."""
    await sm.start("r1", "u1", "router")
    c = await claim_next(sm, "router", "w-a", lease_ms=60_000)
    got = await recover_idle(sm, "router", 0, worker="w-b", min_idle_ms=0)
    entries = [(e, f[b"rid"].decode()) for e, f in got.entries]
    before = await saga_hash(sm.client, keys, "r1")
    [out] = await sm.claim(
        "router", 0, entries, worker="w-b", lease_ms=60_000, max_lease_expiries=3
    )
    assert (out.code, out.entry_id, out.detail) == (RC.LEASE_HELD, c.entry_id, "w-a")
    assert await saga_hash(sm.client, keys, "r1") == before
    assert [p["id"] for p in await pending(sm.client, keys.ready(0, "router"))] == [c.entry_id]


async def test_claim_after_expired_lease_takes_over_with_new_token(
    sm: StateMachine, keys: Keys
) -> None:
    """An expired lease is taken over: attempt 2, a new token, a 'reclaimed' event."""
    await sm.start("r1", "u1", "router")
    c = await claim_next(sm, "router", "w-a", lease_ms=1)
    await wait_lease_expired(sm.client, c.lease_until_ms)
    got = await recover_idle(sm, "router", 0, worker="w-b", min_idle_ms=0)
    entries = [(e, f[b"rid"].decode()) for e, f in got.entries]
    [out] = await sm.claim(
        "router", 0, entries, worker="w-b", lease_ms=60_000, max_lease_expiries=3
    )
    assert out.code == RC.OK and out.claim is not None
    assert (out.claim.attempt, out.claim.token) == (2, "1:2")
    last = (await history(sm.client, keys, "r1"))[-1]
    assert (last["e"], last["w"], last["x"]) == ("reclaimed", "w-b", "lease of w-a expired")
    assert (last["a"], last["pa"], last["pw"], last["pt"]) == (
        "2",
        "1",
        "w-a",
        str(c.lease_until_ms - 1),
    )


async def test_claim_expired_lease_at_the_expiry_cap_dead_letters(
    sm: StateMachine, keys: Keys
) -> None:
    """The lease expiry that reaches the cap dead-letters the saga and acks the entry."""
    await sm.start("r1", "u1", "router")
    c = await claim_next(sm, "router", "w-a", lease_ms=1, max_lease_expiries=1)
    await wait_lease_expired(sm.client, c.lease_until_ms)
    got = await recover_idle(sm, "router", 0, worker="w-b", min_idle_ms=0)
    entries = [(e, f[b"rid"].decode()) for e, f in got.entries]
    [out] = await sm.claim(
        "router", 0, entries, worker="w-b", lease_ms=60_000, max_lease_expiries=1
    )
    assert (out.code, out.claim) == (RC.DEAD_LETTERED, None)
    h = await saga_hash(sm.client, keys, "r1")
    assert (h["state"], h["token"], h["entry"], h["ec"]) == ("failed", "", "", "LeaseExpired")
    [(dead_id, dead)] = await stream_rows(sm.client, keys.dead(0, "router"))
    assert dead_id == h["dead_id"]
    assert (dead["rid"], dead["s"], dead["a"], dead["ec"]) == ("r1", "router", "1", "LeaseExpired")
    assert "expired 1 times, last on attempt 1" in dead["em"]
    assert await sm.client.zscore(keys.state_index(0, SagaState.FAILED), "r1") is not None
    assert await sm.client.zscore(keys.state_index(0, SagaState.RUNNING), "r1") is None
    assert await pending(sm.client, keys.ready(0, "router")) == []
    assert (await events(sm.client, keys, "r1"))[-1] == "dead_lettered"


async def test_claim_saga_of_newer_schema_is_left_alone(sm: StateMachine, keys: Keys) -> None:
    """A saga written by a newer release is refused with SCHEMA_NEWER and the entry left pending."""
    await sm.start("r1", "u1", "router")
    await sm.client.hset(keys.saga("r1"), "v", 99)
    entries = await read_ready(sm.client, keys, "router", "w-a")
    before = await saga_hash(sm.client, keys, "r1")
    [out] = await sm.claim("router", 0, entries, worker="w-a", lease_ms=5000, max_lease_expiries=3)
    assert (out.code, out.claim) == (RC.SCHEMA_NEWER, None)
    assert await saga_hash(sm.client, keys, "r1") == before
    assert [p["id"] for p in await pending(sm.client, keys.ready(0, "router"))] == [entries[0][0]]


async def test_claim_refuses_more_than_100_entries(sm: StateMachine) -> None:
    """A batch above the script's bound is refused as a whole, before any write."""
    entries = [(f"1-{i}", f"r{i}") for i in range(101)]
    with pytest.raises(ResponseError, match="at most 100"):
        await sm.claim("router", 0, entries, worker="w-a", lease_ms=5000, max_lease_expiries=3)


async def test_claim_refuses_too_many_extra_fields(sm: StateMachine, keys: Keys) -> None:
    """The count of extra fields is capped before the script loops over it."""
    await sm.start("r1", "u1", "router")
    entries = await read_ready(sm.client, keys, "router", "w-a")
    fields = tuple(f"f{i}" for i in range(1000))
    with pytest.raises(ResponseError, match="extra fields"):
        await sm.claim(
            "router",
            0,
            entries,
            worker="w-a",
            lease_ms=5000,
            max_lease_expiries=3,
            extra_fields=fields,
        )
    assert (await saga_hash(sm.client, keys, "r1"))["state"] == "pending"


async def _expire_and_take_over(sm: StateMachine, c: Claim, cap: int) -> ClaimOutcome:
    await wait_lease_expired(sm.client, c.lease_until_ms)
    got = await recover_idle(sm, "router", 0, worker="w-b", min_idle_ms=0)
    entries = [(e, f[b"rid"].decode()) for e, f in got.entries]
    [out] = await sm.claim("router", 0, entries, worker="w-b", lease_ms=1, max_lease_expiries=cap)
    return out


async def test_lease_expiries_have_their_own_budget(sm: StateMachine, keys: Keys) -> None:
    """Attempts that ended by lease expiry are counted apart ('lx:<step>'): the claim after
    two expiries is attempt 3 with expired 2, so it is charged as the first failure-able
    attempt; the expiry that reaches the cap dead-letters."""
    await sm.start("r1", "u1", "router")
    c = await claim_next(sm, "router", "w-a", lease_ms=1, max_lease_expiries=3)
    assert (c.attempt, c.expired, c.charged) == (1, 0, 1)
    for n in (1, 2):
        out = await _expire_and_take_over(sm, c, cap=3)
        assert out.code == RC.OK and out.claim is not None
        c = out.claim
        assert (c.attempt, c.expired, c.charged) == (n + 1, n, 1)
    assert (await saga_hash(sm.client, keys, "r1"))["lx:router"] == "1:2"
    out = await _expire_and_take_over(sm, c, cap=3)
    assert out.code == RC.DEAD_LETTERED
    assert (await saga_hash(sm.client, keys, "r1"))["ec"] == "LeaseExpired"


async def test_an_expiry_on_the_last_allowed_attempt_is_taken_over(
    sm: StateMachine, keys: Keys
) -> None:
    """Failures up to the last allowed attempt, then that attempt's lease expires: the
    entry is taken over (not dead-lettered) and the new attempt is still the last one."""
    await sm.start("r1", "u1", "router")
    for _ in range(2):  # attempts 1 and 2 fail and are retried at once
        c = await claim_next(sm, "router", "w-a", lease_ms=60_000)
        req = FailRequest(action=FailAction.RETRY, delay_ms=0, error_class="E",
                          error_message="boom", worker="w-a")  # fmt: skip
        assert (await sm.fail(c, req)).code == RC.OK
        assert (await sm.promote("router", 0, ["r1"]))[0] == 1
    c = await claim_next(sm, "router", "w-a", lease_ms=1, max_lease_expiries=3)
    assert (c.attempt, c.charged) == (3, 3)
    out = await _expire_and_take_over(sm, c, cap=3)
    assert out.code == RC.OK and out.claim is not None
    assert (out.claim.attempt, out.claim.expired, out.claim.charged) == (4, 1, 3)
