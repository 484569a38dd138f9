"""Return codes of the Lua transitions, and the one place that turns them into exceptions.

The loader injects this table into every script as ``RC``, so Lua and Python
can never disagree on a number; a test checks every ``RC.NAME`` a script uses
and every code its header lists against this enum.
"""

from __future__ import annotations

from enum import IntEnum

from saga.state.errors import (
    LeaseLostError,
    ReviewConflictError,
    SagaExistsError,
    SagaNotFoundError,
    ScriptVersionError,
    StateError,
    StepConflictError,
)


class RC(IntEnum):
    OK = 0
    DUPLICATE = 1
    """The same operation (or attempt) was already applied; the recorded result is returned."""
    NOT_FOUND = 10
    USER_MISMATCH = 11
    LEASE_LOST = 12
    WRONG_STATE = 13
    BUSY = 14
    """The step is running under a live lease and the operator did not force it."""
    STALE_ENTRY = 15
    """A ready-stream entry that no longer matches the saga; it was acknowledged and dropped."""
    SCHEMA_NEWER = 16
    LEASE_HELD = 17
    """Claim found another live lease on the saga; the entry is left pending."""
    DEAD_LETTERED = 18
    """Claim found the lease expired on the last allowed attempt and dead-lettered the saga."""
    DEFERRED = 19
    """Claim set the entry aside: its user held their per-user cap of slots at the step."""
    CONFLICT = 20
    """A review decision was refused: another decision changed the review since it was read."""
    OVER_BUDGET = 21
    """reserve_budget: the call's worst-case cost does not fit in its user's budget."""
    SPAWNED = 22
    """claim_items: a map step's own entry spawned its items (it runs no step code)."""


_ERRORS: dict[RC, type[StateError]] = {
    RC.NOT_FOUND: SagaNotFoundError,
    RC.USER_MISMATCH: SagaExistsError,
    RC.LEASE_LOST: LeaseLostError,
    RC.WRONG_STATE: StepConflictError,
    RC.BUSY: StepConflictError,
    RC.STALE_ENTRY: StepConflictError,
    RC.SCHEMA_NEWER: ScriptVersionError,
    RC.LEASE_HELD: StepConflictError,
    RC.DEAD_LETTERED: StepConflictError,
    RC.DEFERRED: StepConflictError,
    RC.CONFLICT: ReviewConflictError,
    RC.OVER_BUDGET: StepConflictError,
    RC.SPAWNED: StepConflictError,
}

_MESSAGES: dict[RC, str] = {
    RC.NOT_FOUND: "no saga exists for record {record_id!r}",
    RC.USER_MISMATCH: "record {record_id!r} already has a saga for another user",
    RC.LEASE_LOST: "the lease on record {record_id!r} was superseded (stale fencing token)",
    RC.WRONG_STATE: "record {record_id!r} is not in the state or at the step asked",
    RC.BUSY: "record {record_id!r} is running a step now; use --force to retry anyway",
    RC.STALE_ENTRY: "the queue entry for record {record_id!r} is stale",
    RC.SCHEMA_NEWER: "record {record_id!r} was written by a newer release of saga",
    RC.LEASE_HELD: "record {record_id!r} is leased by another executor",
    RC.DEAD_LETTERED: "record {record_id!r} was dead-lettered after its lease expired too often",
    RC.DEFERRED: "record {record_id!r} waits: its user holds their share of the step's slots",
    RC.CONFLICT: "another reviewer decided on record {record_id!r} first; reload its review",
    RC.OVER_BUDGET: "the user of record {record_id!r} has no budget left for this model call",
    RC.SPAWNED: "the map entry of record {record_id!r} spawned its items",
}


_BY_REPLY: dict[object, RC] = {}
"""Codes as scripts return them (int or bytes) → RC: a dict lookup per reply instead
of an enum call (~0.3 µs, on every claimed entry and every commit)."""


def to_code(value: object) -> RC:
    """Parse a script's code, refusing numbers this release does not know."""
    try:
        return _BY_REPLY[value]
    except (KeyError, TypeError):  # TypeError: an unhashable reply
        pass
    try:
        return RC(int(value))  # type: ignore[call-overload]
    except (TypeError, ValueError) as exc:
        raise ScriptVersionError(f"unknown script return code {value!r}") from exc


def raise_for(code: RC, record_id: str, detail: str = "") -> None:
    """Raise the exception for a refusal code; return quietly for OK and DUPLICATE."""
    if code in (RC.OK, RC.DUPLICATE):
        return
    message = _MESSAGES[code].format(record_id=record_id)
    raise _ERRORS[code](f"{message}{': ' + detail if detail else ''}")


_BY_REPLY.update({int(c): c for c in RC})
_BY_REPLY.update({str(int(c)).encode(): c for c in RC})
