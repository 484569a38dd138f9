"""Reads of the review index (``Keys.review_index``: record -> ms flagged): the sagas
waiting for a person, oldest first, and the backlog's size and age for the metrics.
Bounded: at most ``limit`` entries of each partition are read."""

from __future__ import annotations

import heapq
from typing import Any

import msgspec

from saga.state.keys import Keys
from saga.state.replies import text


class Waiting(msgspec.Struct, frozen=True, kw_only=True):
    record_id: str
    flagged_ms: int


class Backlog(msgspec.Struct, frozen=True, kw_only=True):
    count: int
    oldest_ms: int
    """When the longest-waiting saga was flagged; 0 when none waits."""


async def oldest_waiting(client: Any, keys: Keys, limit: int) -> list[Waiting]:
    """The ``limit`` sagas flagged longest ago, across every partition, oldest first."""
    pipe = client.pipeline(transaction=False)
    for p in keys.all_partitions():
        pipe.zrange(keys.review_index(p), 0, limit - 1, withscores=True)
    replies = await pipe.execute()
    rows = (Waiting(record_id=text(m), flagged_ms=int(s)) for r in replies for m, s in r)
    return heapq.nsmallest(limit, rows, key=lambda w: (w.flagged_ms, w.record_id))


async def backlog(client: Any, keys: Keys) -> Backlog:
    """How many sagas wait for review, and since when the oldest does (one pipeline)."""
    pipe = client.pipeline(transaction=False)
    for p in keys.all_partitions():
        pipe.zcard(keys.review_index(p))
        pipe.zrange(keys.review_index(p), 0, 0, withscores=True)
    replies = await pipe.execute()
    count = sum(int(n) for n in replies[0::2])
    firsts = [int(r[0][1]) for r in replies[1::2] if r]
    return Backlog(count=count, oldest_ms=min(firsts) if firsts else 0)
