"""Reads for operators and metrics (``saga top|list|dlq|costs``, ``/metrics``).

Plain async functions returning Structs. Each reads what it needs in a few
pipelined round trips and never scans the keyspace: step names come from the
registry set, sagas from the indexes, dead letters from their streams.
"""

from __future__ import annotations

import contextlib
from collections import Counter, deque
from collections.abc import Iterable, Sequence
from typing import Any

import msgspec

from saga.state.errors import InvalidIdError, SagaNotFoundError
from saga.state.ids import validate_id, validate_step
from saga.state.keys import GROUP, Keys
from saga.state.model import SagaState
from saga.state.replies import num, text

ACTIVE_WITHIN_MS = 60_000
"""A consumer that read within this window counts as an active worker."""


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
    """Consumers of the group active within ACTIVE_WITHIN_MS."""
    committed: int
    failed: int
    retried: int
    dead_lettered: int


async def registered_steps(client: Any, keys: Keys) -> list[str]:
    """Every step a worker or client created groups for, sorted by name."""
    steps = []
    for name in sorted({text(n) for n in await client.smembers(keys.steps_registry())}):
        with contextlib.suppress(InvalidIdError):
            steps.append(validate_step(name))
    return steps


async def queue_stats(
    client: Any, keys: Keys, steps: Sequence[str], *, active_ms: int = ACTIVE_WITHIN_MS
) -> list[StepStats]:
    """Queue numbers of every step over every partition, in one pipeline."""
    pipe = client.pipeline(transaction=False)
    for p in keys.all_partitions():
        pipe.hgetall(keys.stats(p))
        for step in steps:
            ready = keys.ready(p, step)
            pipe.xlen(ready)
            pipe.xinfo_groups(ready)
            pipe.xpending(ready, GROUP)
            pipe.xinfo_consumers(ready, GROUP)
            pipe.zcard(keys.delayed(p, step))
            pipe.xlen(keys.dead(p, step))
    replies = iter(await pipe.execute(raise_on_error=False))
    sums = {s: _StepSums() for s in steps}
    counters: Counter[str] = Counter()
    for _ in keys.all_partitions():
        counters.update({text(k): num(v) for k, v in _ok(next(replies), {}).items()})
        for step in steps:
            sums[step].add([next(replies) for _ in range(6)], active_ms)
    return [sums[s].result(s, counters) for s in steps]


def _ok(reply: Any, default: Any) -> Any:
    """A pipelined reply, or ``default`` when it was an error (no stream, no group)."""
    return default if isinstance(reply, Exception) or reply is None else reply


class _StepSums:
    def __init__(self) -> None:
        self.length = self.pending = self.delayed = self.dead = 0
        self.lag: int | None = 0
        self.workers: set[str] = set()

    def add(self, replies: list[Any], active_ms: int) -> None:
        length, groups, pending, consumers, delayed, dead = replies
        self.length += _ok(length, 0)
        self.pending += int(_ok(pending, {}).get("pending") or 0)
        self.delayed += _ok(delayed, 0)
        self.dead += _ok(dead, 0)
        lag = _group_lag(_ok(groups, []))
        self.lag = None if self.lag is None or lag is None else self.lag + lag
        self.workers |= {
            text(c.get("name")) for c in _ok(consumers, []) if int(c.get("idle") or 0) < active_ms
        }

    def result(self, step: str, counters: Counter[str]) -> StepStats:
        own = {"length": self.length, "pending": self.pending, "delayed": self.delayed}
        done = {k: counters[f"{f}:{step}"] for k, f in _COUNTERS}
        return StepStats(step=step, lag=self.lag, dead=self.dead, workers=len(self.workers),
                         **own, **done)  # fmt: skip


_COUNTERS = (("committed", "committed"), ("failed", "failed"), ("retried", "retried"),
             ("dead_lettered", "dead"))  # fmt: skip


def _group_lag(groups: list[dict[str, Any]]) -> int | None:
    for g in groups:
        if text(g.get("name")) == GROUP:
            lag = g.get("lag")
            return None if lag is None else int(lag)
    return 0  # no group yet: nothing can be waiting for it


# -- sagas from the indexes -------------------------------------------------------


class SagaRow(msgspec.Struct, frozen=True):
    record_id: str
    user_id: str
    state: str
    step: str
    attempts: int
    """Attempts at the current step in the current epoch."""
    created_ms: int
    updated_ms: int
    cost: float
    error_class: str
    error_message: str


class ListQuery(msgspec.Struct, frozen=True, kw_only=True):
    state: SagaState | None = None
    step: str | None = None
    user: str | None = None
    since_ms: int = 0
    """Created at or after this time (epoch ms); 0 for any."""
    limit: int = 50


_FIELDS = ("uid", "state", "step", "created", "updated", "ec", "em")
_MAX_ROUNDS = 20


async def list_sagas(client: Any, keys: Keys, q: ListQuery) -> list[SagaRow]:
    """Sagas matching ``q``, newest first, read from the most selective index.

    The user index (by creation time) when a user is given, else the state index
    (by time of entering the state), else the created index; partitions are
    merged by score, hashes fetched in one pipeline per round, and members whose
    saga hash has expired are removed from the index they were read from.
    """
    steps = await registered_steps(client, keys)
    fields = [*_FIELDS, *(f"att:{s}" for s in steps), *(f"cost:{s}" for s in steps)]
    indexes = [_index(keys, p, q) for p in keys.all_partitions()]
    merge = _IndexMerge(client, indexes, q.since_ms, min(max(q.limit, 50), 1000))
    rows: list[SagaRow] = []
    seen: set[str] = set()
    for _ in range(_MAX_ROUNDS):
        batch = [c for c in await merge.take(max(q.limit - len(rows), 25) * 2) if c[1] not in seen]
        if not batch:
            break
        seen.update(rid for _, rid, _ in batch)
        pipe = client.pipeline(transaction=False)
        for _, rid, _ in batch:
            pipe.hmget(keys.saga(rid), fields)
        expired = []
        for (_, rid, index), values in zip(batch, await pipe.execute(), strict=True):
            if values[1] is None:
                expired.append((index, rid))
                continue
            row = _saga_row(rid, values, steps)
            if _matches(row, q):
                rows.append(row)
        await _prune(client, expired)
        if len(rows) >= q.limit:
            break
    return rows[: q.limit]


def _index(keys: Keys, p: int, q: ListQuery) -> str:
    if q.user:
        return keys.user_index(p, q.user)
    if q.state:
        return keys.state_index(p, q.state)
    return keys.created_index(p)


def _saga_row(rid: str, v: list[Any], steps: list[str]) -> SagaRow:
    n, step = len(_FIELDS), text(v[2])
    attempts = {s: text(v[n + i]) for i, s in enumerate(steps)}
    cost = round(sum(float(c) for c in v[n + len(steps) :] if c), 9)
    tries = num(attempts.get(step, "").rpartition(":")[2])
    return SagaRow(rid, text(v[0]), text(v[1]), step, tries, num(v[3]), num(v[4]), cost,
                   text(v[5]), text(v[6]))  # fmt: skip


def _matches(row: SagaRow, q: ListQuery) -> bool:
    return (
        (not q.user or row.user_id == q.user)
        and (not q.state or row.state == q.state.value)
        and (not q.step or row.step == q.step)
        and row.created_ms >= q.since_ms
    )


async def _prune(client: Any, expired: list[tuple[str, str]]) -> None:
    if expired:
        pipe = client.pipeline(transaction=False)
        for index, rid in expired:
            pipe.zrem(index, rid)
        await pipe.execute()


class _IndexMerge:
    """Merges per-partition index ranges (highest score first), refilled on demand."""

    def __init__(self, client: Any, indexes: list[str], since_ms: int, batch: int) -> None:
        self.client, self.indexes, self.batch = client, indexes, batch
        self.low = since_ms or "-inf"
        self.buffers: dict[str, deque[tuple[Any, float]]] = {i: deque() for i in indexes}
        self.offsets = dict.fromkeys(indexes, 0)
        self.exhausted: set[str] = set()

    async def _fill(self, indexes: list[str]) -> None:
        pipe = self.client.pipeline(transaction=False)
        for i in indexes:
            pipe.zrevrangebyscore(
                i, "+inf", self.low, start=self.offsets[i], num=self.batch, withscores=True
            )
        for i, rows in zip(indexes, await pipe.execute(), strict=True):
            self.buffers[i].extend(rows)
            self.offsets[i] += len(rows)
            if len(rows) < self.batch:
                self.exhausted.add(i)

    async def take(self, n: int) -> list[tuple[float, str, str]]:
        """Up to ``n`` (score, record id, index) triples, highest score first."""
        out: list[tuple[float, str, str]] = []
        while len(out) < n:
            empty = [i for i in self.indexes if not self.buffers[i] and i not in self.exhausted]
            if empty:
                await self._fill(empty)
            live = [i for i in self.indexes if self.buffers[i]]
            if not live:
                break
            best = max(live, key=lambda i: self.buffers[i][0][1])
            member, score = self.buffers[best].popleft()
            out.append((score, text(member), best))
        return out


# -- dead letters -------------------------------------------------------------------


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
                      num(f.get("a")), num(f.get("ep")), f.get("ec", ""), f.get("em", ""),
                      num(f.get("t")))  # fmt: skip


def _id_key(entry_id: str) -> tuple[int, int]:
    ms, _, seq = entry_id.partition("-")
    return int(ms or 0), int(seq or 0)


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
    pipe = client.pipeline(transaction=False)
    for day in days:
        for p in keys.all_partitions():
            pipe.hgetall(keys.costs(p, day))
    sums: dict[tuple[str, str], list[float]] = {}
    for raw in await pipe.execute():
        for field, value in raw.items():
            uid, _, rest = text(field).partition("|")
            step, _, n = rest.partition("|")
            if user and uid != user:
                continue
            acc = sums.setdefault((uid, step), [0.0, 0.0])
            acc[1 if n == "n" else 0] += float(value)
    return [
        CostRow(user_id=u, step=s, attempts=int(a[1]), usd=round(a[0], 9))
        for (u, s), a in sorted(sums.items())
    ]
