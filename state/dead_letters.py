"""``saga dlq``: dead letters read from their per-step streams."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import msgspec

from saga.state.errors import SagaNotFoundError
from saga.state.ids import validate_id
from saga.state.keys import Keys
from saga.state.replies import num, text
from saga.state.sealing import error_message


class DeadLetter(msgspec.Struct, frozen=True):
    id: str
    record_id: str
    user_id: str
    step: str
    attempt: int
    epoch: int
    error_class: str
    error_message: str
    at_ms: int
    step_version: int = 1
    """The version of the step's code that failed (``@app.step(version=...)``)."""


async def dead_letters(
    client: Any, keys: Keys, steps: Iterable[str], limit: int, *, oldest_first: bool = False
) -> list[DeadLetter]:
    """Up to ``limit`` dead letters of the given steps over all partitions, newest first
    (or oldest first, the order a replay takes them in)."""
    pipe = client.pipeline(transaction=False)
    read = pipe.xrange if oldest_first else pipe.xrevrange
    for p in keys.all_partitions():
        for step in steps:
            read(keys.dead(p, step), count=limit)
    found = [_dead(i, f) for rows in await pipe.execute() for i, f in rows]
    found.sort(key=lambda d: _id_key(d.id), reverse=not oldest_first)
    return found[:limit]


async def dead_letter_of(client: Any, keys: Keys, record_id: str) -> list[DeadLetter]:
    """The dead letter of one record (the saga hash names it), or [] when it has none."""
    validate_id(record_id)
    step, dead_id = await client.hmget(keys.saga(record_id), "step", "dead_id")
    if step is None:
        raise SagaNotFoundError(f"no saga exists for record {record_id!r}")
    if not dead_id:
        return []
    dead = keys.dead(keys.partition_of(record_id), text(step))
    rows = await client.xrange(dead, min=text(dead_id), max=text(dead_id))
    return [_dead(i, f) for i, f in rows if text(f.get(b"rid")) == record_id]


async def have_dead_letters(client: Any, keys: Keys, record_ids: list[str]) -> list[bool]:
    """For each record, whether its saga names a dead letter that is still in its step's
    stream (``saga dlq purge`` deletes letters and leaves the sagas failed)."""
    pipe = client.pipeline(transaction=False)
    for rid in record_ids:
        pipe.hmget(keys.saga(rid), "step", "dead_id")
    named = await pipe.execute()
    pipe = client.pipeline(transaction=False)
    for rid, (step, dead_id) in zip(record_ids, named, strict=True):
        if step and dead_id:
            dead = keys.dead(keys.partition_of(rid), text(step))
            pipe.xrange(dead, min=text(dead_id), max=text(dead_id), count=1)
    found = iter(await pipe.execute()) if len(pipe) else iter(())
    return [bool(step and dead_id and next(found)) for step, dead_id in named]


async def split_live(
    client: Any, keys: Keys, letters: list[DeadLetter]
) -> tuple[list[DeadLetter], list[DeadLetter]]:
    """(live, stale): a letter is live while its saga is failed (compensation_failed, for
    an undo step's letter) and still names it; a replay skips stale ones (the saga moved
    on, or is gone)."""
    pipe = client.pipeline(transaction=False)
    for d in letters:
        pipe.hmget(keys.saga(d.record_id), "state", "dead_id")
    live: list[DeadLetter] = []
    stale: list[DeadLetter] = []
    for d, (state, dead_id) in zip(letters, await pipe.execute(), strict=True):
        ok = state in (b"failed", b"compensation_failed") and dead_id == d.id.encode()
        (live if ok else stale).append(d)
    return live, stale


async def purge_dead_letters(client: Any, keys: Keys, steps: Iterable[str]) -> int:
    """Delete the dead-letter streams of the given steps (not the sagas); returns entries."""
    pipe = client.pipeline(transaction=False)
    for p in keys.all_partitions():
        for step in steps:
            pipe.xlen(keys.dead(p, step))
            pipe.delete(keys.dead(p, step))
    replies = await pipe.execute()
    return sum(int(n) for n in replies[::2])


def _dead(entry_id: Any, raw: dict[bytes, bytes]) -> DeadLetter:
    f = {text(k): text(v) for k, v in raw.items()}
    return DeadLetter(text(entry_id), f.get("rid", ""), f.get("uid", ""), f.get("s", ""),
                      num(f.get("a")), num(f.get("ep")), f.get("ec", ""),
                      error_message(f.get("em", "")), num(f.get("t")),
                      num(f.get("sv")) or 1)  # fmt: skip


def _id_key(entry_id: str) -> tuple[int, int]:
    ms, _, seq = entry_id.partition("-")
    return int(ms or 0), int(seq or 0)
