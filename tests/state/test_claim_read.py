"""claim_steps claiming in the read (state/claim_read.py): the script reads a step's new
entries itself and claims them, as a read then a claim would; an unusual entry is left
read and returned; a lost reply's repeat returns the same claims; a key base that is not
the stream's is refused."""

from __future__ import annotations

from typing import Any

import pytest
from redis.exceptions import ConnectionError, ResponseError

from saga.state import claim_read as claim_read_module
from saga.state.claim_read import claim_read
from saga.state.codes import RC
from saga.state.keys import GROUP, Keys
from saga.state.machine import StateMachine, new_op
from saga.state.scripts import evalsha
from tests.state.helpers import pending_ids, read_ready, saga_hash

pytestmark = pytest.mark.anyio
OPTIONS: dict[str, Any] = {"worker": "w-a", "lease_ms": 60_000, "max_lease_expiries": 3}


async def test_it_claims_new_entries_in_order_as_a_read_then_a_claim_would(
    sm: StateMachine, keys: Keys
) -> None:
    for rid in ("r1", "r2", "r3"):
        await sm.start(rid, "u1", "router", input_json=b'{"a":1}')
    first, left = await claim_read(sm, "router", 0, 2, after="0-0", op=new_op(), **OPTIONS)
    assert left == [] and [o.code for o in first] == [RC.OK, RC.OK]
    assert [o.record_id for o in first] == ["r1", "r2"]
    c = first[0].claim
    assert c is not None and c.token == "1:1" and c.attempt == 1 and c.input == b'{"a":1}'
    h = await saga_hash(sm.client, keys, "r1")
    assert (h["state"], h["worker"], h["token"]) == ("running", "w-a", "1:1")
    assert h["entry"] == c.entry_id
    second, _ = await claim_read(sm, "router", 0, 2, after="0-0", op=new_op(), **OPTIONS)
    assert [o.record_id for o in second] == ["r3"]
    third, left = await claim_read(sm, "router", 0, 2, after="0-0", op=new_op(), **OPTIONS)
    assert (third, left) == ([], [])
    assert await read_ready(sm.client, keys, "router", "w-a") == []  # all delivered once


async def test_an_unusual_entry_is_read_left_pending_and_returned(
    sm: StateMachine, keys: Keys, redis: Any
) -> None:
    """A newer release's entry and a malformed one are not claimed: the worker's own checks
    decide (leave it for a newer release, quarantine it); the good one beside is claimed."""
    ready = keys.ready(0, "router")
    newer = await redis.xadd(ready, {"rid": "r9", "ep": "1", "v": "99"})
    await sm.start("r1", "u1", "router")
    bad = await redis.xadd(ready, {"rid": "no{pe}", "ep": "1", "v": "1"})
    got, left = await claim_read(sm, "router", 0, 10, after="0-0", op=new_op(), **OPTIONS)
    assert [o.record_id for o in got] == ["r1"]
    assert [e[0] for e in left] == [newer.decode(), bad.decode()]
    assert left[0][1] == {b"rid": b"r9", b"ep": b"1", b"v": b"99"}
    assert {newer.decode(), bad.decode()} <= await pending_ids(redis, ready)


async def test_a_lost_reply_is_repeated_as_the_same_claims(
    sm: StateMachine, keys: Keys, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The script ran, its reply was lost: claim_read returns the entries it read (this
    consumer's past the last one it knew of), and claiming them under the same op id
    gives the lost call's claims back as duplicates, token for token."""
    for rid in ("r1", "r2"):
        await sm.start(rid, "u1", "router")
    await sm.start("r0", "u1", "router")
    [(before, _)] = [e for e in await read_ready(sm.client, keys, "router", "w-a", count=1)]
    ran: list[Any] = []

    async def lost(client: Any, name: str, k: list[str], args: list[Any]) -> Any:
        ran.append(await evalsha(client, name, k, args))
        raise ConnectionError("reply lost")

    monkeypatch.setattr(claim_read_module, "evalsha", lost)
    op = new_op()
    got, left = await claim_read(sm, "router", 0, 10, after=before, op=op, **OPTIONS)
    assert got == [] and [e[0] for e in left] != []
    [replies, _] = ran[0]
    tokens = {r[2].decode(): r[6].decode() for r in replies}
    pairs = [(e[0], e[1][b"rid"].decode()) for e in left]
    assert {rid for _, rid in pairs} == set(tokens)  # only what the lost call read
    again = await sm.claim("router", 0, pairs, op=op, **OPTIONS)
    assert [o.code for o in again] == [RC.DUPLICATE] * len(pairs)
    assert {o.record_id: o.claim.token for o in again if o.claim} == tokens


async def test_a_key_base_that_is_not_the_streams_is_refused(sm: StateMachine, keys: Keys) -> None:
    """The sagas' keys are built from the base: it must hold a hash tag and begin the
    ready stream's name, so every key is in the stream's slot."""
    await sm.start("r1", "u1", "router")
    ks, args = sm.claim_call(
        "router", 0, load_pages=False, extra_fields=(), prev_step="_input", user_cap=0,
        undoable=(), op=new_op(), **OPTIONS,
    )  # fmt: skip
    for base in ("elsewhere{p0}", keys.prefix):
        with pytest.raises(ResponseError, match="key base"):
            await evalsha(sm.client, "claim_steps", ks, [*args, ">", 5, base])
    h = await saga_hash(sm.client, keys, "r1")
    assert h["state"] == "pending"
    assert await sm.client.xpending(keys.ready(0, "router"), GROUP) == {
        "pending": 0,
        "min": None,
        "max": None,
        "consumers": [],
    }  # refused before it read anything
