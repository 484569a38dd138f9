"""The worker's timers loop: fire the due timers of the partitions' waits (a wait's
timeout, a sleep's end, a step's "run the next step at"), then sleep until the earliest
one is due, never longer than the promote interval. A timer this worker parks itself (a
commit or a park that answers 'waiting') wakes the loop at once, so it is not slept past;
one parked by another worker waits at most one interval. One pipelined read of every
partition's earliest timer a pass; only the partitions with a due one are swept, batch
after batch, so a burst due together is not spread over many intervals. The script
re-checks each timer by the server's clock: racing workers (and the controller) never
fire one twice."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import anyio
import structlog
from redis.exceptions import ResponseError

from saga.state import signals, streams
from saga.state.connection import TRANSIENT_ERRORS
from saga.state.replies import num

log = structlog.get_logger("saga.worker")

MIN_SLEEP_S = 0.005
"""The shortest nap between passes (a timer our clock sees due but the server's not yet)."""
MAX_ROUNDS = 50
"""Sweeps of a partition in one pass while each still moves timers (a batch a sweep)."""


async def earliest(client: Any, keys: Any) -> dict[int, int]:
    """Each partition's earliest timer (server ms), for the partitions that have one."""
    parts = list(keys.all_partitions())
    pipe = client.pipeline(transaction=False)
    for p in parts:
        pipe.zrange(keys.waits(p), 0, 0, withscores=True)
    rows = await pipe.execute()
    return {p: int(num(r[0][1])) for p, r in zip(parts, rows, strict=True) if r}


class Timers:
    """The loop and its wake-up: ``poke()`` when this process parked a timer."""

    def __init__(self) -> None:
        self._woken = asyncio.Event()
        self.fired = 0

    def poke(self) -> None:
        self._woken.set()

    async def fire_due(self, upkeep: Any, interval_s: float) -> float:
        """One pass: fire every due timer; returns how long to sleep before the next."""
        firsts = await earliest(upkeep.client, upkeep.keys)
        now = time.time() * 1000 + upkeep.clock_offset_ms
        for p, first in firsts.items():
            if first > now:
                continue
            for _ in range(MAX_ROUNDS):
                paths = await signals.time_out_due(upkeep.sm, p, int(now))
                moved = sum(n for path, n in paths.items() if path not in ("not_due", "gone"))
                self.fired += moved
                if moved:
                    log.info("waits_timed_out", partition=p, paths=paths)
                if not paths or paths.get("not_due"):
                    break
            firsts = await earliest(upkeep.client, upkeep.keys)
            now = time.time() * 1000 + upkeep.clock_offset_ms
        if not firsts:
            return interval_s
        left = (min(firsts.values()) - now) / 1000
        return float(min(max(left, MIN_SLEEP_S), interval_s))

    async def run(self, upkeep: Any, interval_s: float) -> None:
        """Fire timers until cancelled; Redis outages are waited out (one interval)."""
        while True:
            upkeep.health.tick("timers")
            self._woken.clear()
            nap = interval_s
            try:
                nap = await self.fire_due(upkeep, interval_s)
            except TRANSIENT_ERRORS as exc:
                upkeep.health.redis_down(exc)
            except ResponseError as exc:
                if not streams.group_missing(exc):
                    raise
                log.debug("upkeep_skipped", loop="timers", error="NOGROUP")
            with anyio.move_on_after(nap):
                await self._woken.wait()
