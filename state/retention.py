"""Deleting completed sagas once their retention has passed.

A completed saga's hash, history and entries in the created, state, user and review
indexes are deleted here, in bounded batches, by the maintenance loop of every
executor and of the controller (which runs while the executors are scaled to zero) —
so memory stays bounded however many sagas complete. Not by TTL: the sweep visits
each saga for its index entries anyway, and two EXPIREs at every completion were
~8% of the commands per transition (saga bench).
"""

from __future__ import annotations

import time

from saga.state.codes import to_code
from saga.state.machine import StateMachine
from saga.state.replies import num, text
from saga.state.scripts import evalsha


async def prune_retired(
    sm: StateMachine, partition: int, *, batch: int = 100, budget_s: float = 5.0
) -> int:
    """Delete the due retired sagas of one partition, batch after batch until none is
    due or ``budget_s`` has passed; returns how many were deleted. A time budget, not a
    count: a pass every minute must keep up with every saga that completes meanwhile
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
        keys = [k.retired(partition), k.created_index(partition), *k.state_indexes(partition)]
        keys.append(k.review_index(partition))
        args: list[str] = []
        for raw in rows:
            member = text(raw)
            user, _, record = member.partition("|")
            keys += [k.saga(record), k.history(record), k.user_index(partition, user)]
            args += [member, record]
        reply = await sm._resend(lambda: evalsha(sm.client, "prune_retired", keys, args))  # noqa: B023
        to_code(reply[0])
        total += num(reply[1])
        if len(rows) < batch or num(reply[1]) + num(reply[2]) < len(rows):
            break  # none due after these (some were read within the clock's slack)
    return total
