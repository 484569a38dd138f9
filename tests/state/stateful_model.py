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
UNDOABLE = ("parser", "router")
"""Both steps have a compensation; latest first, as Pipeline.undoable() gives them."""
UNDO_STEPS = tuple(f"undo:{s}" for s in reversed(UNDOABLE))
WORKERS = ("w-a", "w-b")
MAX_LEASE_EXPIRIES = 2
LEASE_MS = 600_000
LATER_MS = 600_000

P, R, W = SagaState.PENDING, SagaState.RUNNING, SagaState.WAITING_RETRY
C, F, X = SagaState.COMPLETED, SagaState.FAILED, SagaState.CANCELLED
CG, CD, CF = SagaState.COMPENSATING, SagaState.COMPENSATED, SagaState.COMPENSATION_FAILED
WT = SagaState.WAITING
ANY = frozenset(SagaState)
SAME = None
TRANSITIONS: dict[str, tuple[frozenset[SagaState | None], SagaState | None]] = {
    # event:          (states it may follow,        state it leads to)
    # A claim (pending -> running) is not a history event: the events that end or take
    # over an attempt may follow 'pending' as read from the history.
    "started": (frozenset({None}), P),
    "reclaimed": (frozenset({P, R}), R),
    "committed": (frozenset({P, R}), P),  # or completed (no next step), waiting ('due')
    "retry_scheduled": (frozenset({P, R}), W),
    "parked": (frozenset({P, R}), W),
    "dead_lettered": (frozenset({P, R}), F),  # also a quarantined current entry
    "promoted": (frozenset({W}), P),
    "retried": (ANY, P),
    "cancelled": (frozenset({P, R, W, WT, F, CG, CF}), X),
    "compensating": (frozenset({P, R, W, WT, F, X, CF}), CG),  # or compensated: none to undo
    "timer_fired": (frozenset({WT}), P),  # a run-next-at timer: its step's entry added
    "signal_kept": (frozenset({P, R, W, WT}), SAME),  # for a wait to come (none here ends)
    "fenced": (ANY, SAME),
    "reviewed": (ANY, SAME),
    "review_decided": (frozenset({C}), SAME),
    "review_completed": (frozenset({C}), SAME),  # or pending when a step re-runs ('n')
}
"""The allowed history paths, as data: every event, where it may come from, where it goes."""

UNDO_TRANSITIONS: dict[str, tuple[frozenset[SagaState | None], SagaState | None]] = {
    # The events of an undo step (s = undo:<step>): the saga stays compensating.
    "reclaimed": (frozenset({CG}), CG),
    "committed": (frozenset({CG}), CG),  # or compensated when it names no next undo
    "retry_scheduled": (frozenset({CG}), CG),
    "parked": (frozenset({CG}), CG),
    "dead_lettered": (frozenset({CG}), CF),
    "promoted": (frozenset({CG}), CG),
}


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
    pec: str = ""
    """Why its undo waits when the undo was parked (fail_undo's 'pec'; its ec is kept)."""
    failtok: str = ""
    dfr: str = ""
    """The entry its last deferral (per-user cap) set aside: the saga waits with no entry."""
    attempts: dict[str, tuple[int, int]] = field(default_factory=dict)
    expiries: dict[str, tuple[int, int]] = field(default_factory=dict)
    """Attempts per step that ended by lease expiry (a separate budget), by epoch."""
    done: dict[str, str] = field(default_factory=dict)
    outputs: set[str] = field(default_factory=lambda: {"_input"})
    review: dict[str, str] = field(default_factory=dict)
    """Step -> review reason its last commit flagged (rv:<step> in the hash)."""
    rvv: int = 0
    """The review's version: decisions recorded (decide_review)."""
    plan: list[str] = field(default_factory=list)
    """Compensating: the steps left to undo, the current one first."""
    timer_past: bool = False
    """Waiting on a run-next-at timer that is due (forced due by the fire_timers rule)."""
    stale_timer: bool = False
    """Its timer's member is still in the waits though it waits no more (an operator's
    retry leaves it; the sweep drops it as 'gone' when due)."""
    kept: dict[str, str] = field(default_factory=dict)
    """Signals kept for a wait to come: event -> signal id (sig:/sgi:<event>, 'nsk')."""
    seen: set[str] = field(default_factory=set)
    """Signal ids delivered (sid:<id>, 'nsi'): a resend of one is a no-op."""
    gone: bool = False
    """Pruned at its retention's end (hash and history deleted): never started again, so
    a deferral of an older epoch still waiting is released for a saga that is gone."""

    @property
    def undo_waiting(self) -> bool:
        """Compensating, its undo waiting for a retry (no entry, no lease)."""
        return self.state == CG and not self.entry and not self.token

    def running(self, step: str) -> bool:
        """An attempt at ``step`` holds (or held) the lease: the state a claim made."""
        if step.startswith("undo:"):
            return self.state == CG and self.step == step and bool(self.token)
        return self.state == R and self.step == step

    def claimable(self, step: str, entry: str, ep: int | None = None) -> bool:
        """Waits on ``entry`` at ``step``; a deferred saga (pending, no entry) takes an
        entry of its record at the step as its released one if the entry is of its epoch
        (``ep``: claim_steps, requeue_idle and quarantine_entry read it; None: any)."""
        if self.step != step:
            return False
        if self.entry == "" and self.state == P and not step.startswith("undo:"):
            return ep is None or ep == self.epoch
        if self.entry != entry:
            return False
        return self.state == CG if step.startswith("undo:") else self.state in (P, R)

    def begin_compensation(self, entry_of: object) -> None:
        """compensate_saga / fail_step's dead path: a new epoch, the plan, the first undo."""
        m = self
        m.epoch += 1
        m.plan = [s for s in UNDOABLE if s in m.outputs]
        m.token, m.lease_live, m.due_past = "", False, False
        if m.plan:
            m.state, m.step = CG, f"undo:{m.plan[0]}"
            m.entry = entry_of()  # type: ignore[operator]
        else:
            m.state, m.entry = CD, ""

    def attempts_at(self, step: str) -> int:
        epoch, n = self.attempts.get(step, (0, 0))
        return n if epoch == self.epoch else 0

    def predict_requeue(self, step: str, entry: str, ep: int) -> RC:
        """The outcome of the controller's requeue of ``entry`` (of epoch ``ep``), pending
        at ``step``."""
        m = self
        if m.gone:
            return RC.NOT_FOUND
        if not m.claimable(step, entry, ep):
            return RC.STALE_ENTRY
        if m.running(step) and m.lease_live:
            return RC.LEASE_HELD
        return RC.OK

    def expiries_at(self, step: str) -> int:
        epoch, n = self.expiries.get(step, (0, 0))
        return n if epoch == self.epoch else 0

    def waits_for(self, step: str, entry: str, ep: int) -> bool:
        """Pending at ``step`` on ``entry``, or deferred (see claimable)."""
        return self.state == P and self.claimable(step, entry, ep)

    def defer(self, entry: str) -> None:
        self.entry, self.dfr = "", entry

    def predict_claim(self, step: str, entry: str, ep: int) -> RC:
        """The outcome of claiming ``entry`` (of epoch ``ep``) at ``step``; the model
        follows it (but for compensation after a dead letter: the caller's)."""
        m = self
        if m.gone:
            return RC.NOT_FOUND
        if m.state == P and m.entry == "" and m.dfr == entry and m.step == step:
            return RC.DEFERRED  # a re-sent batch
        if not m.claimable(step, entry, ep):
            return RC.STALE_ENTRY
        undo = step.startswith("undo:")
        if m.running(step) and m.lease_live:
            return RC.LEASE_HELD
        if m.running(step) and m.expiries_at(step) + 1 >= MAX_LEASE_EXPIRIES:
            m.state, m.token, m.entry, m.lease_live = CF if undo else F, "", "", False
            return RC.DEAD_LETTERED
        if m.running(step):  # a takeover: the lost attempt ended by lease expiry
            m.expiries[step] = (m.epoch, m.expiries_at(step) + 1)
        m.seq += 1
        m.entry = entry  # the same, or a deferred saga's released entry
        m.attempts[step] = (m.epoch, m.attempts_at(step) + 1)
        m.state, m.token, m.lease_live = CG if undo else R, f"{m.epoch}:{m.seq}", True
        return RC.OK

    def predict_quarantine(self, step: str, entry: str, ep: int) -> bool:
        """Quarantining ``entry`` (of epoch ``ep``) dead-letters the saga if it waits on
        that very entry (a deferred saga: a release of its epoch)."""
        m = self
        if m.claimable(step, entry, ep):
            m.state = CF if step.startswith("undo:") else F
            m.token, m.entry, m.lease_live = "", "", False
            return True
        return False

    def retry_conflicts(self, from_step: str, force: bool) -> bool:
        """A manual retry is refused: no input for ``from_step``, or a live lease unforced."""
        m = self
        if m.state == CG:  # undos run: a retry waits for them (or a cancel)
            return True
        return PREV[from_step] not in m.outputs or (m.state == R and m.lease_live and not force)

    def apply_retry(self, from_step: str, entry: str) -> None:
        m = self
        m.stale_timer = m.stale_timer or m.state == WT
        for step in STEPS[STEPS.index(from_step) :]:  # they run again: their flags go
            m.review.pop(step, None)
        m.epoch += 1
        m.state, m.step, m.entry, m.token = P, from_step, entry, ""
        m.lease_live = m.due_past = False

    def predict_commit(self, step: str, token: str) -> RC:
        if self.gone:
            return RC.NOT_FOUND
        if self.done.get(step) == token:
            return RC.DUPLICATE
        if self.running(step) and self.token == token:
            return RC.OK
        return RC.LEASE_LOST

    def apply_commit(
        self, step: str, token: str, next_entry: str, review: str = "", later: bool = False
    ) -> None:
        """A commit succeeded; ``next_entry`` is the saga's new entry when a step follows
        (none with ``later``: a run-next-at timer in the waits holds it)."""
        m = self
        if step.startswith("undo:"):
            m.done[step], m.token, m.lease_live = token, "", False
            m.outputs.discard(m.plan.pop(0))
            if m.plan:
                m.step, m.entry = f"undo:{m.plan[0]}", next_entry
            else:
                m.state, m.entry = CD, ""
            return
        if review:
            m.review[step] = review
        # The attempt's token stays in the hash while the saga waits for its next step
        # (commit_steps): live only while it runs. Cleared when it completes.
        m.done[step], m.lease_live = token, False
        m.outputs.add(step)
        if NEXT[step] and later:
            m.state, m.step, m.entry, m.timer_past = WT, NEXT[step], "", False
            m.stale_timer = False  # its member is this timer's now
        elif NEXT[step]:
            m.state, m.step, m.entry = P, NEXT[step], next_entry
        else:
            m.state, m.entry, m.token = C, "", ""

    def predict_fail(self, step: str, token: str) -> RC:
        if self.gone:
            return RC.NOT_FOUND
        if self.failtok == token:
            return RC.DUPLICATE
        if self.running(step) and self.token == token:
            return RC.OK
        return RC.LEASE_LOST

    def apply_fail(
        self,
        step: str,
        token: str,
        action: FailAction,
        due_now: bool,
        entry_of: object = None,
        ec: str = "E",
    ) -> None:
        """A fail succeeded; ``entry_of`` reads the saga's new entry (when compensation
        began: fail_step was given the undo steps, and one committed)."""
        m = self
        m.failtok, m.token, m.entry, m.lease_live, m.ec = token, "", "", False, ec
        undo = step.startswith("undo:")
        if undo:
            m.pec = ec if action == FailAction.PARK else ""
        if action == FailAction.DEAD and undo:
            m.state = CF
        elif action == FailAction.DEAD:
            m.state = F
            if entry_of is not None and any(s in m.outputs for s in UNDOABLE):
                m.begin_compensation(entry_of)
        else:
            m.state, m.due_past = CG if undo else W, due_now
            if action == FailAction.PARK:
                m.attempts[step] = (m.epoch, max(m.attempts_at(step) - 1, 0))
