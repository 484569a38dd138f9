"""Stream housekeeping: consumer groups at ID 0, trimming behind the slowest reader."""

from __future__ import annotations

from typing import Any

import pytest

from saga.state.keys import GROUP, Keys
from saga.state.replies import text
from saga.state.streams import (
    ensure_groups,
    groups_present,
    prune_consumers,
    trim_behind_readers,
)
from tests.state.helpers import STEPS, pending_ids, stream_rows

pytestmark = pytest.mark.anyio


async def _group(client: Any, stream: str) -> dict[str, Any]:
    [g] = await client.xinfo_groups(stream)
    return {text(k): v for k, v in g.items()}


async def test_groups_are_created_at_id_zero_once(redis: Any, keys: Keys) -> None:
    """Groups start at ID 0 with MKSTREAM, so entries added before the group are still read."""
    stream = keys.ready(0, "router")
    await redis.xadd(stream, {"rid": "early"})
    assert not await groups_present(redis, keys, STEPS)
    assert await ensure_groups(redis, keys, STEPS) == len(STEPS)
    assert await ensure_groups(redis, keys, STEPS) == 0
    assert await groups_present(redis, keys, STEPS)
    assert (await _group(redis, stream))["lag"] == 1
    reply = await redis.xreadgroup(GROUP, "w-a", {stream: ">"}, count=10)
    assert [f[b"rid"] for _, f in reply[0][1]] == [b"early"]


async def test_trim_keeps_pending_and_undelivered_entries(redis: Any, keys: Keys) -> None:
    """Trimming drops only acknowledged entries older than the oldest pending one."""
    await ensure_groups(redis, keys, ["router"])
    stream = keys.ready(0, "router")
    ids = [text(await redis.xadd(stream, {"rid": f"r{i}"})) for i in range(5)]
    await redis.xreadgroup(GROUP, "w-a", {stream: ">"}, count=3)  # r0 r1 r2 delivered
    await redis.xack(stream, GROUP, ids[0], ids[2])  # r1 still pending; r3, r4 undelivered
    assert await trim_behind_readers(redis, keys, "router", 0) == 1
    assert [i for i, _ in await stream_rows(redis, stream)] == ids[1:]
    assert await pending_ids(redis, stream) == {ids[1]}
    assert (await _group(redis, stream))["lag"] == 2


async def test_trim_with_nothing_pending_keeps_last_delivered_and_lag(
    redis: Any, keys: Keys
) -> None:
    """With nothing pending the stream is trimmed to the last delivered entry; lag stays valid."""
    await ensure_groups(redis, keys, ["router"])
    stream = keys.ready(0, "router")
    ids = [text(await redis.xadd(stream, {"rid": f"r{i}"})) for i in range(4)]
    await redis.xreadgroup(GROUP, "w-a", {stream: ">"}, count=2)
    await redis.xack(stream, GROUP, ids[0], ids[1])
    assert await trim_behind_readers(redis, keys, "router", 0) == 1
    assert [i for i, _ in await stream_rows(redis, stream)] == ids[1:]
    assert (await _group(redis, stream))["lag"] == 2
    reply = await redis.xreadgroup(GROUP, "w-a", {stream: ">"}, count=10)
    assert [text(i) for i, _ in reply[0][1]] == ids[2:]


async def test_trim_of_a_fresh_or_missing_stream_does_nothing(redis: Any, keys: Keys) -> None:
    """A stream nobody read yet, or no stream at all, is left alone."""
    assert await trim_behind_readers(redis, keys, "router", 0) == 0
    await ensure_groups(redis, keys, ["router"])
    await redis.xadd(keys.ready(0, "router"), {"rid": "r1"})
    assert await trim_behind_readers(redis, keys, "router", 0) == 0
    assert await redis.xlen(keys.ready(0, "router")) == 1


async def _consumers(client: Any, stream: str) -> dict[str, int]:
    return {text(c["name"]): int(c["pending"]) for c in await client.xinfo_consumers(stream, GROUP)}


async def test_pruning_deletes_idle_empty_consumers_only_and_at_most_the_limit(
    redis: Any, keys: Keys
) -> None:
    """Checked and deleted in one script: a consumer holding entries, the caller itself,
    and one not idle long enough stay; at most ``limit`` go per call."""
    stream = keys.ready(0, "router")
    await ensure_groups(redis, keys, STEPS)
    await redis.xadd(stream, {"rid": "r1"})
    await redis.xreadgroup(GROUP, "busy", {stream: ">"}, count=1)
    for name in ("me", "dead-1", "dead-2", "dead-3"):
        await redis.xgroup_createconsumer(stream, GROUP, name)
    assert await prune_consumers(redis, stream, keep="me", idle_ms=3_600_000) == 0  # all fresh
    assert await prune_consumers(redis, stream, keep="me", idle_ms=0, limit=2) == 2
    assert await prune_consumers(redis, stream, keep="me", idle_ms=0) == 1
    assert await _consumers(redis, stream) == {"busy": 1, "me": 0}


async def test_pruning_a_missing_stream_or_group_does_nothing(redis: Any, keys: Keys) -> None:
    assert await prune_consumers(redis, keys.ready(0, "router"), keep="me", idle_ms=0) == 0
    await redis.xadd(keys.ready(0, "router"), {"rid": "r1"})  # a stream, no group
    assert await prune_consumers(redis, keys.ready(0, "router"), keep="me", idle_ms=0) == 0
