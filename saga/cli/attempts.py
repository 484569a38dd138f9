"""A saga's attempts, read from its history and its hash (``saga show``).

Claims are not history events: an attempt is known from its end event (which
carries its duration), from a reclaim (which names the attempt whose lease
expired), or, while it runs, from the saga hash. Pure functions: no Redis, no
clock (``now_ms`` is a parameter).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import msgspec

from saga.state.model import EventType, HistoryEvent, Saga, SagaState

E = EventType
_ENDS = {
    E.COMMITTED: "committed",
    E.RETRY_SCHEDULED: "retry_scheduled",
    E.PARKED: "parked",
    E.DEAD_LETTERED: "dead_lettered",
    E.FENCED: "fenced",
}


class Attempt(msgspec.Struct, kw_only=True):
    """One claim of a step and how it ended."""

    step: str
    attempt: int
    epoch: int
    worker: str
    start_ms: int
    end_ms: int | None = None
    """None while running."""
    duration_ms: int = 0
    outcome: str = "running"
    """committed | retry_scheduled | parked | dead_lettered | fenced | lease_expired |
    cancelled | superseded | running"""
    error_class: str = ""
    error_message: str = ""
    cost: float = 0.0
    reclaimed: bool = False
    """Started by taking over an expired lease."""
    step_version: int = 1
    """Ended (committed or failed): the version of the step's code that ran
    (``@app.step(version=...)``)."""


Row = Attempt | HistoryEvent


def pair(events: Sequence[HistoryEvent], now_ms: int, saga: Saga | None = None) -> list[Row]:
    """The rows in history order: an Attempt per step run and the other events as markers.

    An attempt is drawn from its end event (which carries its duration), from a
    reclaim (which names the attempt whose lease expired), or, while it runs,
    from the saga hash (``saga``): claims are not history events."""
    rows: list[Row] = []
    live: list[Attempt] = []
    for event in events:
        e = event
        if e.item >= 0:  # a map's item: rows of its own, "parse[3]" (saga.api.app_maps)
            e = msgspec.structs.replace(e, step=f"{e.step}[{e.item}]")
        if e.event == E.RECLAIMED:
            same = lambda a: a.step == e.step and a.epoch == e.epoch  # noqa: B023, E731
            # The attempt it took over: live if it was itself a reclaim, else drawn here.
            if not _close_all(live, e, "lease_expired", same) and e.previous_claimed_ms:
                rows.append(_lost(e))
            a = Attempt(
                step=e.step,
                attempt=e.attempt,
                epoch=e.epoch,
                worker=e.worker,
                start_ms=e.at_ms,
                reclaimed=True,
            )
            rows.append(a)
            live.append(a)
        elif e.event in _ENDS:
            found = _match(live, e)
            if found is None and e.event == E.FENCED:
                rows.append(e)  # a late result of an attempt already closed
                continue
            if found is None:  # an attempt known from its end: it started `duration` before
                found = Attempt(
                    step=e.step,
                    attempt=e.attempt,
                    epoch=e.epoch,
                    worker=e.worker,
                    start_ms=e.at_ms - e.duration_ms,
                )
                rows.append(found)
            else:
                live.remove(found)
            _end(found, e, _ENDS[e.event])
        else:
            if e.event == E.CANCELLED and e.previous_claimed_ms and not live:
                # The attempt it fenced out (known from the hash only while it ran).
                rows.append(_lost(e, "cancelled"))
            rows.append(e)
            if e.event == E.CANCELLED:
                _close_all(live, e, "cancelled", lambda a: True)
            elif e.event == E.RETRIED:
                _close_all(live, e, "superseded", lambda a: a.epoch < e.epoch)  # noqa: B023
            elif e.event == E.COMPENSATING:  # cancel --compensate fenced what ran
                _close_all(live, e, "cancelled", lambda a: a.epoch < e.epoch)  # noqa: B023
    for running in _running(saga, live):
        rows.append(running)
        live.append(running)
    for a in live:
        a.duration_ms = max(0, now_ms - a.start_ms)
    return rows


def _lost(e: HistoryEvent, outcome: str = "lease_expired") -> Attempt:
    """The attempt a reclaim took over (its lease expired), or a cancel fenced out
    (``outcome`` cancelled): claimed at ``pt`` by ``pw``."""
    return Attempt(
        step=e.step,
        attempt=e.previous_attempt,
        epoch=e.epoch,
        worker=e.previous_worker,
        start_ms=e.previous_claimed_ms,
        end_ms=e.at_ms,
        duration_ms=max(0, e.at_ms - e.previous_claimed_ms),
        outcome=outcome,
    )


def _running(saga: Saga | None, live: list[Attempt]) -> list[Attempt]:
    """The attempts running now, from the saga hash, unless a reclaim already drew them
    (an undo attempt runs in a compensating saga that holds a lease; while branches run,
    each lane running holds its own)."""
    if saga is None:
        return []
    if saga.lanes:
        now = [(x.step, x.worker, x.claimed_ms) for x in saga.lanes if x.state == "running"]
    elif saga.claimed_ms and (
        saga.state == SagaState.RUNNING or (saga.state == SagaState.COMPENSATING and saga.token)
    ):
        now = [(saga.step, saga.worker, saga.claimed_ms)]
    else:
        return []
    return [
        Attempt(step=step, attempt=saga.attempts.get(step, 0), epoch=saga.epoch, worker=worker,
                start_ms=claimed)
        for step, worker, claimed in now
        if not any(a.step == step and a.epoch == saga.epoch for a in live)
    ]  # fmt: skip


def _match(live: list[Attempt], e: HistoryEvent) -> Attempt | None:
    epoch = e.epoch or _token_epoch(e.detail)
    same = [a for a in live if a.step == e.step and (not epoch or a.epoch == epoch)]
    exact = [a for a in same if a.worker == e.worker]
    if e.event == E.FENCED:
        return exact[0] if exact else None
    by_number = [a for a in same if a.attempt == e.attempt]
    return next(iter(exact or by_number or same), None)


def _token_epoch(detail: str) -> int:
    m = re.search(r"stale token (\d+):", detail)
    return int(m.group(1)) if m else 0


def _end(a: Attempt, e: HistoryEvent, outcome: str) -> None:
    a.end_ms, a.outcome = e.at_ms, outcome
    a.duration_ms = max(0, e.at_ms - a.start_ms)
    a.error_class, a.error_message, a.cost = e.error_class, e.error_message, e.cost
    a.step_version = e.step_version  # a commit's, a failure's (retry, park, dead letter)


def _close_all(live: list[Attempt], e: HistoryEvent, outcome: str, which: Any) -> bool:
    """End the live attempts ``which`` selects; True if there were any."""
    closing = [a for a in live if which(a)]
    for a in closing:
        live.remove(a)
        a.end_ms, a.outcome, a.duration_ms = e.at_ms, outcome, max(0, e.at_ms - a.start_ms)
    return bool(closing)
