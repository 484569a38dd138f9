"""A hypothesis state machine drives the Lua transitions against a small Python model.

Three records, two steps (router -> parser), two workers. Rules: start, read+claim
(XREADGROUP, or XAUTOCLAIM with min_idle 0 after a lease expired), heartbeat, commit
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
like the steps.

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

``SAGA_SOAK=1`` runs ten times more examples, each ten times longer.
"""

from __future__ import annotations

import os
import uuid
from collections import Counter
from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, event, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    initialize,
    invariant,
    multiple,
    precondition,
    rule,
    run_state_machine_as_test,
)

from saga.state import budgets, operator
from saga.state.budgets import BUDGET_ERROR
from saga.state.codes import RC
from saga.state.errors import SagaNotFoundError, StateError, StepConflictError
from saga.state.keys import GROUP, Keys
from saga.state.model import Claim, FailAction, SagaState
from saga.state.reads import get_saga_and_history
from saga.state.recovery import quarantine, recover_idle
from saga.state.repartition import Moved, move_record
from saga.state.replies import text
from saga.state.requests import CommitRequest, FailRequest
from saga.state.requeue import requeue_idle
from tests.state.helpers import read_ready, snapshot
from tests.state.stateful_fairness import CAP, USERS, Batch, parse_member
from tests.state.stateful_harness import RedisMachine
from tests.state.stateful_invariants import check_invariants, check_refusal, unchanged
from tests.state.stateful_model import (
    CD,
    CG,
    LATER_MS,
    LEASE_MS,
    MAX_LEASE_EXPIRIES,
    NEXT,
    PREV,
    RECORDS,
    STEPS,
    UNDO_STEPS,
    UNDOABLE,
    WORKERS,
    C,
    P,
    R,
    W,
    X,
)

WORK = STEPS + UNDO_STEPS
"""Every stream a worker reads: the steps and the undo steps."""


def _prev(step: str) -> str:
    return PREV[step.removeprefix("undo:")]


SOAK = os.environ.get("SAGA_SOAK") == "1"
SETTINGS = settings(
    max_examples=1000 if SOAK else 100,
    stateful_step_count=500 if SOAK else 50,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)


class SagaMachine(RedisMachine):
    claims = Bundle("claims")

    # -- rules ----------------------------------------------------------------
    @rule(rid=st.sampled_from(RECORDS))
    def start(self, rid: str) -> None:
        m = self.model[rid]
        res = self.run(self.sm.start(rid, USERS[rid], "router", input_json=b'{"n":1}'))
        assert res.created == (m.state is None)
        if m.state is None:
            m.state, m.step, m.epoch = P, "router", 1
            m.entry = self._entry_of(rid)
        assert (res.state, res.step, res.epoch) == (m.state, m.step, m.epoch)

    def _in(self, *states: SagaState) -> bool:
        return any(m.state in states for m in self.model.values())

    # Half the runs start every record (a user's two sagas queue behind each other: the
    # per-user cap has something to defer), half a random few.
    @initialize(rids=st.just(set(RECORDS)) | st.sets(st.sampled_from(RECORDS), min_size=1))
    def start_some(self, rids: set[str]) -> None:
        for rid in sorted(rids):
            self.start(rid)

    @precondition(lambda self: self._in(P, CG))
    @rule(target=claims, worker=st.sampled_from(WORKERS))
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
        event(f"work {'undos' if undos else 'steps'}")
        for step in UNDO_STEPS if undos else STEPS:
            entries = self.run(read_ready(self.client, self.keys, step, worker, count=10))
            for held in self._claim(step, entries, worker, "read"):
                if fail is None:
                    self.commit(held, resend=False, review="", wrong_next=False)
                else:
                    self.fail(
                        held, fail, due_now=True, resend=False, budget=False, compensable=True
                    )

    @precondition(lambda self: self._in(P))
    @rule(target=claims, worker=st.sampled_from(WORKERS), count=st.sampled_from([1, 2]))
    def claim_capped(self, worker: str, count: int) -> Any:
        """A worker with the per-user cap reads ``count`` new entries per step and claims
        them: entries left unread are the backlog under which a user's extra is deferred."""
        issued = []
        for step in STEPS:
            entries = self.run(read_ready(self.client, self.keys, step, worker, count=count))
            issued += self._claim(step, entries, worker, "capped read", capped=True)
        return multiple(*issued)

    # Twice the weight: a deferral needs two capped claims with entries left behind.
    claim_capped_too = claim_capped

    @precondition(lambda self: self._in(R, CG))
    @rule(
        target=claims, worker=st.sampled_from(WORKERS), expire_all=st.booleans(),
        capped=st.booleans(), compensable=st.booleans(),
    )  # fmt: skip
    def take_over(self, worker: str, expire_all: bool, capped: bool, compensable: bool) -> Any:
        """XAUTOCLAIM every pending entry (min idle 0) and claim them: live leases are held.

        With ``expire_all`` time first passes for every running saga (see expire_lease).
        """
        if expire_all:
            for rid, m in self.model.items():
                if m.running(m.step):
                    self.expire_lease(rid)
        issued = []
        for step in WORK:
            got = self.run(recover_idle(self.sm, step, 0, worker=worker, min_idle_ms=0, count=100))
            assert got.deleted == []
            entries = [(e, text(f[b"rid"])) for e, f in got.entries]
            issued += self._claim(
                step, entries, worker, "recover", capped=capped, compensable=compensable
            )
        return multiple(*issued)

    def _claim(
        self, step: str, entries: list[tuple[str, str]], worker: str, via: str,
        capped: bool = False, compensable: bool = False,
    ) -> list[tuple[str, Claim]]:  # fmt: skip
        if not entries:
            return []
        capped = capped and not step.startswith("undo:")  # claim_undo has no user cap
        undoable = UNDOABLE if compensable and not step.startswith("undo:") else ()
        batch = Batch(backlog=self.run(self._backlog(step))) if capped else None
        before = self.run(self._cap_sets(step))
        eps = self.run(self._epochs(step, entries))
        outs = self.run(
            self.sm.claim(
                step,
                0,
                entries,
                worker=worker,
                lease_ms=LEASE_MS,
                max_lease_expiries=MAX_LEASE_EXPIRIES,
                prev_step=_prev(step),
                user_cap=CAP if capped else 0,
                undoable=undoable,
            )
        )
        issued, deferred, takeovers = [], [], Counter[str]()
        for (entry, rid), ep, out in zip(entries, eps, outs, strict=True):
            m = self.model[rid]
            takeover = m.state == R
            if batch is not None and m.waits_for(step, entry, ep) and m.dfr != entry and (
                self.fair.over_cap(step, rid, batch)
            ):  # fmt: skip
                m.defer(entry)
                expected = RC.DEFERRED
                deferred.append((USERS[rid], rid, m.epoch))
            else:
                expected = m.predict_claim(step, entry, ep)
            assert out.code == expected, (rid, entry, out, m)
            event(f"claim via {via}: {expected.name}")
            note = self._after_claim(step, rid, expected, out.detail, undoable, batch is not None)
            if note:
                event(note)
            if out.claim is not None:
                assert out.claim.token == m.token
                assert out.claim.attempt == m.attempts_at(step)
                assert out.claim.expired == m.expiries_at(step)
                if step.startswith("undo:"):  # the plan: latest step first, none twice
                    assert out.claim.extra["undo"].decode() == ",".join(m.plan)
                issued.append((worker, out.claim))
                if batch is not None:
                    self.fair.claimed(step, rid, takeover, batch)
                    takeovers[USERS[rid]] += takeover
        if batch is not None:
            self._check_cap(step, before, deferred, batch.backlog, takeovers)
        return issued

    async def _backlog(self, step: str) -> bool:
        """Entries wait undelivered in the stream (found apart from the group's lag)."""
        ready = self.keys.ready(0, step)
        last = text((await self.client.xinfo_groups(ready))[0]["last-delivered-id"])
        return bool(await self.client.xrange(ready, f"({last}", "+", count=1))

    async def _cap_sets(self, step: str) -> tuple[set[str], Counter[str]]:
        """The deferred members, and the live slots per user."""
        deferred = await self.client.zrange(self.keys.deferred(0, step), 0, -1)
        slots = await self.client.zrange(self.keys.inflight(0, step), 0, -1, withscores=True)
        secs, micros = await self.client.time()
        now = int(secs) * 1000 + int(micros) // 1000
        live = Counter(text(m).split("|")[0] for m, score in slots if score > now)
        return {text(m) for m in deferred}, live

    def _check_cap(
        self, step: str, before: tuple[set[str], Counter[str]],
        deferred: list[tuple[str, str, int]], backlog: bool, takeovers: Counter[str],
    ) -> None:  # fmt: skip
        """The deferrals the model predicted are the members Redis added (the model takes
        them); while entries waited, no user got a new slot past the cap (a takeover
        carries on an attempt: not a new one)."""
        (old, live_before), (now, live_after) = before, self.run(self._cap_sets(step))
        added = now - old
        assert sorted(parse_member(m) for m in added) == sorted(deferred), (added, deferred)
        self.fair.deferred[step] |= added
        if backlog:
            for user, n in live_after.items():
                assert n - takeovers[user] <= max(CAP, live_before[user]), (user, step, n)

    @precondition(lambda self: self._in(P, R, CG))
    @rule(expire_all=st.booleans(), resend=st.booleans())
    def requeue(self, expire_all: bool, resend: bool) -> None:
        """The controller puts every pending entry (min idle 0) back as a new entry."""
        if expire_all:
            for rid, m in self.model.items():
                if m.running(m.step):
                    self.expire_lease(rid)
        for step in WORK:
            rows = self.run(
                self.client.xpending_range(self.keys.ready(0, step), GROUP, "-", "+", 100)
            )
            ids = [text(r["message_id"]) for r in rows]
            fields = self.run(self.client.xrange(self.keys.ready(0, step), "-", "+"))
            rid_of = {text(i): text(f[b"rid"]) for i, f in fields}
            ep_of = {text(i): int(f[b"ep"]) for i, f in fields}
            entries = [(e, rid_of[e]) for e in ids]
            op = uuid.uuid4().hex
            outs = self.run(requeue_idle(self.sm, step, 0, entries, min_idle_ms=0, op=op))
            for (entry, rid), out in zip(entries, outs, strict=True):
                expected = self.model[rid].predict_requeue(step, entry, ep_of[entry])
                assert out.code == expected, (rid, entry, out, self.model[rid])
                event(f"requeue: {expected.name}")
                if expected == RC.OK:
                    self.model[rid].entry = out.detail
            if resend and entries:
                again = requeue_idle(self.sm, step, 0, entries, min_idle_ms=0, op=op)
                self.run(unchanged(self.client, self.keys, again))

    @precondition(lambda self: any(m.running(m.step) and m.lease_live for m in self.model.values()))
    @rule(rid=st.sampled_from(RECORDS))
    def expire_lease(self, rid: str) -> None:
        """Time passes for one running saga: its lease deadline is moved to 0, and so is
        its user's slot's (the slot's deadline is the lease's)."""
        m = self.model[rid]
        if m.running(m.step):
            self.run(self.client.hset(self.keys.saga(rid), "lease", 0))
            m.lease_live = False
            slot = {f"{USERS[rid]}|{rid}": 0}
            self.run(self.client.zadd(self.keys.inflight(0, m.step), slot, xx=True))
            self.fair.lapse(m.step, rid)

    @rule(held=claims)
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
        held=claims,
        resend=st.booleans(),
        review=st.sampled_from(["", "", "doubtful"]),
        wrong_next=st.sampled_from([False, False, False, True]),
    )
    def commit(self, held: tuple[str, Claim], resend: bool, review: str, wrong_next: bool) -> None:
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
        )
        expected = m.predict_commit(c.step, c.token)
        if undo and wrong_next and expected == RC.OK:
            again = self.run(unchanged(self.client, self.keys, self.sm.commit(c, req)))
            assert again.code == RC.WRONG_STATE
            event("commit undo: WRONG_STATE (not the plan's next)")
            return
        before = self.run(snapshot(self.client, self.keys.prefix))
        out = self.run(self.sm.commit(c, req))
        assert out.code == expected, (out, m)
        event(f"commit{' undo' if undo else ''}: {expected.name}")
        self.run(check_refusal(self.client, self.keys, c.record_id, expected, before))
        if expected == RC.OK:
            next_entry = self._entry_of(c.record_id) if req.next_step else ""
            m.apply_commit(c.step, c.token, next_entry, req.review)
            self.committed[c.step] += 1
            released = self.fair.end_capped(c.step, c.record_id)
            event(f"commit: released {len(released)}")
        if resend:
            self.run(unchanged(self.client, self.keys, self.sm.commit(c, req)))

    @rule(
        helds=st.lists(
            claims, min_size=2, max_size=4, unique_by=lambda h: (h[1].record_id, h[1].token)
        ),
        resend=st.booleans(),
    )
    def commit_together(self, helds: list[tuple[str, Claim]], resend: bool) -> None:
        """A commit batch (the worker's committer): the steps' commits of a partition in
        one commit_steps call, each atomic in its turn, so the model applies them in
        order. An attempt commits once (its batch may be re-sent whole), so no claim
        is in a batch twice."""
        helds = [h for h in helds if not h[1].step.startswith("undo:")]
        items = []
        for worker, c in helds:
            req = CommitRequest(
                output=b'{"by":"' + worker.encode() + b'"}',
                worker=worker,
                next_step=NEXT[c.step],
                op=uuid.uuid4().hex,
            )
            items.append((c, req))
        outs = self.run(self.sm.finish_many(items))
        event(f"commit together: {len(items)}")
        for (c, req), out in zip(items, outs, strict=True):
            m = self.model[c.record_id]
            expected = m.predict_commit(c.step, c.token)
            assert out.code == expected, (out, m)
            if expected == RC.OK:
                next_entry = self._entry_of(c.record_id) if req.next_step else ""
                m.apply_commit(c.step, c.token, next_entry, req.review)
                self.committed[c.step] += 1
                self.fair.end_capped(c.step, c.record_id)
        if resend and items:
            again = self.run(unchanged(self.client, self.keys, self.sm.finish_many(items)))
            assert all(o.code in (RC.DUPLICATE, RC.LEASE_LOST, RC.NOT_FOUND) for o in again)

    @rule(
        held=claims,
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
        )
        expected = m.predict_fail(c.step, c.token)
        before = self.run(snapshot(self.client, self.keys.prefix))
        out = self.run(self.sm.fail(c, req))
        assert out.code == expected, (out, m)
        event(
            f"fail{' undo' if c.step.startswith('undo:') else ''} {action.value}: {expected.name}"
        )
        self.run(check_refusal(self.client, self.keys, c.record_id, expected, before))
        if expected == RC.OK:
            entry_of = (lambda: self._entry_of(c.record_id)) if compensable else None
            m.apply_fail(c.step, c.token, action, due_now, entry_of, ec)
            released = self.fair.end_capped(c.step, c.record_id)
            event(f"fail: released {len(released)}")
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

    @precondition(lambda self: self._in(W))
    @rule(step=st.sampled_from(STEPS))
    def unpark(self, step: str) -> None:
        """A budget raised: the sagas parked for their budget at the step wake now (due or
        not); other waiting sagas, candidates too, are left as they are."""
        waiting = [rid for rid, m in self.model.items() if m.state == W and m.step == step]
        woken = [rid for rid in waiting if self.model[rid].ec == BUDGET_ERROR]
        got = self.run(budgets._unpark(self.sm, 0, step, waiting, "budget raised", "op-u"))
        assert got == len(woken)
        event(f"unpark: {len(woken)} of {len(waiting)}")
        for rid in woken:
            m = self.model[rid]
            m.state, m.due_past, m.entry = P, False, self._entry_of(rid)

    @precondition(lambda self: any(self.fair.deferred.values()))
    @rule(
        step=st.sampled_from(STEPS), idle=st.booleans(), most=st.sampled_from([1, 10]),
        cap_off=st.booleans(),
    )  # fmt: skip
    def release_deferred(self, step: str, idle: bool, most: int, cap_off: bool) -> None:
        """A worker's release of deferred entries: into its users' free slots, or (idle:
        its read came back short) up to ``most`` regardless; the cap turned off: all go."""
        cap = 0 if cap_off else CAP
        expected = self.fair.release(step, cap, most, idle)
        got = self.run(self.sm.release_deferred(
            step, 0, cap=cap, lease_ms=LEASE_MS, most=most, idle=idle))  # fmt: skip
        assert got == len(expected), (got, expected)
        event(f"release_deferred: {len(expected)}")

    @rule(
        rid=st.sampled_from(RECORDS),
        from_step=st.sampled_from(STEPS),
        force=st.booleans(),
        resend=st.booleans(),
    )
    def retry(self, rid: str, from_step: str, force: bool, resend: bool) -> None:
        m = self.model[rid]
        op = uuid.uuid4().hex
        call = operator.retry(
            self.sm, rid, from_step, PREV[from_step], force=force, op=op, steps=STEPS
        )
        if m.state is None:
            with pytest.raises(SagaNotFoundError):
                self.run(call)
            return
        if m.retry_conflicts(from_step, force):
            before = self.run(snapshot(self.client, self.keys.prefix))
            with pytest.raises(StepConflictError):
                self.run(call)
            assert self.run(snapshot(self.client, self.keys.prefix)) == before
            return
        res = self.run(call)
        event(f"retry: released {len(self.fair.free(m.step, rid))}")  # its slot goes on
        m.apply_retry(from_step, res.entry_id)
        assert res.epoch == m.epoch
        if resend:
            again = operator.retry(
                self.sm, rid, from_step, PREV[from_step], force=force, op=op, steps=STEPS
            )
            before = self.run(snapshot(self.client, self.keys.prefix))
            assert self.run(again) == msgspec.structs.replace(res, duplicate=True)
            assert self.run(snapshot(self.client, self.keys.prefix)) == before

    @rule(rid=st.sampled_from(RECORDS))
    def cancel(self, rid: str) -> None:
        m = self.model[rid]
        call = operator.cancel(self.sm, rid)
        if m.state is None:
            with pytest.raises(SagaNotFoundError):
                self.run(call)
        elif m.state in (C, CD):
            with pytest.raises(StepConflictError):
                self.run(call)
        else:
            assert self.run(call) == m.state
            if m.state != X:  # a cancelled saga's cancel writes nothing
                event(f"cancel: released {len(self.fair.free(m.step, rid))}")
            m.state, m.token, m.entry, m.lease_live = X, "", "", False

    @precondition(lambda self: any(o in m.outputs for m in self.model.values() for o in UNDOABLE))
    @rule(rid=st.sampled_from(RECORDS), resend=st.booleans())
    def compensate(self, rid: str, resend: bool) -> None:
        """saga cancel --compensate (or saga retry of compensation_failed): the committed
        steps' undos, latest first; compensating or compensated already: nothing changes."""
        m = self.model[rid]
        op = uuid.uuid4().hex
        call = operator.compensate(self.sm, rid, UNDOABLE, actor="test", op=op)
        if m.state is None:
            with pytest.raises(SagaNotFoundError):
                self.run(call)
            return
        if m.state == C:
            self.run(unchanged(self.client, self.keys, _refused(call)))
            return
        if m.state in (CG, CD):
            res = self.run(unchanged(self.client, self.keys, call))
            assert res.duplicate and res.state == m.state
            return
        res = self.run(call)
        event(f"compensate: released {len(self.fair.free(m.step, rid))}")
        m.begin_compensation(lambda: self._entry_of(rid))
        assert (res.state, res.step, res.duplicate) == (m.state, m.step, False)
        event(f"compensate: {m.state.value}")
        if resend:
            again = operator.compensate(self.sm, rid, UNDOABLE, actor="test", op=op)
            assert self.run(unchanged(self.client, self.keys, again)).duplicate

    @rule(rid=st.sampled_from(RECORDS), resend=st.booleans())
    def accept_review(self, rid: str, resend: bool) -> None:
        m = self.model[rid]
        op = uuid.uuid4().hex
        call = operator.accept_review(self.sm, rid, STEPS, op=op)
        if m.state is None:
            with pytest.raises(SagaNotFoundError):
                self.run(call)
            return
        before = self.run(snapshot(self.client, self.keys.prefix))
        if not m.review:
            with pytest.raises(StepConflictError):
                self.run(call)
            assert self.run(snapshot(self.client, self.keys.prefix)) == before
            return
        assert self.run(call) == len(m.review)
        event("accept_review: OK")
        m.review.clear()
        if resend:
            again = operator.accept_review(self.sm, rid, STEPS, op=op)
            self.run(unchanged(self.client, self.keys, again))

    @precondition(lambda self: self._in(P, CG))
    @rule(step=st.sampled_from(WORK), resend=st.booleans())
    def quarantine_ready(self, step: str, resend: bool) -> None:
        """Read new entries and quarantine them all as malformed (naming their record): a
        saga whose current entry it was is dead-lettered; a re-send writes nothing."""
        entries = self.run(read_ready(self.client, self.keys, step, "w-q", count=10))
        for entry, rid in entries:
            strands = self.model[rid].predict_quarantine(step, entry)
            self.run(quarantine(self.sm, step, 0, entry, "malformed (test)", {}, rid))
            event(f"quarantine: {'dead-lettered' if strands else 'entry only'}")
            if resend:
                again = quarantine(self.sm, step, 0, entry, "malformed (test)", {}, rid)
                assert self.run(unchanged(self.client, self.keys, again)) == ""

    @rule(rid=st.sampled_from(RECORDS), resend=st.booleans())
    def move_and_back(self, rid: str, resend: bool) -> None:
        """saga partitions migrate's two calls, to another partition count and back: a
        terminal saga reads the same there and back here; any other is left untouched."""
        m = self.model[rid]
        wide = next(Keys(self.keys.prefix, n) for n in range(2, 64)
                    if Keys(self.keys.prefix, n).partition_of(rid) != 0)  # fmt: skip
        op = uuid.uuid4().hex
        if m.state is None or not m.state.terminal:
            moved = self.run(unchanged(self.client, self.keys, move_record(
                self.client, self.keys, wide, rid, op)))  # fmt: skip
            assert moved == (Moved.GONE if m.state is None else Moved.ACTIVE)
            return
        here = self.run(get_saga_and_history(self.client, self.keys, rid))
        assert self.run(move_record(self.client, self.keys, wide, rid, op)) == Moved.MOVED
        event(f"move {m.state.value}: MOVED")
        assert self.run(get_saga_and_history(self.client, wide, rid)) == here
        if resend:  # the same op again: nothing left to move, nothing written
            self.run(unchanged(self.client, self.keys, move_record(
                self.client, self.keys, wide, rid, op)))  # fmt: skip
        back = self.run(move_record(self.client, wide, self.keys, rid, uuid.uuid4().hex))
        assert back == Moved.MOVED
        assert self.run(get_saga_and_history(self.client, self.keys, rid)) == here

    # -- invariants -----------------------------------------------------------
    @invariant()
    def redis_agrees_with_model_and_invariants_hold(self) -> None:
        self.run(check_invariants(self.client, self.keys, self.model, self.fair))
        counted = self.run(self.client.hgetall(self.keys.stats(0)))
        for step in STEPS:  # a commit batch counts each of its commits
            assert int(counted.get(f"committed:{step}".encode(), 0)) == self.committed[step]


async def _refused(call: Any) -> None:
    with pytest.raises(StepConflictError):
        await call


def test_state_machine_holds_against_the_model(redis_url: str) -> None:
    """Random interleavings of every transition keep the model's invariants (see module doc)."""
    run_state_machine_as_test(lambda: SagaMachine(redis_url), settings=SETTINGS)  # type: ignore[arg-type]
