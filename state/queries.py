"""Reads for operators and metrics (``saga top|costs``, ``/metrics``, the web console):
queue figures per step, the registered steps, cost totals, saga counts per state.
Listing sagas is ``saga.state.listing``, dead letters ``saga.state.dead_letters``.

Plain async functions returning Structs. Each reads what it needs in a few
pipelined round trips and never scans the keyspace: step names come from the
registry set.
"""

from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import Sequence
from typing import Any

import msgspec
from redis.exceptions import ResponseError

from saga.state.errors import InvalidIdError
from saga.state.ids import validate_step, validate_work
from saga.state.keys import GROUP, Keys
from saga.state.model import SagaState, undone_step
from saga.state.presence import Presence, live_workers
from saga.state.replies import num, text

ACTIVE_WITHIN_MS = 60_000
"""A consumer that read within this window counts as reading (``live_consumers``);
``saga top`` counts live workers by their presence instead (``state.presence``)."""


class StepStats(msgspec.Struct, frozen=True, kw_only=True):
    """One step's queues, summed over partitions; counters are totals since the start."""

    step: str
    length: int
    """Entries in the ready streams (delivered or not, until trimmed)."""
    lag: int | None
    """Entries not yet delivered to the group; None when the server cannot tell."""
    pending: int
    """Delivered and not acknowledged (running, or held by a dead executor)."""
    delayed: int
    """Retries waiting for their due time."""
    dead: int
    """Dead letters in the streams now."""
    workers: int
    """Live workers serving the step (their presence renewed within PRESENCE_TTL_S)."""
    committed: int
    failed: int
    retried: int
    dead_lettered: int
    parked: int = 0
    """Attempts parked with the attempt refunded (circuit open, or the user's budget spent)."""
    deferred: int = 0
    """Ready entries set aside now because their user was at ``SAGA_USER_MAX_INFLIGHT``."""


async def registered_steps(client: Any, keys: Keys, *, undo: bool = False) -> list[str]:
    """Every step a worker or client created groups for, sorted by name; with ``undo``,
    the undo steps (``undo:<step>``, a compensation's) too."""
    steps = []
    check = validate_work if undo else validate_step
    for name in sorted({text(n) for n in await client.smembers(keys.steps_registry())}):
        with contextlib.suppress(InvalidIdError):
            steps.append(check(name))
    return steps


async def queue_stats(
    client: Any, keys: Keys, steps: Sequence[str], *, workers: Sequence[Presence] | None = None
) -> list[StepStats]:
    """Queue numbers of every step over every partition, in one pipeline (and the live
    workers, unless given)."""
    if workers is None:
        workers = await live_workers(client, keys)
    mine = (w for w in workers if w.saga_type == keys.saga_type)  # types share step names
    serving = Counter(step for w in mine for step in set(w.steps))
    pipe = client.pipeline(transaction=False)
    for p in keys.all_partitions():
        pipe.hgetall(keys.stats(p))
        for step in steps:
            ready = keys.ready(p, step)
            pipe.xlen(ready)
            pipe.xinfo_groups(ready)
            pipe.xpending(ready, GROUP)
            pipe.zcard(keys.delayed(p, step))
            pipe.xlen(keys.dead(p, step))
            pipe.zcard(keys.deferred(p, step))
    replies = iter(await pipe.execute(raise_on_error=False))
    sums = {s: _StepSums() for s in steps}
    counters: Counter[str] = Counter()
    for _ in keys.all_partitions():
        counters.update({text(k): num(v) for k, v in _ok(next(replies), {}).items()})
        for step in steps:
            sums[step].add([next(replies) for _ in range(6)])
    # An undo step (undo:<step>) is served by its step's workers.
    return [sums[s].result(s, counters, serving[undone_step(s)]) for s in steps]


def _ok(reply: Any, default: Any) -> Any:
    """A pipelined reply, or ``default`` when it was an error (no stream, no group)."""
    return default if isinstance(reply, Exception) or reply is None else reply


class _StepSums:
    def __init__(self) -> None:
        self.length = self.pending = self.delayed = self.dead = self.deferred = 0
        self.lag: int | None = 0

    def add(self, replies: list[Any]) -> None:
        length, groups, pending, delayed, dead, deferred = replies
        self.deferred += _ok(deferred, 0)
        self.length += _ok(length, 0)
        self.pending += int(_ok(pending, {}).get("pending") or 0)
        self.delayed += _ok(delayed, 0)
        self.dead += _ok(dead, 0)
        lag = _group_lag(_ok(groups, []))
        self.lag = None if self.lag is None or lag is None else self.lag + lag

    def result(self, step: str, counters: Counter[str], workers: int) -> StepStats:
        own = {"length": self.length, "pending": self.pending, "delayed": self.delayed,
               "deferred": self.deferred}  # fmt: skip
        done = {k: counters[f"{f}:{step}"] for k, f in _COUNTERS}
        return StepStats(step=step, lag=self.lag, dead=self.dead, workers=workers,
                         **own, **done)  # fmt: skip


_COUNTERS = (("committed", "committed"), ("failed", "failed"), ("retried", "retried"),
             ("dead_lettered", "dead"), ("parked", "parked"))  # fmt: skip


def _group_lag(groups: list[dict[str, Any]]) -> int | None:
    for g in groups:
        if text(g.get("name")) == GROUP:
            lag = g.get("lag")
            return None if lag is None else int(lag)
    return 0  # no group yet: nothing can be waiting for it


async def oldest_waiting_ms(client: Any, keys: Keys, steps: Sequence[str]) -> dict[str, int]:
    """Per step, the time (ms, from its id) of the oldest entry not yet delivered to the
    group, over every partition; a step with nothing waiting is left out. Two pipelined
    round trips: each group's last-delivered id, then the first entry after it."""
    pairs = [(p, s) for p in keys.all_partitions() for s in steps]
    pipe = client.pipeline(transaction=False)
    for p, step in pairs:
        pipe.xinfo_groups(keys.ready(p, step))
    groups = await pipe.execute(raise_on_error=False)
    pipe = client.pipeline(transaction=False)
    for (p, step), reply in zip(pairs, groups, strict=True):
        last = next((text(g.get("last-delivered-id")) for g in _ok(reply, [])
                     if text(g.get("name")) == GROUP), "0-0")  # fmt: skip
        pipe.xrange(keys.ready(p, step), f"({last}", "+", count=1)
    oldest: dict[str, int] = {}
    for (_, step), first in zip(pairs, await pipe.execute(raise_on_error=False), strict=True):
        if first and not isinstance(first, Exception):
            ms = int(text(first[0][0]).partition("-")[0])
            oldest[step] = min(ms, oldest.get(step, ms))
    return oldest


# -- costs --------------------------------------------------------------------------


class CostRow(msgspec.Struct, frozen=True, kw_only=True):
    user_id: str
    step: str
    attempts: int
    """Attempts that reported a cost."""
    usd: float


async def cost_totals(
    client: Any, keys: Keys, days: Sequence[str], user: str | None = None
) -> list[CostRow]:
    """LLM cost per user and step summed over ``days`` (UTC, YYYY-MM-DD) and partitions."""
    by_day = await cost_by_day(client, keys, days, user)
    return sum_costs([r for rows in by_day.values() for r in rows])


async def cost_by_day(
    client: Any, keys: Keys, days: Sequence[str], user: str | None = None
) -> dict[str, list[CostRow]]:
    """Day -> LLM cost per user and step that day (the hashes ``cost_totals`` sums), read
    in one pipeline."""
    pipe = client.pipeline(transaction=False)
    for day in days:
        for p in keys.all_partitions():
            pipe.hgetall(keys.costs(p, day))
    replies = iter(await pipe.execute())
    out: dict[str, list[CostRow]] = {}
    for day in days:
        rows: list[CostRow] = []
        for _ in keys.all_partitions():
            rows += _cost_rows(next(replies), user)
        out[day] = sum_costs(rows)
    return out


def _cost_rows(raw: dict[Any, Any], user: str | None) -> list[CostRow]:
    """One costs hash (fields ``<user>|<step>`` in USD, ``<user>|<step>|n`` attempts)."""
    sums: dict[tuple[str, str], list[float]] = {}
    for field, value in raw.items():
        uid, _, rest = text(field).partition("|")
        step, _, n = rest.partition("|")
        if user and uid != user:
            continue
        acc = sums.setdefault((uid, step), [0.0, 0.0])
        acc[1 if n == "n" else 0] += float(value)
    return [CostRow(user_id=u, step=s, attempts=int(a[1]), usd=a[0]) for (u, s), a in sums.items()]


def sum_costs(rows: Sequence[CostRow]) -> list[CostRow]:
    """Rows of the same user and step added up, sorted by user and step."""
    sums: dict[tuple[str, str], list[float]] = {}
    for r in rows:
        acc = sums.setdefault((r.user_id, r.step), [0.0, 0.0])
        acc[0] += r.usd
        acc[1] += r.attempts
    return [
        CostRow(user_id=u, step=s, attempts=int(a[1]), usd=round(a[0], 9))
        for (u, s), a in sorted(sums.items())
    ]


async def live_consumers(
    client: Any, keys: Keys, partition: int, step: str, *, active_ms: int = ACTIVE_WITHIN_MS
) -> int:
    """Consumers of ``step``'s group in ``partition`` that read within ``active_ms``
    (0 when the stream or its group does not exist yet)."""
    try:
        consumers = await client.xinfo_consumers(keys.ready(partition, step), GROUP)
    except ResponseError:  # no stream or no group: nobody reads it
        return 0
    return sum(int(c.get("idle") or 0) < active_ms for c in consumers)


# -- counts -------------------------------------------------------------------------


class StateCounts(msgspec.Struct, frozen=True, kw_only=True):
    """Sagas per state index, summed over partitions (what the console's list heads with).

    Read from the indexes' sizes: an entry whose saga expired stays counted until a
    listing or the retention sweep removes it, so these are upper bounds."""

    active: int
    """Pending or running (they share one index)."""
    waiting_retry: int
    completed: int
    failed: int
    cancelled: int
    review: int
    """Flagged for a person's review."""


async def state_counts(client: Any, keys: Keys) -> StateCounts:
    """ZCARD of every state index and the review index, in one pipeline. The compensation
    states share their indexes (keys.SHARED_INDEX): active counts compensating sagas,
    failed counts compensation_failed ones, cancelled counts compensated ones."""
    names = ("active", "waiting_retry", "completed", "failed", "cancelled")
    states = [SagaState.PENDING, SagaState.WAITING_RETRY, SagaState.COMPLETED,
              SagaState.FAILED, SagaState.CANCELLED]  # fmt: skip
    pipe = client.pipeline(transaction=False)
    for p in keys.all_partitions():
        for state in states:
            pipe.zcard(keys.state_index(p, state))
        pipe.zcard(keys.review_index(p))
    replies = await pipe.execute()
    width = len(states) + 1
    totals = [sum(int(replies[p * width + i]) for p in keys.all_partitions()) for i in range(width)]
    return StateCounts(**dict(zip(names, totals, strict=False)), review=totals[-1])
