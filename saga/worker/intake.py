"""What a read (or a recovery pass) returned, sorted before the claim: an entry of a
newer release is left pending, a malformed one is quarantined, the rest is claimable
unless this worker already runs it."""

from __future__ import annotations

from collections.abc import Container
from typing import Any

import structlog

from saga.state import recovery
from saga.state.machine import StateMachine
from saga.worker.entries import Malformed, Newer, parse_entry
from saga.worker.observer import Observer

log = structlog.get_logger("saga.worker")


async def claimable(
    sm: StateMachine,
    observer: Observer,
    step: str,
    partition: int,
    entries: list[Any],
    running: Container[tuple[str, int, str]],
) -> list[tuple[str, str]]:
    """(entry id, record id) of the ``entries`` to claim; ``running`` holds the
    (step, partition, entry id) of the attempts this worker has in flight."""
    pairs = []
    for raw_id, fields in entries:
        entry_id = raw_id.decode() if isinstance(raw_id, bytes) else raw_id
        parsed = parse_entry(entry_id, fields)
        if isinstance(parsed, Newer):
            # Left pending: recovery hands it on after the lease, until a worker of
            # the newer release takes it (a rolling upgrade).
            log.warning("entry_left_for_newer_release", step=step, entry=entry_id)
            observer.left_for_newer(step)
        elif isinstance(parsed, Malformed):
            await recovery.quarantine(
                sm, step, partition, entry_id, parsed.reason, fields or {}, parsed.record_id
            )
            log.warning("entry_quarantined", step=step, entry=entry_id, reason=parsed.reason)
            observer.quarantined(step)
        elif (step, partition, entry_id) not in running:
            pairs.append((entry_id, parsed.record_id))
    return pairs
