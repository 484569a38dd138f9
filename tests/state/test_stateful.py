"""A hypothesis state machine drives the Lua transitions against a small Python model.

Three records, two steps (router -> parser), two workers. Rules: start, read+claim
(XREADGROUP, or XAUTOCLAIM with min_idle 0 after a lease expired), claim in the read
(claim_steps reading the entries itself: stateful_rules_claim_read), heartbeat, commit
and fail with any claim ever issued (zombies included), promote, manual retry, cancel,
accept review (commits flag their saga for review at random), the controller's
requeue of idle entries (no consumer: a new entry for the same saga, state unchanged),
and quarantine of read entries (a saga waiting on its quarantined entry is dead-lettered),
a move to another partition count and back (``saga partitions migrate``'s receive
and release), the wake-up of sagas parked for their budget (``unpark_sagas``), and
compensation: a dead-lettering fail may name the steps to undo, an operator may
compensate (``saga cancel --compensate``, ``saga retry`` of a failed compensation), and
the undo steps (undo:parser, undo:router) are claimed, heartbeat, committed (naming the
plan's next undo, or a wrong one), failed, promoted, recovered, requeued and quarantined
like the steps. Timers and signals (stateful_rules_waits): a commit may say "run the next
step in ten minutes" (the saga then waits on a timer in the partition's waits), the
timers sweep fires them (forced due: the stand-in for time), and signals with three ids
and two events are kept, dropped, seen or refused; cancel and compensate remove a timer.

The per-user cap (stateful_fairness): r0 and r1 belong to one user, r2 to another.
Capped claims read one or two entries (the rest is the backlog the cap needs) and
defer a user's entry past its slot; commits and fails hand the slot to the user's oldest
deferral; ``release_deferred`` releases into free slots, idle or with the cap off;
``take_over`` may claim capped, and name the steps to undo (a saga dead-lettered by its
lease expiries then compensates in the claim). Released entries are read from the stream
like any other: the model knows a deferral by record and epoch, never by entry id, and a
claim or requeue takes a released entry only of its saga's epoch. Cancel, compensate,
retry, and a capped claim dropping a stale entry, hand the saga's slot on.

Time: leases are issued for ten minutes, so they never lapse on their own during a
run. The ``expire_lease`` rule stands in for time passing: it sets the saga's lease
deadline to 0 (HSET lease 0), after which another worker may take the entry over;
its user's slot lapses with it (ZADD XX score 0).
Delayed retries are due at once (delay 0) or in ten minutes; ``promote`` may force
them due with ZADD score 0, the same stand-in.

Every rule predicts the script's outcome from the model (stateful_model) and checks
it; after every rule the invariants (stateful_invariants) are checked against Redis.
The steps' lifecycle rules are here; the per-user cap's, compensation's and the
operator's are mixins (stateful_rules_*); the claim they share is in stateful_harness.

``SAGA_SOAK=1`` runs ten times more examples, each ten times longer.
"""

from __future__ import annotations

import os
import uuid
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    initialize,
    invariant,
    multiple,
    precondition,
    rule,
    run_state_machine_as_test,
)

import tests.state.stateful_harness as harness
from saga.state.budgets import BUDGET_ERROR
from saga.state.codes import RC
from saga.state.errors import StateError
from saga.state.model import Claim, FailAction
from saga.state.requests import CommitRequest, FailRequest
from tests.state.helpers import read_ready, snapshot
from tests.state.stateful_fairness import USERS
from tests.state.stateful_harness import CLAIMS, WORK
from tests.state.stateful_invariants import check_invariants, check_refusal, unchanged
from tests.state.stateful_model import (
    CD,  # noqa: F401 (the scripted runs read it here)
    CG,
    LATER_MS,
    LEASE_MS,
    NEXT,
    RECORDS,
    STEPS,
    UNDO_STEPS,
    UNDOABLE,
    WORKERS,
    P,
    W,
)
from tests.state.stateful_rules_budget import BudgetRules
from tests.state.stateful_rules_claim_read import ClaimReadRules
from tests.state.stateful_rules_compensation import CompensationRules
from tests.state.stateful_rules_fairness import FairnessRules
from tests.state.stateful_rules_lifecycle import LifecycleRules
from tests.state.stateful_rules_operator import OperatorRules
from tests.state.stateful_rules_recovery import RecoveryRules
from tests.state.stateful_rules_retention import RetentionRules
from tests.state.stateful_rules_waits import WaitRules

SOAK = os.environ.get("SAGA_SOAK") == "1"
SETTINGS = settings(
    max_examples=1000 if SOAK else 100,
    stateful_step_count=500 if SOAK else 50,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)


class SagaMachine(
    FairnessRules,
    CompensationRules,
    OperatorRules,
    RetentionRules,
    RecoveryRules,
    BudgetRules,
    LifecycleRules,
    WaitRules,
    ClaimReadRules,
):
    # -- rules (hypothesis collects the mixins' too) ---------------------------
    @rule(rid=st.sampled_from(RECORDS))
    def start(self, rid: str) -> None:
        m = self.model[rid]
        if m.gone:  # pruned: its record id is not used again
            return
        res = self.run(self.sm.start(rid, USERS[rid], "router", input_json=b'{"n":1}'))
        assert res.created == (m.state is None)
        if m.state is None:
            m.state, m.step, m.epoch = P, "router", 1
            m.entry = self._entry_of(rid)
        assert (res.state, res.step, res.epoch) == (m.state, m.step, m.epoch)

    # Half the runs start every record (a user's two sagas queue behind each other: the
    # per-user cap has something to defer), half a random few.
    @initialize(rids=st.just(set(RECORDS)) | st.sets(st.sampled_from(RECORDS), min_size=1))
    def start_some(self, rids: set[str]) -> None:
        for rid in sorted(rids):
            self.start(rid)

    @precondition(lambda self: self._in(P, CG))
    @rule(target=CLAIMS, worker=st.sampled_from(WORKERS))
    def claim_ready(self, worker: str) -> Any:
        """XREADGROUP new entries of both steps and claim them as one batch per step."""
        issued = []
        for step in WORK:
            entries = self.run(read_ready(self.client, self.keys, step, worker, count=10))
            issued += self._claim(step, entries, worker, "read")
        return multiple(*issued)

    @precondition(lambda self: self._in(P, CG))
    @rule(
        worker=st.sampled_from(WORKERS),
        fail=st.sampled_from([None, None, *FailAction]),
        undos=st.booleans(),
    )
    def work(self, worker: str, fail: FailAction | None, undos: bool) -> None:
        """A worker at work on the steps (or the undo steps): read, claim, and commit (or
        fail, naming the steps to undo) each claim at once, so sagas get far enough for
        their compensations to run to their end, as well as being interleaved."""
        harness.event(f"work {'undos' if undos else 'steps'}")
        for step in UNDO_STEPS if undos else STEPS:
            entries = self.run(read_ready(self.client, self.keys, step, worker, count=10))
            for held in self._claim(step, entries, worker, "read"):
                if fail is None:
                    self.commit(held, resend=False, review="", wrong_next=False)
                else:
                    self.fail(
                        held, fail, due_now=True, resend=False, budget=False, compensable=True
                    )

    @rule(held=CLAIMS)
    def heartbeat(self, held: tuple[str, Claim]) -> None:
        worker, c = held
        m = self.model[c.record_id]
        live = m.running(c.step) and m.token == c.token
        before = None if live else self.run(snapshot(self.client, self.keys.prefix))
        try:
            self.run(self.sm.heartbeat(c, worker=worker, lease_ms=LEASE_MS))
            assert live, "a stale token's heartbeat was accepted"
            m.lease_live = True
            self.fair.extend(c.step, c.record_id)
        except StateError as exc:
            assert not live, exc
            assert self.run(snapshot(self.client, self.keys.prefix)) == before

    @rule(
        held=CLAIMS,
        resend=st.booleans(),
        review=st.sampled_from(["", "", "doubtful"]),
        wrong_next=st.sampled_from([False, False, False, True]),
        later=st.sampled_from([False, False, True]),
    )
    def commit(
        self,
        held: tuple[str, Claim],
        resend: bool,
        review: str,
        wrong_next: bool,
        later: bool = False,
    ) -> None:
        """A step's commit; ``later``: with "run the next step in ten minutes"
        (ctx.run_next_after), which parks the saga as a timer when a step follows."""
        worker, c = held
        m = self.model[c.record_id]
        undo = c.step.startswith("undo:")
        if undo:  # as the worker: the next undo is the claim's plan's second step
            later = c.extra["undo"].decode().split(",")[1:]
            next_step = f"undo:{later[0]}" if later else ""
            if wrong_next:
                next_step = "" if next_step else "undo:router"
        req = CommitRequest(
            output=b'{"by":"' + worker.encode() + b'"}',
            worker=worker,
            next_step=next_step if undo else NEXT[c.step],
            review="" if undo else review,
            op=uuid.uuid4().hex,
            run_after_ms=LATER_MS if later and not undo else 0,
            **self.settle_request(c),
        )
        expected = m.predict_commit(c.step, c.token)
        if undo and wrong_next and expected == RC.OK:
            again = self.run(unchanged(self.client, self.keys, self.sm.commit(c, req)))
            assert again.code == RC.WRONG_STATE
            harness.event("commit undo: WRONG_STATE (not the plan's next)")
            return
        before = self.run(snapshot(self.client, self.keys.prefix))
        out = self.run(self.sm.commit(c, req))
        assert out.code == expected, (out, m)
        harness.event(f"commit{' undo' if undo else ''}: {expected.name}")
        self.run(check_refusal(self.client, self.keys, c.record_id, expected, before))
        if expected == RC.OK:
            next_entry = self._entry_of(c.record_id) if req.next_step else ""
            m.apply_commit(c.step, c.token, next_entry, req.review, req.run_after_ms > 0)
            assert out.state == m.state, (out, m)
            self.committed[c.step] += 1
            self.settled(c, req.cost)
            released = self.fair.end_capped(c.step, c.record_id)
            harness.event(f"commit: released {len(released)}")
        if resend:
            self.run(unchanged(self.client, self.keys, self.sm.commit(c, req)))

    @rule(
        helds=st.lists(
            CLAIMS, min_size=2, max_size=4, unique_by=lambda h: (h[1].record_id, h[1].token)
        ),
        resend=st.booleans(),
    )
    def commit_together(self, helds: list[tuple[str, Claim]], resend: bool) -> None:
        """A commit batch (the worker's committer): the steps' commits of a partition in
        one commit_steps call, each atomic in its turn, so the model applies them in
        order. An attempt's commit is sent in one batch only (re-sent whole, never put in
        a later one), so no claim is in a batch twice, nor one whose commit was answered."""
        helds = [h for h in helds if not h[1].step.startswith("undo:")
                 and self.model[h[1].record_id].done.get(h[1].step) != h[1].token]  # fmt: skip
        items = []
        for worker, c in helds:
            req = CommitRequest(
                output=b'{"by":"' + worker.encode() + b'"}',
                worker=worker,
                next_step=NEXT[c.step],
                op=uuid.uuid4().hex,
                **self.settle_request(c),
            )
            items.append((c, req))
        outs = self.run(self.sm.finish_many(items))
        harness.event(f"commit together: {len(items)}")
        for (c, req), out in zip(items, outs, strict=True):
            m = self.model[c.record_id]
            expected = m.predict_commit(c.step, c.token)
            assert out.code == expected, (out, m)
            if expected == RC.OK:
                next_entry = self._entry_of(c.record_id) if req.next_step else ""
                m.apply_commit(c.step, c.token, next_entry, req.review)
                self.committed[c.step] += 1
                self.settled(c, req.cost)
                self.fair.end_capped(c.step, c.record_id)
        if resend and items:
            again = self.run(unchanged(self.client, self.keys, self.sm.finish_many(items)))
            assert all(o.code in (RC.DUPLICATE, RC.LEASE_LOST, RC.NOT_FOUND) for o in again)

    @rule(
        held=CLAIMS,
        action=st.sampled_from(list(FailAction)),
        due_now=st.booleans(),
        resend=st.booleans(),
        budget=st.booleans(),
        compensable=st.booleans(),
    )
    def fail(
        self,
        held: tuple[str, Claim],
        action: FailAction,
        due_now: bool,
        resend: bool,
        budget: bool,
        compensable: bool,
    ) -> None:
        worker, c = held
        m = self.model[c.record_id]
        delay = 0 if due_now else LATER_MS
        ec = BUDGET_ERROR if budget and action == FailAction.PARK else "E"
        req = FailRequest(
            action=action,
            error_class=ec,
            error_message="m",
            delay_ms=delay,
            worker=worker,
            undo=UNDOABLE if compensable else (),
            op=uuid.uuid4().hex,
            **self.settle_request(c),
        )
        expected = m.predict_fail(c.step, c.token)
        before = self.run(snapshot(self.client, self.keys.prefix))
        out = self.run(self.sm.fail(c, req))
        assert out.code == expected, (out, m)
        harness.event(
            f"fail{' undo' if c.step.startswith('undo:') else ''} {action.value}: {expected.name}"
        )
        self.run(check_refusal(self.client, self.keys, c.record_id, expected, before))
        if expected == RC.OK:
            entry_of = (lambda: self._entry_of(c.record_id)) if compensable else None
            m.apply_fail(c.step, c.token, action, due_now, entry_of, ec)
            self.settled(c, req.cost)
            released = self.fair.end_capped(c.step, c.record_id)
            harness.event(f"fail: released {len(released)}")
        if resend:
            self.run(unchanged(self.client, self.keys, self.sm.fail(c, req)))

    @precondition(lambda self: self._in(W) or any(m.undo_waiting for m in self.model.values()))
    @rule(step=st.sampled_from(WORK), force_due=st.booleans())
    def promote(self, step: str, force_due: bool) -> None:
        waiting = [
            rid
            for rid, m in self.model.items()
            if (m.state == W or m.undo_waiting) and m.step == step
        ]
        if force_due:
            for rid in waiting:
                self.run(self.client.zadd(self.keys.delayed(0, step), {rid: 0}))
                self.model[rid].due_past = True
        candidates = [rid for rid, _ in self.run(self.sm.due_candidates(step, 0, 100))]
        assert sorted(candidates) == sorted(waiting)
        due = [rid for rid in waiting if self.model[rid].due_past]
        got = self.run(self.sm.promote(step, 0, candidates))
        assert got == (len(due), len(waiting) - len(due))
        for rid in due:
            m = self.model[rid]
            m.state = CG if m.state == CG else P
            m.due_past, m.entry = False, self._entry_of(rid)

    # -- invariants -----------------------------------------------------------
    @invariant()
    def redis_agrees_with_model_and_invariants_hold(self) -> None:
        self.run(check_invariants(self.client, self.keys, self.model, self.fair))
        counted = self.run(self.client.hgetall(self.keys.stats(0)))
        for step in STEPS:  # a commit batch counts each of its commits
            assert int(counted.get(f"committed:{step}".encode(), 0)) == self.committed[step]


def test_state_machine_holds_against_the_model(redis_url: str) -> None:
    """Random interleavings of every transition keep the model's invariants (see module doc)."""
    run_state_machine_as_test(lambda: SagaMachine(redis_url), settings=SETTINGS)  # type: ignore[arg-type]
