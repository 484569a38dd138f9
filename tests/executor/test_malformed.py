"""Malformed ready entries are quarantined with their reason and acknowledged on first
delivery; the worker keeps running and keeps serving good entries."""

from __future__ import annotations

import json
from typing import Any

import pytest

from saga.api.client import SagaClient
from saga.state.keys import Keys
from saga.state.replies import text
from tests.executor.conftest import SpawnWorker
from tests.executor.support import pending_entries, states, wait_until

pytestmark = pytest.mark.anyio

# fields of each bad entry -> the start of the reason it must be quarantined with
BAD: list[tuple[dict[bytes, bytes], str]] = [
    ({b"foo": b"bar"}, "entry lacks field(s) rid, ep, v"),
    ({b"rid": b"m-1", b"ep": b"1"}, "entry lacks field(s) v"),
    ({b"rid": b"m-\xff\xfe", b"ep": b"1", b"v": b"1"}, "entry fields are not valid UTF-8"),
    ({b"rid": b"m-2", b"ep": b"1", b"v": b"x9"}, "unknown entry schema version 'x9'"),
    ({b"rid": b"m-3", b"ep": b"one", b"v": b"1"}, "epoch 'one' is not a number"),
    ({b"rid": b"bad{id}", b"ep": b"1", b"v": b"1"}, "record_id 'bad{id}' contains '{'"),
    ({b"rid": b"m-ghost", b"ep": b"1", b"v": b"1"}, "saga not found"),
]


async def test_malformed_entries_are_quarantined_once_and_the_worker_goes_on(
    spawn: SpawnWorker, sagas: SagaClient, redis: Any, keys: Keys
) -> None:
    """Missing fields, bad bytes, bad v, bad epoch, bad record id, no saga: all quarantined."""
    w = spawn("router", "parser", "grouper")
    await w.wait_ready()
    ready = keys.ready(0, "router")
    ids = [text(await redis.xadd(ready, fields)) for fields, _ in BAD]
    await sagas.start("good-1", "u1")  # queued behind the bad ones

    async def good_done() -> bool:
        return await states(redis, keys, ["good-1"]) == ["completed"]

    await wait_until(good_done, within=20, what="the good saga to complete")

    rows = await redis.xrange(keys.quarantine(0))
    quarantined = {}
    for _, fields in rows:
        f = {text(k): text(v) for k, v in fields.items()}
        assert f["entry"] not in quarantined, f"{f['entry']} quarantined twice"
        quarantined[f["entry"]] = f
    assert sorted(quarantined) == sorted(ids)
    for entry_id, (fields, reason) in zip(ids, BAD, strict=True):
        q = quarantined[entry_id]
        assert q["reason"].startswith(reason), (fields, q["reason"])
        assert q["stream"] == ready
    raw = json.loads(quarantined[ids[2]]["raw"])
    assert raw["rid"].startswith("base64:") and raw["ep"] == "1"

    assert await pending_entries(redis, ready) == []  # every one acknowledged
    logged = [e["entry"] for e in w.logged("entry_quarantined")]
    assert sorted(logged) == sorted(ids)
    assert w.alive()
