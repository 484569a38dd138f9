"""One recovery pass of the controller: entries idle past their step's lease are put
back in their streams (``requeue_idle``), malformed or deleted ones quarantined."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import structlog

from saga.state import map_calls, recovery
from saga.state.codes import RC
from saga.state.keys import Keys
from saga.state.machine import StateMachine
from saga.state.replies import num, text
from saga.state.requeue import IdleEntry, idle_pending, requeue_idle
from saga.worker.entries import Malformed, Newer, parse_entry

log = structlog.get_logger("saga.controller")


class Leased(Protocol):
    """A step as the requeuer needs it (a ``StepSpec``, or a registered step's name)."""

    @property
    def name(self) -> str: ...
    @property
    def lease_s(self) -> float: ...


def min_idle_ms(spec: Leased, recovery_interval_s: float) -> int:
    """Idle time after which the controller requeues an entry: the step's lease, one
    recovery interval (a worker of the step, if any runs, reclaims it first) and 1 s."""
    return int((spec.lease_s + recovery_interval_s) * 1000) + 1000


def unusable(entry: IdleEntry, keys: Keys, partition: int) -> tuple[str, str] | Malformed | None:
    """The entry's (entry id, record id), why it must be quarantined, or None: an entry
    of a newer release, left for its workers (requeued, it would get our version)."""
    if entry.fields is None:
        return Malformed(entry.entry_id, "entry deleted while pending")
    parsed = parse_entry(entry.entry_id, entry.fields)
    if isinstance(parsed, Newer):
        return None
    if isinstance(parsed, Malformed):
        return parsed
    if keys.partition_of(parsed.record_id) != partition:
        return Malformed(
            entry.entry_id, f"record belongs to partition {keys.partition_of(parsed.record_id)}"
        )
    return (entry.entry_id, parsed.record_id)


class Requeuer:
    """Requeues idle entries of every step; counts what it did, per step."""

    def __init__(self, sm: StateMachine, specs: Sequence[Leased], interval_s: float) -> None:
        self.sm, self.specs, self.interval_s = sm, list(specs), interval_s
        self.requeued: dict[str, int] = {}
        self.quarantined: dict[str, int] = {}

    async def once(self) -> int:
        """One pass over every step and partition (≤100 entries each); returns requeued."""
        total = 0
        for spec in self.specs:
            for p in self.sm.keys.all_partitions():
                total += await self._partition(spec, p)
        return total

    async def _partition(self, spec: Leased, p: int) -> int:
        idle_ms = min_idle_ms(spec, self.interval_s)
        ready = self.sm.keys.ready(p, spec.name)
        pairs, items = [], []
        for entry in await idle_pending(self.sm.client, ready, min_idle_ms=idle_ms):
            found = unusable(entry, self.sm.keys, p)
            if entry.fields and b"i" in entry.fields and isinstance(found, tuple):
                # A map item's (saga.api.app_maps): its own script, which knows items.
                items.append((*found, text(entry.fields[b"i"]), num(entry.fields.get(b"ep"))))
                continue
            if found is None:
                continue
            if isinstance(found, Malformed):
                # With its record id: a saga waiting on this very entry is dead-lettered.
                await recovery.quarantine(
                    self.sm, spec.name, p, entry.entry_id, found.reason, entry.fields or {},
                    found.record_id,
                )  # fmt: skip
                log.warning(
                    "entry_quarantined", saga_type=self.sm.keys.saga_type, step=spec.name,
                    entry=entry.entry_id, reason=found.reason,
                )  # fmt: skip
                self._count(self.quarantined, spec.name, 1)
            else:
                pairs.append(found)
        outcomes = await requeue_idle(self.sm, spec.name, p, pairs, min_idle_ms=idle_ms)
        codes = await map_calls.requeue_items(self.sm, spec.name, p, items, min_idle_ms=idle_ms)
        done = sum(1 for o in outcomes if o.code == RC.OK) + codes.count(RC.OK)
        missing = sum(1 for o in outcomes if o.code == RC.NOT_FOUND)  # quarantined by the script
        if missing:
            self._count(self.quarantined, spec.name, missing)
        if done:
            log.info(
                "entries_requeued",
                saga_type=self.sm.keys.saga_type, step=spec.name, partition=p, count=done,
            )  # fmt: skip
            self._count(self.requeued, spec.name, done)
        return done

    @staticmethod
    def _count(counts: dict[str, int], step: str, n: int) -> None:
        counts[step] = counts.get(step, 0) + n
