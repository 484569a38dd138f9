"""The queue numbers behind the observable gauges, read from Redis off the scrape path.

``refresh`` reads with the very functions ``saga top`` uses
(``state.queries.queue_stats`` and ``adapters.breaker.read_all``), so the two
agree; ``refresh_loop`` runs it every few seconds inside the worker's task
group. Gauge callbacks only read ``steps`` and ``breakers``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

import anyio
import structlog

from saga.adapters.breaker import BreakerStatus, read_all
from saga.state.connection import TRANSIENT_ERRORS
from saga.state.keys import Keys
from saga.state.queries import StepStats, oldest_waiting_ms, queue_stats
from saga.state.review_queue import Backlog, backlog
from saga.telemetry.budget_metrics import BudgetSnapshot

log = structlog.get_logger("saga.telemetry")

REFRESH_S = 5.0
"""How often a worker reads the queue numbers (at most)."""


TypeSteps = tuple[Keys, Sequence[str]]
"""One saga type's keys and the steps to read of it."""


class QueueSnapshot:
    """The last queue numbers read, and when (monotonic seconds; 0 for never)."""

    def __init__(self) -> None:
        self.steps: list[StepStats] = []
        self.types: list[str] = []
        """The saga type of each of ``steps``."""
        self.breakers: dict[str, BreakerStatus] = {}
        self.oldest_age_s: dict[tuple[str, str], float] = {}
        """Per (type, step), the age of its oldest entry waiting for a worker (by the
        server's clock)."""
        self.review: dict[str, tuple[int, float]] = {}
        """Per type, the sagas waiting for a person's review and the oldest one's wait (s)."""
        self.at = 0.0
        self.budget = BudgetSnapshot()
        """Budget holds lapsed and (opt-in) each budgeted user's numbers."""

    def rows(self) -> list[tuple[str, StepStats]]:
        return list(zip(self.types, self.steps, strict=True))

    async def refresh(
        self, client: Any, keys: Keys, steps: Sequence[str], breakers: Sequence[str]
    ) -> None:
        """Read one type's queues (one pipeline), the oldest waiting entries and the breakers."""
        await self.refresh_types(client, [(keys, steps)], breakers)

    async def refresh_types(
        self, client: Any, types: Sequence[TypeSteps], breakers: Sequence[str]
    ) -> None:
        """``refresh`` for several saga types (the controller: every registered one)."""
        found: list[StepStats] = []
        names: list[str] = []
        oldest: dict[tuple[str, str], int] = {}
        review: dict[str, Backlog] = {}
        for keys, steps in types:
            stats = await queue_stats(client, keys, list(steps))
            found += stats
            names += [keys.saga_type] * len(stats)
            waiting = await oldest_waiting_ms(client, keys, list(steps))
            oldest.update({(keys.saga_type, s): ms for s, ms in waiting.items()})
            review[keys.saga_type] = await backlog(client, keys)
        secs, micros = await client.time()
        now_ms = int(secs) * 1000 + int(micros) // 1000
        shared = types[0][0] if types else None  # breakers are shared by every type
        got = await read_all(client, shared, list(breakers)) if breakers and shared else {}
        await self.budget.refresh(client, [k for k, _ in types])
        self.steps, self.types, self.breakers, self.at = found, names, got, time.monotonic()
        self.oldest_age_s = {k: max(now_ms - ms, 0) / 1000 for k, ms in oldest.items()}
        self.review = {t: (b.count, max(now_ms - b.oldest_ms, 0) / 1000 if b.oldest_ms else 0.0)
                       for t, b in review.items()}  # fmt: skip

    async def refresh_loop(
        self,
        client: Any,
        types: Callable[[], Sequence[TypeSteps]],
        breakers: Sequence[str],
        interval_s: float = REFRESH_S,
    ) -> None:
        """Refresh until cancelled (``types()``: what to read, asked on each pass); a Redis
        outage keeps the last numbers."""
        while True:
            try:
                await self.refresh_types(client, types(), breakers)
            except TRANSIENT_ERRORS as exc:
                log.debug("queue_stats_unavailable", error=type(exc).__name__)
            except Exception as exc:  # a reply it cannot read: keep serving the last numbers
                log.warning("queue_stats_failed", error=type(exc).__name__)
            await anyio.sleep(interval_s)
