"""How a refused claim is logged: what each refusal code means for the entry, and
how loud it is (a stale entry or a lease held elsewhere is routine, the rest is not)."""

from __future__ import annotations

import structlog

from saga.state.codes import RC

log = structlog.get_logger("saga.worker")

_EVENTS = {
    RC.NOT_FOUND: "entry_quarantined",
    RC.STALE_ENTRY: "stale_entry_dropped",
    RC.LEASE_HELD: "lease_held_elsewhere",
    RC.DEAD_LETTERED: "dead_lettered",
    RC.SCHEMA_NEWER: "saga_from_newer_release",
    RC.DEFERRED: "entry_deferred",
}


def log_refused(step: str, code: RC, entry: str, record: str, detail: str) -> None:
    event = _EVENTS.get(code, "claim_refused")
    level = log.debug if code in (RC.STALE_ENTRY, RC.LEASE_HELD, RC.DEFERRED) else log.warning
    level(event, step=step, entry=entry, record_id=record, detail=detail)
