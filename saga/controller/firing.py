"""The fire pass the controller runs over the schedules of ``saga.api.schedules``.

A pass finds the schedules whose next tick has come, starts each tick's saga under
``record_id_of(name, tick)`` (``start_saga`` is idempotent by record id), then moves the
schedule to its next tick after now (``advance_schedule``, fenced by the tick). So a
doubled tick (two controllers, a resent call) starts one saga, a fire killed between the
two calls is redone without a second saga, and ticks missed while nothing ran (the
controller down for hours) are fired once, not once each.
"""

from __future__ import annotations

from typing import Any

import structlog

from saga.api.schedules import ScheduleSpec, next_fire
from saga.state import schedules as store
from saga.state.keys import Keys

log = structlog.get_logger("saga.schedules")


async def register(client: Any, keys: Keys, saga_type: str, specs: tuple[ScheduleSpec, ...],
                   now_ms: int) -> None:  # fmt: skip
    """Store an App's schedules (replacing their definitions, keeping pauses and, when the
    cron is the same, their next tick): its controller does at start."""
    for s in specs:
        d = store.ScheduleDefinition(cron=s.cron, saga_type=saga_type, user_id=s.user_id,
                                     input=s.input.decode())  # fmt: skip
        changed, nxt = await store.add(client, keys, s.name, d, next_fire(s.cron, now_ms),
                                       replace=True)  # fmt: skip
        if changed:
            log.info("schedule_registered", schedule=s.name, saga_type=saga_type, next_ms=nxt)


class Firing:
    """The fire pass: one SagaClient per saga type, kept between passes."""

    def __init__(self, client: Any, keys: Keys, settings: Any, own: Any = None) -> None:
        """``own``: the controller's own Pipeline, whose sagas start (and whose type is
        registered) even if no worker of it ever ran: scaled to zero from the start."""
        self.client, self.keys, self.settings = client, keys, settings
        self._clients: dict[str, Any] = {}
        if own is not None:
            from saga.api.client import SagaClient

            self._clients[own.name] = SagaClient(client, keys, own, settings)

    async def once(self, now_ms: int) -> int:
        """Fire every schedule due at ``now_ms`` (in batches); returns sagas started."""
        started = 0
        for _ in range(100):  # bounded: 100 batches of DUE_BATCH a pass
            due = await store.due(self.client, self.keys, now_ms)
            for name, tick in due:
                started += await self.fire(name, tick, now_ms)
            if len(due) < store.DUE_BATCH:
                break
        return started

    async def fire(self, name: str, tick: int, now_ms: int) -> int:
        """Start the saga of ``name``'s ``tick`` and move it on; 1 if a saga was created."""
        d = await store.definition(self.client, self.keys, name)
        if d is None:  # removed since the due read
            return 0
        record = store.record_id_of(name, tick)
        created = 0
        sagas = await self._sagas(d.saga_type)
        if sagas is None:
            log.warning("schedule_type_missing", schedule=name, saga_type=d.saga_type,
                        detail="no worker or client registered the type; tick skipped")  # fmt: skip
            record = ""
        else:
            try:
                res = await sagas.start(record, d.user_id, input=d.input.encode() or None)
                created = int(res.created)
            except ValueError as exc:  # the input no longer fits the first step
                log.warning("schedule_input_refused", schedule=name, error=str(exc))
                record = ""
        nxt = next_fire(d.cron, max(tick, now_ms))
        if await store.advance(self.client, self.keys, name, tick, nxt, record) and created:
            log.info("schedule_fired", schedule=name, record_id=record, tick_ms=tick,
                     next_ms=nxt)  # fmt: skip
        return created

    async def _sagas(self, saga_type: str) -> Any:
        from saga.api.client import SagaClient
        from saga.state.types import type_info

        found = self._clients.get(saga_type)
        if found is not None and found.pipeline is not None:
            return found  # the own type: its Pipeline, not the registry's copy
        info = await type_info(self.client, self.keys, saga_type)
        if info is None:
            return None
        if found is None or found.type_info != info:
            found = SagaClient(self.client, self.keys, info, self.settings)
            self._clients[saga_type] = found
        return found
