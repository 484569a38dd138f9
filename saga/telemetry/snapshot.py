"""The queue numbers behind the observable gauges, read from Redis off the scrape path.

``refresh`` reads with the very functions ``saga top`` uses
(``state.queries.queue_stats`` and ``adapters.breaker.read_all``), so the two
agree; ``refresh_loop`` runs it every few seconds inside the worker's task
group. Gauge callbacks only read ``steps`` and ``breakers``.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import anyio
import structlog

from saga.adapters.breaker import BreakerStatus, read_all
from saga.state.connection import TRANSIENT_ERRORS
from saga.state.keys import Keys
from saga.state.queries import StepStats, oldest_waiting_ms, queue_stats

log = structlog.get_logger("saga.telemetry")

REFRESH_S = 5.0
"""How often a worker reads the queue numbers (at most)."""


class QueueSnapshot:
    """The last queue numbers read, and when (monotonic seconds; 0 for never)."""

    def __init__(self) -> None:
        self.steps: list[StepStats] = []
        self.breakers: dict[str, BreakerStatus] = {}
        self.oldest_age_s: dict[str, float] = {}
        """Per step, the age of its oldest entry waiting for a worker (by the server's clock)."""
        self.at = 0.0

    async def refresh(
        self, client: Any, keys: Keys, steps: Sequence[str], breakers: Sequence[str]
    ) -> None:
        """Read every step's queues (one pipeline), the oldest waiting entries and the breakers."""
        stats = await queue_stats(client, keys, list(steps))
        oldest = await oldest_waiting_ms(client, keys, list(steps))
        secs, micros = await client.time()
        now_ms = int(secs) * 1000 + int(micros) // 1000
        found = await read_all(client, keys, list(breakers)) if breakers else {}
        self.steps, self.breakers, self.at = stats, found, time.monotonic()
        self.oldest_age_s = {s: max(now_ms - ms, 0) / 1000 for s, ms in oldest.items()}

    async def refresh_loop(
        self,
        client: Any,
        keys: Keys,
        steps: Sequence[str],
        breakers: Sequence[str],
        interval_s: float = REFRESH_S,
    ) -> None:
        """Refresh until cancelled; a Redis outage keeps the last numbers."""
        while True:
            try:
                await self.refresh(client, keys, steps, breakers)
            except TRANSIENT_ERRORS as exc:
                log.debug("queue_stats_unavailable", error=type(exc).__name__)
            except Exception as exc:  # a reply it cannot read: keep serving the last numbers
                log.warning("queue_stats_failed", error=type(exc).__name__)
            await anyio.sleep(interval_s)
