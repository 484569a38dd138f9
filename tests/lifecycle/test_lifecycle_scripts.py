"""The lifecycle scripts on a real server, each return code: import_record (written, a
re-sent call, another user's record, a long history in several calls), reseal_values
(compare-and-set on hash fields and strings, the TTL kept) and reseal_stream (copy and
swap, entries appended meanwhile carried along, a stream trimmed meanwhile left)."""

from __future__ import annotations

from typing import Any

import pytest

from saga.state.codes import RC, to_code
from saga.state.keys import Keys
from saga.state.model import SagaState
from saga.state.scripts import evalsha

pytestmark = pytest.mark.anyio


def import_call(keys: Keys, record: str, user: str, first: bool, entries: list[str]) -> Any:
    rk = keys.record(record)
    ks = [rk.saga, rk.history, keys.created_index(0), keys.user_index(0, user)]
    ks += [keys.state_index(0, SagaState.FAILED), keys.review_index(0), keys.retired(0)]
    args: list[Any] = [record, user, "100", "100", "200", "", "900", "op-1", "1" if first else "0"]
    args += [2, "uid", user, "state", "failed"] if first else [0]
    args.append(len(entries))
    for entry_id in entries:
        args += [entry_id, 1, "e", "x"]
    return ks, args


async def test_import_record_codes(redis: Any, keys: Keys) -> None:
    """OK writes hash, entries and indexes; the same call again is DUPLICATE and writes no
    entry twice; a later call appends only newer entries; another user: USER_MISMATCH."""
    ks, args = import_call(keys, "r1", "u1", True, ["1-1", "2-1"])
    reply = await evalsha(redis, "import_record", ks, args)
    assert (to_code(reply[0]), reply[1], reply[2]) == (RC.OK, 2, 2)
    assert await redis.hget(keys.saga("r1"), "state") == b"failed"
    assert await redis.zscore(keys.retired(0), "u1|r1") == 900
    assert await redis.zscore(keys.review_index(0), "r1") is None  # "" : no entry
    again = await evalsha(redis, "import_record", ks, args)
    assert (to_code(again[0]), again[2]) == (RC.DUPLICATE, 0)
    ks, more = import_call(keys, "r1", "u1", False, ["2-1", "3-0"])
    assert (await evalsha(redis, "import_record", ks, more))[2] == 1
    assert [e[0] for e in await redis.xrange(keys.history("r1"))] == [b"1-1", b"2-1", b"3-0"]
    ks, other = import_call(keys, "r1", "u2", True, [])
    reply = await evalsha(redis, "import_record", ks, other)
    assert (to_code(reply[0]), reply[1]) == (RC.USER_MISMATCH, b"u1")


async def test_reseal_values_sets_only_what_is_as_read(redis: Any, keys: Keys) -> None:
    """A field still as read is replaced, one rewritten meanwhile is left (changed); a
    string is replaced with its TTL kept, or left when it changed."""
    saga, pages = keys.saga("r1"), keys.pages("r1")
    await redis.hset(saga, mapping={"out:a": "old-a", "out:b": "newer-b"})
    args = ["hash", 2, "out:a", "old-a", "re-a", "out:b", "old-b", "re-b"]
    reply = await evalsha(redis, "reseal_values", [saga], args)
    assert (to_code(reply[0]), reply[1], reply[2]) == (RC.OK, 1, 1)
    assert await redis.hmget(saga, "out:a", "out:b") == [b"re-a", b"newer-b"]
    await redis.set(pages, "old", ex=500)
    reply = await evalsha(redis, "reseal_values", [pages], ["string", 1, "old", "new"])
    assert (reply[1], reply[2]) == (1, 0)
    assert await redis.get(pages) == b"new" and 0 < await redis.ttl(pages) <= 500
    reply = await evalsha(redis, "reseal_values", [pages], ["string", 1, "old", "x"])
    assert (reply[1], reply[2]) == (0, 1) and await redis.get(pages) == b"new"


async def test_reseal_stream_swaps_and_refuses_a_changed_stream(redis: Any, keys: Keys) -> None:
    """Copy + swap puts the rewritten entries in place with their ids, and the entry added
    after the copy too (no TTL left); an entry deleted after the copy: CONFLICT, the
    stream as it was and no scratch left."""
    hist = keys.history("r1")
    scratch = keys.reseal_scratch(hist)
    for i in (1, 2):
        await redis.xadd(hist, {"v": f"old-{i}"}, id=f"{i}-0")
    copy = ["copy", "1", 2, "1-0", 1, "v", "new-1", "2-0", 1, "v", "new-2"]
    assert to_code((await evalsha(redis, "reseal_stream", [hist, scratch], copy))[0]) == RC.OK
    await redis.xadd(hist, {"v": "appended"}, id="3-0")
    reply = await evalsha(redis, "reseal_stream", [hist, scratch], ["swap", "2-0", 2])
    assert (to_code(reply[0]), reply[1]) == (RC.OK, 1)
    assert [f[b"v"] for _, f in await redis.xrange(hist)] == [b"new-1", b"new-2", b"appended"]
    assert await redis.ttl(hist) == -1 and not await redis.exists(scratch)

    await evalsha(redis, "reseal_stream", [hist, scratch], ["copy", "1", 1, "1-0", 1, "v", "x"])
    await redis.xdel(hist, "1-0")
    reply = await evalsha(redis, "reseal_stream", [hist, scratch], ["swap", "1-0", 1])
    assert to_code(reply[0]) == RC.CONFLICT
    assert [f[b"v"] for _, f in await redis.xrange(hist)] == [b"new-2", b"appended"]
    assert not await redis.exists(scratch)
