"""Stream housekeeping: consumer groups at ID 0, trimming behind the slowest reader."""

from __future__ import annotations

import contextlib
from collections.abc import Iterable
from typing import Any

from redis.exceptions import ResponseError

from saga.state.codes import to_code
from saga.state.keys import GROUP, Keys
from saga.state.replies import num, text
from saga.state.scripts import evalsha


async def ensure_groups(client: Any, keys: Keys, steps: Iterable[str]) -> int:
    """Create the consumer group of every ready stream at ID 0 (MKSTREAM); returns how many
    were new. At ID 0 a group created after the first XADD still sees every entry."""
    created = 0
    for step in steps:
        await client.sadd(keys.steps_registry(), step)  # read by `saga top` and `saga dlq`
        for p in keys.all_partitions():
            created += await create_group(client, keys.ready(p, step), GROUP)
    return created


async def create_group(client: Any, stream: str, group: str) -> bool:
    """Create ``group`` on ``stream`` at ID 0 (MKSTREAM); False if it was there already."""
    try:
        await client.xgroup_create(stream, group, id="0", mkstream=True)
    except ResponseError as exc:
        if "BUSYGROUP" not in str(exc):
            raise
        return False
    return True


def group_missing(exc: BaseException) -> bool:
    """Whether ``exc`` is Redis saying a ready stream's consumer group (or the stream)
    is gone: NOGROUP, after ``XGROUP DESTROY`` or a server that restarted empty. Its
    cure is ``ensure_groups`` (at ID 0: nothing enqueued meanwhile is skipped)."""
    return isinstance(exc, ResponseError) and "NOGROUP" in str(exc)


async def groups_present(client: Any, keys: Keys, steps: Iterable[str]) -> bool:
    for step in steps:
        for p in keys.all_partitions():
            try:
                groups = await client.xinfo_groups(keys.ready(p, step))
            except ResponseError:
                return False
            if not any(text(g.get("name") or g.get(b"name")) == GROUP for g in groups):
                return False
    return True


async def trim_behind_readers(client: Any, keys: Keys, step: str, partition: int) -> int:
    """XTRIM MINID to the oldest entry still needed: the oldest pending entry, or the
    group's last-delivered id when nothing is pending. Undelivered entries are never
    trimmed, and the group's lag stays valid (KEDA reads it)."""
    stream = keys.ready(partition, step)
    try:
        groups = await client.xinfo_groups(stream)
    except ResponseError:
        return 0
    if not groups:
        return 0
    floor: tuple[int, int] | None = None
    for g in groups:
        last = text(g.get("last-delivered-id") or g.get(b"last-delivered-id"))
        candidate = _parse(last)
        pending = await client.xpending(stream, text(g.get("name") or g.get(b"name")))
        if pending and pending.get("pending"):
            candidate = min(candidate, _parse(text(pending["min"])))
        floor = candidate if floor is None else min(floor, candidate)
    if floor is None or floor == (0, 0):
        return 0
    with contextlib.suppress(ResponseError):
        return int(await client.xtrim(stream, minid=f"{floor[0]}-{floor[1]}", approximate=False))
    return 0


def _parse(entry_id: str) -> tuple[int, int]:
    ms, _, seq = entry_id.partition("-")
    return int(ms or 0), int(seq or 0)


async def prune_consumers(
    client: Any, stream: str, *, keep: str, idle_ms: int = 3_600_000, limit: int = 20
) -> int:
    """Delete consumers left by dead pods, only when their pending list is empty
    (deleting a consumer with pending entries would drop them from the group):
    checked and deleted in one script, so a consumer cannot read in between."""
    reply = await evalsha(client, "prune_consumers", [stream], [GROUP, keep, idle_ms, limit])
    to_code(reply[0])
    return num(reply[1])
