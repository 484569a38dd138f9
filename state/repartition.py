"""``saga partitions migrate --to N``: moving records to another partition count.

With a drain: every saga must be terminal (completed, failed, cancelled); the command
refuses while any is pending, running or waiting for a retry, unless forced, and then
leaves those where they are. While it runs, the stored count says "migrating", so a
worker, client or command started meanwhile refuses to run (``partitions.guard``).

A record moves in two calls, one per slot (its old and new partitions may be on two
cluster nodes): ``receive_record`` restores DUMPs of its hash, history, pages and
cached LLM answers in the new partition with their index entries and dead letter,
then ``release_record`` deletes the old copy, unless the saga changed since it was
read. Both carry the migration's op id: a run stopped anywhere is resumed by running
the command again, and a record is never in neither partition.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from enum import StrEnum
from typing import Any

import msgspec

from saga.state.codes import RC, to_code
from saga.state.errors import StateError
from saga.state.keys import Keys
from saga.state.machine import new_op
from saga.state.model import SagaState
from saga.state.partitions import stored_count
from saga.state.replies import text
from saga.state.scripts import evalsha
from saga.state.streams import ensure_groups

_TERMINAL = {s.value for s in SagaState if s.terminal}


class MigrationRefused(StateError):
    """Sagas are still active, or a migration to another count is under way."""


class MigrationReport(msgspec.Struct, kw_only=True):
    from_count: int
    to_count: int
    moved: int = 0
    stayed: int = 0
    """Records whose partition is the same under both counts: nothing to move."""
    active_left: int = 0
    """Sagas not terminal (``--force``): left in place; run the command again later."""
    changed: int = 0
    """Sagas that changed while being moved, or met another saga of the same record
    in their new partition: left in place."""
    done: bool = False
    """Every record is in its new partition and the stored count is the new one."""


async def active_sagas(client: Any, keys: Keys) -> int:
    """Sagas pending, running or waiting for a retry, over every partition."""
    total = 0
    for p in keys.all_partitions():
        total += await client.zcard(keys.state_index(p, SagaState.PENDING))
        total += await client.zcard(keys.state_index(p, SagaState.WAITING_RETRY))
    return total


async def migrate(
    client: Any, keys: Keys, to: int, steps: list[str], *, force: bool = False
) -> MigrationReport:
    """Move every terminal saga of ``keys.prefix`` to its partition under ``to``."""
    stored = await stored_count(client, keys)
    count = stored.count if stored else keys.partitions
    if stored and stored.migrating_to and stored.migrating_to != to:
        raise MigrationRefused(
            f"a migration to {stored.migrating_to} partitions is under way; finish it "
            f"with `saga partitions migrate --to {stored.migrating_to}` first"
        )
    src, dst = Keys(keys.prefix, count), Keys(keys.prefix, to)
    report = MigrationReport(from_count=count, to_count=to)
    active = await active_sagas(client, src)
    if active and not force:
        raise MigrationRefused(
            f"{active} saga(s) are pending, running or waiting for a retry; stop starting "
            "sagas, let the workers finish them, then run this again (or pass --force "
            "to move the others now and leave those in place)"
        )
    op = stored.op if stored and stored.migrating_to == to and stored.op else new_op()
    if count != to:
        await client.hset(keys.partition_count(), mapping={"count": count, "to": to, "op": op})
    for p in src.all_partitions() if count != to else ():
        answers = await _answers(client, src, p)
        async for raw in client.zscan_iter(src.created_index(p)):
            rid = text(raw[0] if isinstance(raw, tuple) else raw)
            if dst.partition_of(rid) == p:  # in place (or moved here by this run)
                report.stayed += src.partition_of(rid) == p
                continue
            moved = await move_record(client, src, dst, rid, op, answers.get(rid, []))
            report.moved += moved == Moved.MOVED
            report.active_left += moved == Moved.ACTIVE
            report.changed += moved == Moved.CHANGED
    if report.active_left == report.changed == 0:
        await ensure_groups(client, dst, steps)
        await client.hset(keys.partition_count(), "count", to)
        await client.hdel(keys.partition_count(), "to", "op")
        report.done = True
    return report


async def _answers(client: Any, keys: Keys, partition: int) -> dict[str, list[str]]:
    """A partition's cached LLM answers by record (``...:llm:<record>:<step>:<digest>``)."""
    found: dict[str, list[str]] = defaultdict(list)
    async for raw in client.scan_iter(match=keys.llm_cache_pattern(partition), count=1000):
        key = text(raw)
        found[key.split(":llm:", 1)[1].split(":", 1)[0]].append(key)
    return found


class Moved(StrEnum):
    """What ``move_record`` did with one record."""

    MOVED = "moved"
    GONE = "gone"
    """No saga in the old partition (moved already, or expired): nothing written."""
    ACTIVE = "active"
    """Not terminal: left in place."""
    CHANGED = "changed"
    """Changed while being moved, or another saga of the record is in the new partition."""


async def move_record(
    client: Any, src: Keys, dst: Keys, rid: str, op: str, answers: Sequence[str] = ()
) -> Moved:
    """Move one terminal saga from its partition under ``src`` to its partition under
    ``dst`` (``answers``: its cached LLM answers' keys); ``op`` makes a repeat harmless."""
    c = await _read(client, src, rid, answers)
    if c is None:  # moved already, or expired (retention): the sweep drops its entries
        return Moved.GONE
    if c.state not in _TERMINAL:
        return Moved.ACTIVE
    if not await _clear_stale_copy(client, dst, rid, op, c.updated):
        return Moved.CHANGED
    keys_in, args = _receive_call(src, dst, rid, c, op, answers)
    received = to_code((await evalsha(client, "receive_record", keys_in, args))[0])
    if received == RC.BUSY:
        return Moved.CHANGED
    keys_out = [*_release_keys(src, rid, c.uid, c.step), *answers]
    retired = c.retired if c.scores[3] is not None else ""
    out_args = [op, rid, c.updated, retired, c.dead_id, len(answers)]
    released = to_code((await evalsha(client, "release_record", keys_out, out_args))[0])
    return Moved.CHANGED if released == RC.WRONG_STATE else Moved.MOVED


class _Copy(msgspec.Struct):
    """A record as read in its old partition, to be restored in its new one."""

    state: str
    updated: str
    uid: str
    step: str
    dead_id: str
    retired: str
    dumps: list[tuple[bytes | str, int]] = []
    """(DUMP, PTTL) of its hash, history, pages and each cached answer."""
    scores: list[float | None] = []
    """In the created, user, state, retired and review indexes (None: absent)."""
    dead_fields: list[str] = []


async def _read(client: Any, src: Keys, rid: str, answers: Sequence[str]) -> _Copy | None:
    old, p = src.record(rid), src.partition_of(rid)
    fields = await client.hmget(old.saga, "state", "updated", "uid", "step", "dead_id")
    if not fields[0]:
        return None
    state, updated, uid, step, dead_id = map(text, fields)
    c = _Copy(state, updated, uid, step, dead_id, f"{uid}|{rid}")
    if state not in _TERMINAL:
        return c
    pipe = client.pipeline(transaction=False)
    for key, member in (
        (src.created_index(p), rid), (src.user_index(p, uid), rid),
        (src.state_index(p, SagaState(state)), rid), (src.retired(p), c.retired),
        (src.review_index(p), rid),
    ):  # fmt: skip
        pipe.zscore(key, member)
    c.scores = list(await pipe.execute())
    if dead_id:
        rows = await client.xrange(src.dead(p, step), dead_id, dead_id)
        c.dead_fields = [text(x) for _, f in rows for kv in f.items() for x in kv]
    c.dumps = await _dumps(client, [old.saga, old.history, old.pages, *answers])
    return c


def _receive_call(
    src: Keys, dst: Keys, rid: str, c: _Copy, op: str, answers: Sequence[str]
) -> tuple[list[str], list[Any]]:
    new, q = dst.record(rid), dst.partition_of(rid)
    keys = [new.saga, new.history, new.pages, dst.created_index(q), dst.user_index(q, c.uid),
            dst.retired(q), dst.review_index(q), dst.state_index(q, SagaState(c.state)),
            dst.dead(q, c.step), *(src.retag(a, q) for a in answers)]  # fmt: skip
    created, user, state, retired, review = c.scores
    args: list[Any] = [op, rid, *c.dumps[0], *c.dumps[1], *c.dumps[2]]
    args += [_score(created), _score(user), _score(state)]
    args += [c.retired if retired is not None else "", _score(retired)]
    args += ["" if review is None else _score(review)]
    args += [msgspec.json.encode(c.dead_fields).decode() if c.dead_fields else ""]
    args += [len(answers), *(x for pair in c.dumps[3:] for x in pair), c.updated]
    return keys, args


async def _clear_stale_copy(client: Any, dst: Keys, rid: str, op: str, updated: str) -> bool:
    """Remove an earlier version of this record that this migration copied to its new
    partition before the saga changed (re-run by an old process); False if the saga
    there is not this migration's copy."""
    new = dst.record(rid)
    mvop, mvup, was, uid, step, dead_id = map(
        text, await client.hmget(new.saga, "mvop", "mvup", "updated", "uid", "step", "dead_id")
    )
    if not uid or (mvop == op and mvup == updated):
        return True
    if mvop != op:
        return False
    keys_out = _release_keys(dst, rid, uid, step)
    await evalsha(client, "release_record", keys_out, [op, rid, was, f"{uid}|{rid}", dead_id, 0])
    return True


def _release_keys(keys: Keys, rid: str, uid: str, step: str) -> list[str]:
    """release_record's KEYS[1..14] for a record in its partition under ``keys``."""
    rk = keys.record(rid)
    p = rk.partition
    indexes = [keys.created_index(p), keys.user_index(p, uid), keys.retired(p)]
    indexes += [keys.review_index(p), *keys.state_indexes(p)]
    return [rk.saga, rk.history, rk.pages, *indexes, keys.dead(p, step)]


async def _dumps(client: Any, keys: list[str]) -> list[tuple[bytes | str, int]]:
    """(DUMP, PTTL) of each key in one round trip ('' and 0 for a missing key)."""
    pipe = client.pipeline(transaction=False)
    for key in keys:
        pipe.dump(key)
        pipe.pttl(key)
    replies = await pipe.execute()
    return [(replies[i] or "", int(replies[i + 1])) for i in range(0, len(replies), 2)]


def _score(value: float | None) -> str:
    return "0" if value is None else repr(value)
