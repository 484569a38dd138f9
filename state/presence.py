"""Which workers are alive: each renews a presence key with a TTL, so a worker killed
with -9 drops out within ``PRESENCE_TTL_S`` (a consumer of a stream group stays
listed until pruned, and its idle time also grows while it is busy with long steps).

The presence holds what an operator needs to find the worker: its saga type and
steps, host, pid and health address (which may be a fallback port). Not on any transition path: one
SET every ``PRESENCE_EVERY_S`` per worker.
"""

from __future__ import annotations

import contextlib
from typing import Any

import msgspec

from saga.state.errors import InvalidIdError
from saga.state.keys import DEFAULT_TYPE, Keys
from saga.state.replies import text

PRESENCE_EVERY_S = 5.0
PRESENCE_TTL_S = 15
"""A worker unseen for this long is counted dead (three missed renewals)."""


class Presence(msgspec.Struct, frozen=True, kw_only=True):
    worker: str
    saga_type: str = DEFAULT_TYPE
    """The saga type whose steps it runs (a worker serves one type; a presence written
    before types has none: the default type's)."""
    steps: tuple[str, ...]
    host: str
    pid: int
    health: str = ""
    """``host:port`` of /livez, /readyz, /metrics; "" without a health server."""
    started_ms: int = 0


async def announce(client: Any, keys: Keys, presence: Presence, now_ms: int) -> None:
    """Write (or renew) this worker's presence for ``PRESENCE_TTL_S``, and list its name
    in the registry (whose names unseen for an hour are dropped here too)."""
    pipe = client.pipeline(transaction=False)
    body = msgspec.json.encode(presence)
    pipe.set(keys.worker_presence(presence.worker), body, ex=PRESENCE_TTL_S)
    pipe.zadd(keys.workers_registry(), {presence.worker: now_ms})
    pipe.zremrangebyscore(keys.workers_registry(), "-inf", now_ms - _FORGET_MS)
    await pipe.execute()


async def withdraw(client: Any, keys: Keys, worker: str) -> None:
    """A worker that stops cleanly leaves at once."""
    pipe = client.pipeline(transaction=False)
    pipe.delete(keys.worker_presence(worker))
    pipe.zrem(keys.workers_registry(), worker)
    await pipe.execute()


async def live_workers(client: Any, keys: Keys) -> list[Presence]:
    """Every worker whose presence has not expired, most recently seen first (two round
    trips; the registry is bounded by the hour-long forgetting in ``announce``)."""
    names = [text(n) for n in await client.zrevrange(keys.workers_registry(), 0, _MAX - 1)]
    if not names:
        return []
    pipe = client.pipeline(transaction=False)
    for name in names:
        with contextlib.suppress(InvalidIdError):
            pipe.get(keys.worker_presence(name))
    found = []
    for raw in await pipe.execute(raise_on_error=False):
        if isinstance(raw, bytes | str):
            with contextlib.suppress(msgspec.DecodeError):
                found.append(msgspec.json.decode(raw, type=Presence))
    return found


_FORGET_MS = 3_600_000
_MAX = 1000
