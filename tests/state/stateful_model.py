"""The Python model of the stateful test (tests/state/test_stateful.py).

The records, steps and workers the state machine drives, the allowed-transition table
the history is checked against, and ``Rec``: what the model knows of one saga.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from saga.state.codes import RC
from saga.state.model import FailAction, SagaState

RECORDS = ("r0", "r1", "r2")
STEPS = ("router", "parser")
NEXT = {"router": "parser", "parser": ""}
PREV = {"router": "_input", "parser": "router"}
WORKERS = ("w-a", "w-b")
MAX_LEASE_EXPIRIES = 2
LEASE_MS = 600_000
LATER_MS = 600_000

P, R, W = SagaState.PENDING, SagaState.RUNNING, SagaState.WAITING_RETRY
C, F, X = SagaState.COMPLETED, SagaState.FAILED, SagaState.CANCELLED
ANY = frozenset(SagaState)
SAME = None
TRANSITIONS: dict[str, tuple[frozenset[SagaState | None], SagaState | None]] = {
    # event:          (states it may follow,        state it leads to)
    # A claim (pending -> running) is not a history event: the events that end or take
    # over an attempt may follow 'pending' as read from the history.
    "started": (frozenset({None}), P),
    "reclaimed": (frozenset({P, R}), R),
    "committed": (frozenset({P, R}), P),  # or completed when it names no next step
    "retry_scheduled": (frozenset({P, R}), W),
    "parked": (frozenset({P, R}), W),
    "dead_lettered": (frozenset({P, R}), F),  # also a quarantined current entry
    "promoted": (frozenset({W}), P),
    "retried": (ANY, P),
    "cancelled": (frozenset({P, R, W, F}), X),
    "fenced": (ANY, SAME),
    "reviewed": (ANY, SAME),
}
"""The allowed history paths, as data: every event, where it may come from, where it goes."""


@dataclass
class Rec:
    """What the model knows of one record's saga."""

    state: SagaState | None = None
    step: str = ""
    epoch: int = 0
    seq: int = 0
    entry: str = ""
    token: str = ""
    lease_live: bool = False
    due_past: bool = False
    ec: str = ""
    """The error class of its last failure (a budget park's wakes by unpark_sagas)."""
    failtok: str = ""
    attempts: dict[str, tuple[int, int]] = field(default_factory=dict)
    expiries: dict[str, tuple[int, int]] = field(default_factory=dict)
    """Attempts per step that ended by lease expiry (a separate budget), by epoch."""
    done: dict[str, str] = field(default_factory=dict)
    outputs: set[str] = field(default_factory=lambda: {"_input"})
    review: dict[str, str] = field(default_factory=dict)
    """Step -> review reason its last commit flagged (rv:<step> in the hash)."""

    def attempts_at(self, step: str) -> int:
        epoch, n = self.attempts.get(step, (0, 0))
        return n if epoch == self.epoch else 0

    def predict_requeue(self, step: str, entry: str) -> RC:
        """The outcome of the controller's requeue of ``entry``, pending at ``step``."""
        m = self
        if m.entry != entry or m.step != step or m.state not in (P, R):
            return RC.STALE_ENTRY
        if m.state == R and m.lease_live:
            return RC.LEASE_HELD
        return RC.OK

    def expiries_at(self, step: str) -> int:
        epoch, n = self.expiries.get(step, (0, 0))
        return n if epoch == self.epoch else 0

    def predict_claim(self, step: str, entry: str) -> RC:
        """The outcome of claiming ``entry`` at ``step``; the model follows it."""
        m = self
        if m.entry != entry or m.step != step or m.state not in (P, R):
            return RC.STALE_ENTRY
        if m.state == R and m.lease_live:
            return RC.LEASE_HELD
        if m.state == R and m.expiries_at(step) + 1 >= MAX_LEASE_EXPIRIES:
            m.state, m.token, m.entry, m.lease_live = F, "", "", False
            return RC.DEAD_LETTERED
        if m.state == R:  # a takeover: the lost attempt ended by lease expiry
            m.expiries[step] = (m.epoch, m.expiries_at(step) + 1)
        m.seq += 1
        m.attempts[step] = (m.epoch, m.attempts_at(step) + 1)
        m.state, m.token, m.lease_live = R, f"{m.epoch}:{m.seq}", True
        return RC.OK

    def predict_quarantine(self, step: str, entry: str) -> bool:
        """Quarantining ``entry`` dead-letters the saga if it waits on that very entry."""
        m = self
        if m.entry == entry and m.step == step and m.state in (P, R):
            m.state, m.token, m.entry, m.lease_live = F, "", "", False
            return True
        return False

    def retry_conflicts(self, from_step: str, force: bool) -> bool:
        """A manual retry is refused: no input for ``from_step``, or a live lease unforced."""
        m = self
        return PREV[from_step] not in m.outputs or (m.state == R and m.lease_live and not force)

    def apply_retry(self, from_step: str, entry: str) -> None:
        m = self
        for step in STEPS[STEPS.index(from_step) :]:  # they run again: their flags go
            m.review.pop(step, None)
        m.epoch += 1
        m.state, m.step, m.entry, m.token = P, from_step, entry, ""
        m.lease_live = m.due_past = False

    def predict_commit(self, step: str, token: str) -> RC:
        if self.done.get(step) == token:
            return RC.DUPLICATE
        if self.state == R and self.step == step and self.token == token:
            return RC.OK
        return RC.LEASE_LOST

    def apply_commit(self, step: str, token: str, next_entry: str, review: str = "") -> None:
        """A commit succeeded; ``next_entry`` is the saga's new entry when a step follows."""
        m = self
        if review:
            m.review[step] = review
        m.done[step], m.token, m.lease_live = token, "", False
        m.outputs.add(step)
        if NEXT[step]:
            m.state, m.step, m.entry = P, NEXT[step], next_entry
        else:
            m.state, m.entry = C, ""

    def predict_fail(self, step: str, token: str) -> RC:
        if self.failtok == token:
            return RC.DUPLICATE
        if self.state == R and self.step == step and self.token == token:
            return RC.OK
        return RC.LEASE_LOST

    def apply_fail(
        self, step: str, token: str, action: FailAction, due_now: bool, ec: str = "E"
    ) -> None:
        m = self
        m.failtok, m.token, m.entry, m.lease_live, m.ec = token, "", "", False, ec
        if action == FailAction.DEAD:
            m.state = F
        else:
            m.state, m.due_past = W, due_now
            if action == FailAction.PARK:
                m.attempts[step] = (m.epoch, max(m.attempts_at(step) - 1, 0))
