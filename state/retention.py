"""Deleting ended sagas once their retention has passed.

Every terminal state has a retention (``StateLimits.retention``, ``SAGA_RETENTION_DAYS``):
the transition that ends a saga writes its 'ret' and its member in the partition's
retired set. Here the due ones are deleted — hash, history, pages and dead letter, and
their entries in the created, state, user and review indexes — in bounded batches, by the
maintenance loop of every executor and of the controller (which runs while the executors
are scaled to zero), so memory stays bounded however many sagas end. Not by TTL: the
sweep visits each saga for its index entries anyway, and two EXPIREs at every completion
were ~8% of the commands per transition (saga bench).

With an archive (``SAGA_ARCHIVE_DIR``) each batch is written to it (``saga.state.archive``)
before it is deleted: ``before_delete`` gets the due records first.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import msgspec

from saga.state.codes import to_code
from saga.state.keys import Keys
from saga.state.machine import StateMachine
from saga.state.replies import num, text
from saga.state.scripts import evalsha

BeforeDelete = Callable[[int, Sequence[str]], Awaitable[None]]
"""Called with a partition and the records about to be deleted (the archive)."""


async def prune_retired(
    sm: StateMachine,
    partition: int,
    *,
    batch: int = 100,
    budget_s: float = 5.0,
    before_delete: BeforeDelete | None = None,
) -> int:
    """Delete the due retired sagas of one partition, batch after batch until none is
    due or ``budget_s`` has passed; returns how many were deleted. A time budget, not a
    count: a pass every minute must keep up with every saga that ends meanwhile
    (~9 µs of the server's time a saga, ~1 ms a batch of 100: 5 s a minute keep up
    with thousands of completions a second; the earlier cap, 1,000 a pass, let the
    backlog grow from ~17 a second)."""
    k, total = sm.keys, 0
    until = time.monotonic() + budget_s
    while time.monotonic() < until:
        # Candidates by the local clock (with a little slack); the script re-checks
        # each against the server's clock.
        horizon = int(time.time() * 1000) + 1000
        rows = await sm.client.zrangebyscore(k.retired(partition), "-inf", horizon, 0, batch)
        if not rows:
            break
        members = [text(r) for r in rows]
        records = [m.partition("|")[2] for m in members]
        steps = await _steps(sm, records)
        if before_delete is not None:
            await before_delete(partition, records)
        keys = [k.retired(partition), k.created_index(partition), *k.state_indexes(partition)]
        keys.append(k.review_index(partition))
        args: list[str] = []
        for member, record, step in zip(members, records, steps, strict=True):
            user = member.partition("|")[0]
            rk = k.record(record)
            dead = k.dead(partition, step) if step else rk.saga
            keys += [rk.saga, rk.history, rk.pages, k.user_index(partition, user), dead]
            args += [member, record, step]
        reply = await sm._resend(lambda: evalsha(sm.client, "prune_retired", keys, args))  # noqa: B023
        to_code(reply[0])
        total += num(reply[1])
        if len(rows) < batch or num(reply[1]) + num(reply[2]) < len(rows):
            break  # none due after these (some were read within the clock's slack, or moved)
    return total


async def _steps(sm: StateMachine, records: Sequence[str]) -> list[str]:
    """Each record's current step ("" when its hash is gone): its dead letter's stream."""
    pipe = sm.client.pipeline(transaction=False)
    for record in records:
        pipe.hget(sm.keys.saga(record), "step")
    return [text(s) if s is not None else "" for s in await pipe.execute()]


class RetiredCounts(msgspec.Struct, frozen=True, kw_only=True):
    """What the retired sets of a saga type hold (every partition)."""

    scheduled: int
    """Ended sagas waiting for the end of their retention."""
    due: int
    """Of those, the ones whose retention has ended: the next sweep deletes them."""
    next_due_ms: int
    """When the earliest one is due (0: none)."""


async def retired_counts(client: Any, keys: Keys) -> RetiredCounts:
    """``saga retention show``: the retired sets' sizes, what is due, and the next due time
    (by the server's clock); one round trip."""
    secs, micros = await client.time()
    now = int(secs) * 1000 + int(micros) // 1000
    pipe = client.pipeline(transaction=False)
    for p in keys.all_partitions():
        pipe.zcard(keys.retired(p))
        pipe.zcount(keys.retired(p), "-inf", now)
        pipe.zrange(keys.retired(p), 0, 0, withscores=True)
    replies = iter(await pipe.execute())
    scheduled = due = first = 0
    for _ in keys.all_partitions():
        scheduled += int(next(replies))
        due += int(next(replies))
        head = next(replies)
        if head and (not first or int(head[0][1]) < first):
            first = int(head[0][1])
    return RetiredCounts(scheduled=scheduled, due=due, next_due_ms=first)
