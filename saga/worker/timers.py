"""The worker's timers loop: fire the due timers of the partitions' waits (a wait's
timeout, a sleep's end, a step's "run the next step at"), then sleep until the earliest
one is due, never longer than the promote interval (a timer parked meanwhile fires at most
that late). Due ones are swept batch after batch, so a burst of timers due together is
not spread over many intervals. The script re-checks each timer by the server's clock:
racing workers (and the controller) never fire one twice."""

from __future__ import annotations

import time
from typing import Any

import anyio
import structlog
from redis.exceptions import ResponseError

from saga.state import streams
from saga.state.connection import TRANSIENT_ERRORS
from saga.state.replies import num

log = structlog.get_logger("saga.worker")

MIN_SLEEP_S = 0.005
"""The shortest nap between sweeps (a timer our clock sees due but the server's not yet)."""
MAX_ROUNDS = 50
"""Sweeps of one pass while each still moves timers (a batch of each partition a sweep)."""


async def next_due_ms(client: Any, keys: Any) -> int | None:
    """The earliest timer of every partition (server ms), or None when there is none."""
    pipe = client.pipeline(transaction=False)
    for p in keys.all_partitions():
        pipe.zrange(keys.waits(p), 0, 0, withscores=True)
    firsts = [rows[0][1] for rows in await pipe.execute() if rows]
    return int(min(num(s) for s in firsts)) if firsts else None


async def fire_due(upkeep: Any, interval_s: float) -> float:
    """One pass: fire every due timer; returns how long to sleep before the next pass."""
    for _ in range(MAX_ROUNDS):
        now = time.time() * 1000 + upkeep.clock_offset_ms
        if not await upkeep.time_out_waits(int(now)):
            break
    first = await next_due_ms(upkeep.client, upkeep.keys)
    if first is None:
        return interval_s
    left = (first - (time.time() * 1000 + upkeep.clock_offset_ms)) / 1000
    return float(min(max(left, MIN_SLEEP_S), interval_s))


async def run(upkeep: Any, interval_s: float) -> None:
    """Fire timers until cancelled; Redis outages are waited out (one interval)."""
    while True:
        upkeep.health.tick("timers")
        nap = interval_s
        try:
            nap = await fire_due(upkeep, interval_s)
        except TRANSIENT_ERRORS as exc:
            upkeep.health.redis_down(exc)
        except ResponseError as exc:
            if not streams.group_missing(exc):
                raise
            log.debug("upkeep_skipped", loop="timers", error="NOGROUP")
        await anyio.sleep(nap)
