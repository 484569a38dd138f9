"""Typed shapes of what the state machine stores and returns (msgspec Structs)."""

from __future__ import annotations

from enum import StrEnum

import msgspec

SCHEMA_VERSION = 1
"""Version of the saga hash and stream entry layout; scripts refuse newer data."""


class SagaState(StrEnum):
    """Where a saga is. The Lua scripts receive this table as ``STATE``."""

    PENDING = "pending"
    RUNNING = "running"
    WAITING_RETRY = "waiting_retry"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"
    COMPENSATING = "compensating"
    """The compensations of the committed steps run, latest step first (``undo:<step>``)."""
    COMPENSATED = "compensated"
    """Every committed step with a compensation was undone."""
    COMPENSATION_FAILED = "compensation_failed"
    """A compensation failed for good: dead-lettered at its ``undo:<step>``."""
    WAITING = "waiting"
    """Parked at a wait (``@app.wait``: for a signal, or ``@app.sleep``: for its timer)
    with no worker holding it; a signal or the timer sweep moves it on (state/signals)."""

    @property
    def terminal(self) -> bool:
        return self in _TERMINAL


_TERMINAL = frozenset(
    {
        SagaState.COMPLETED,
        SagaState.FAILED,
        SagaState.CANCELLED,
        SagaState.COMPENSATED,
        SagaState.COMPENSATION_FAILED,
    }
)

UNDO_PREFIX = "undo:"
"""A compensation runs as the pseudo-step ``undo:<step>``: its own streams, attempts and
history rows, claimed by the workers of ``<step>``."""


def undo_of(step: str) -> str:
    return UNDO_PREFIX + step


def is_undo(step: str) -> bool:
    return step.startswith(UNDO_PREFIX)


def undone_step(step: str) -> str:
    """The step an ``undo:<step>`` undoes (``step`` itself when it is not an undo)."""
    return step[len(UNDO_PREFIX) :] if is_undo(step) else step


class EventType(StrEnum):
    """History event types, one per transition."""

    STARTED = "started"
    RECLAIMED = "reclaimed"
    COMMITTED = "committed"
    RETRY_SCHEDULED = "retry_scheduled"
    PARKED = "parked"
    DEAD_LETTERED = "dead_lettered"
    PROMOTED = "promoted"
    RETRIED = "retried"
    CANCELLED = "cancelled"
    FENCED = "fenced"
    REVIEWED = "reviewed"
    """A person accepted the results a step had flagged for review."""
    REVIEW_DECIDED = "review_decided"
    """A reviewer decided one value of a flagged step (accept, correct, reject, add); the
    event's ``review_decision`` holds the old and the new value (sealed under a data key)."""
    REVIEW_COMPLETED = "review_completed"
    """The last flagged value was decided: the reviewed output replaced the step's, the
    machine's original is kept (``orig:<step>``, and the event's ``original``), and
    ``next_step`` re-runs on it in a new epoch."""
    WAITING = "waiting"
    """The saga parked at a wait (for its event, until its timer is due, or both)."""
    SIGNAL_KEPT = "signal_kept"
    """A signal arrived before the saga reached its wait: kept, consumed there."""
    SIGNAL_EXPIRED = "signal_expired"
    """A kept signal was older than its bound when the saga reached the wait: dropped, not
    consumed (``detail``: the event and the signal's id); the saga waits for a new one."""
    SIGNALLED = "signalled"
    """A signal ended the wait (received then, or kept before); ``next_step`` runs on it."""
    GATE_PASSED = "gate_passed"
    """A review gate let the saga on (``detail``: not flagged, or its review accepted);
    ``next_step`` runs on the gate's input."""
    WAIT_TIMED_OUT = "wait_timed_out"
    """The wait's timer was due: its declared path (``detail``) was taken."""
    TIMER_FIRED = "timer_fired"
    """A step's "run the next step at" time came (``ctx.run_next_at``): ``step`` was
    enqueued; ``due_ms`` is when it was due."""
    COMPENSATING = "compensating"
    """Compensation began (a permanent failure, ``saga cancel --compensate``, or a
    retry of a failed compensation); ``next_step`` names the first undo, or is empty
    when nothing needed undoing (the saga is then compensated at once)."""
    SPAWNED = "spawned"
    """A map's parent committed: its items were spawned (``detail``: how many)."""
    FANNED_IN = "fanned_in"
    """A map's last item ended: the outputs were gathered, ``next_step`` runs on them."""


class FailAction(StrEnum):
    """What a failed attempt leads to (decided in Python, applied in Lua)."""

    RETRY = "retry"
    PARK = "park"
    DEAD = "dead"


PARK_REASONS = {"CircuitOpenError": "circuit", "BudgetExceededError": "budget"}
"""Why a waiting saga is parked rather than retrying, by the error class stored with it
(the classes are ``saga.steps.errors``'): ``saga show``, ``saga list --state parked``."""


def park_reason(error_class: str) -> str:
    """``budget`` or ``circuit`` for a parked step's error class; "" for any other."""
    return PARK_REASONS.get(error_class, "")


class Saga(msgspec.Struct, frozen=True, kw_only=True):
    """A saga as stored in its Redis hash."""

    v: int
    record_id: str
    user_id: str
    state: SagaState
    step: str
    epoch: int
    created_ms: int
    updated_ms: int
    token: str = ""
    worker: str = ""
    lease_until_ms: int = 0
    claimed_ms: int = 0
    """When the running attempt was claimed (history records it once it ends)."""
    due_ms: int = 0
    """A retry's due time; while ``waiting``, its timer's (0: none)."""
    wait_event: str = ""
    """While ``waiting``: the event it waits for ("" for a sleep)."""
    wait_review: bool = False
    """While ``waiting``: at a review gate, for a person's review (``app.review_gate``)."""
    lanes: tuple[Lane, ...] = ()
    """While branches run (``lua/includes/lanes.lua``): each one in flight; the saga's own
    token, worker and lease are then empty."""
    maps: tuple[MapRun, ...] = ()
    """The map steps run in this epoch (``lua/includes/map_items.lua``): counts and items."""
    entry: str = ""
    document: str = ""
    trace: str = ""
    error_class: str = ""
    error_message: str = ""
    """Safe to show anyone (``saga.steps.errors``)."""
    error_detail: str = ""
    """The operator's detail of the error, opened with the data key ("" without one).
    Never shown to a console viewer."""
    attempts: dict[str, int] = {}
    outputs: dict[str, str] = {}
    """Step name to the raw JSON output it committed."""
    undone_outputs: dict[str, str] = {}
    """Step name to the output it had committed before its compensation undid it (kept
    so that a compensated saga still shows what its steps produced)."""
    costs: dict[str, float] = {}
    review: dict[str, str] = {}
    """Step name to why its output needs a person's look; empty when nothing was flagged.
    A completed saga with a review is "completed, needs review"."""

    @property
    def total_cost(self) -> float:
        return sum(self.costs.values())

    @property
    def needs_review(self) -> bool:
        return bool(self.review)

    @property
    def parked_reason(self) -> str:
        """``budget`` or ``circuit`` while it waits with its attempt refunded; else ""."""
        return park_reason(self.error_class) if self.state == SagaState.WAITING_RETRY else ""


class Lane(msgspec.Struct, frozen=True, kw_only=True):
    """A branch's step in flight: its own state (pending, running, waiting_retry), and
    while it runs its worker and claim time."""

    step: str
    state: str
    worker: str = ""
    claimed_ms: int = 0


class MapItem(msgspec.Struct, frozen=True, kw_only=True):
    """One item of a map: pending, running, waiting_retry, done or failed."""

    item: int
    state: str
    attempts: int = 0
    worker: str = ""
    """While it runs: its worker."""
    error: str = ""
    """Its last failure (safe to show: ``saga.steps.errors``)."""


class MapRun(msgspec.Struct, frozen=True, kw_only=True):
    """A map step's items in this epoch: how many, by state (pending counts the ones not
    released yet), and each one."""

    step: str
    items: int
    done: int = 0
    running: int = 0
    waiting: int = 0
    failed: int = 0
    pending: int = 0
    rows: tuple[MapItem, ...] = ()


class HistoryEvent(msgspec.Struct, frozen=True, kw_only=True):
    """One entry of a record's history stream."""

    id: str
    event: EventType
    at_ms: int
    step: str = ""
    attempt: int = 0
    epoch: int = 0
    worker: str = ""
    duration_ms: int = 0
    error_class: str = ""
    error_message: str = ""
    cost: float = 0.0
    next_step: str = ""
    due_ms: int = 0
    detail: str = ""
    previous_attempt: int = 0
    """reclaimed: the attempt whose lease expired, its worker and when it was claimed."""
    previous_worker: str = ""
    previous_claimed_ms: int = 0
    review: str = ""
    """committed: why the step's output was flagged for review."""
    review_decision: str = ""
    """review_decided: the decision with the old and the new value (JSON; sealed text
    under a data key, opened by ``saga.state.review``)."""
    review_version: int = 0
    """review_decided: the review's version after the decision."""
    step_version: int = 1
    """committed: the version of the step's code that ran (``@app.step(version=...)``;
    1 when the row records none)."""
    item: int = -1
    """A map item's row (its index; -1: not an item's)."""


class Claim(msgspec.Struct, frozen=True, kw_only=True):
    """Everything a step attempt needs, returned by the claim script in one round trip."""

    record_id: str
    user_id: str
    step: str
    entry_id: str
    attempt: int
    epoch: int
    token: str
    lease_until_ms: int
    input: bytes
    document: str
    trace: str
    created_ms: int
    pages: bytes | None = None
    expired: int = 0
    """Attempts at this step in this epoch that ended by lease expiry (this one not
    included): they do not count against the step's max attempts."""
    extra: dict[str, bytes] = {}
    item: int = -1
    """A map step's item (its index in the parent's list; -1: not a map's attempt)."""

    @property
    def idempotency_key(self) -> str:
        """Stable across re-runs of the same step in the same epoch (not per attempt)."""
        if self.item >= 0:
            return f"{self.record_id}:{self.step}:{self.item}:e{self.epoch}"
        return f"{self.record_id}:{self.step}:e{self.epoch}"

    @property
    def charged(self) -> int:
        """Attempts spent against the step's max attempts, this one included."""
        return self.attempt - self.expired
