"""The stateful test's operator rules: manual retry, cancel, accepting a review,
quarantine of read entries, a move to another partition count and back, and the wake-up
of sagas parked for their budget."""

from __future__ import annotations

import uuid
from typing import Any

import msgspec
import pytest
from hypothesis import strategies as st
from hypothesis.stateful import precondition, rule

import tests.state.stateful_harness as harness
from saga.state import budgets, operator, review
from saga.state.budgets import BUDGET_ERROR
from saga.state.errors import ReviewConflictError, SagaNotFoundError, StepConflictError
from saga.state.keys import Keys
from saga.state.reads import get_saga_and_history
from saga.state.recovery import quarantine
from saga.state.repartition import Moved, move_record
from tests.state.helpers import read_ready, snapshot
from tests.state.stateful_harness import WORK, RedisMachine
from tests.state.stateful_invariants import unchanged
from tests.state.stateful_model import (
    CD,
    CG,
    NEXT,
    PREV,
    RECORDS,
    STEPS,
    UNDO_STEPS,
    C,
    P,
    W,
    X,
)  # fmt: skip


class OperatorRules(RedisMachine):
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
        harness.event(f"retry: released {len(self.fair.free(m.step, rid))}")  # its slot goes on
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
                harness.event(f"cancel: released {len(self.fair.free(m.step, rid))}")
            m.state, m.token, m.entry, m.lease_live = X, "", "", False

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
        harness.event("accept_review: OK")
        m.review.clear()
        if resend:
            again = operator.accept_review(self.sm, rid, STEPS, op=op)
            self.run(unchanged(self.client, self.keys, again))

    @rule(
        rid=st.sampled_from(RECORDS),
        step=st.sampled_from(STEPS),
        stale=st.booleans(),
        complete=st.booleans(),
        resend=st.booleans(),
    )
    def decide_review(self, rid: str, step: str, stale: bool, complete: bool, resend: bool) -> None:
        """A reviewer's decision on a flagged step of a completed saga, at the version
        read (or a stale one: another reviewer came first). Refused ones write nothing;
        the completing one clears the step's flag and re-runs the next step, if any, in a
        new epoch; a re-send writes nothing."""
        m = self.model[rid]
        at = STEPS.index(step)
        d = review.Decision(step=step, version=m.rvv - 1 if stale else m.rvv,
                            summary="accept b0", decisions=b"{}", event=b"{}",
                            complete=complete, reviewed=b'{"reviewed":1}', next_step=NEXT[step],
                            rerun=STEPS[at + 1 :], kept=STEPS[: at + 1])  # fmt: skip
        op = uuid.uuid4().hex
        call = review.decide(self.sm, rid, d, actor="t", op=op)
        if m.state is None:
            with pytest.raises(SagaNotFoundError):
                self.run(call)
            return
        if step not in m.review or m.state != C or stale:
            refused = (
                ReviewConflictError if step in m.review and m.state == C else StepConflictError
            )
            harness.event(f"decide_review: refused ({refused.__name__})")
            self.run(unchanged(self.client, self.keys, _raises(call, refused)))
            return
        got = self.run(call)
        m.rvv += 1
        assert got.version == m.rvv
        harness.event(f"decide_review: OK{' complete' if complete else ''}")
        if complete:
            m.review.pop(step)
            if NEXT[step]:
                m.apply_retry(NEXT[step], got.entry)
                m.outputs.add(step)
        if resend:
            self.run(
                unchanged(self.client, self.keys, review.decide(self.sm, rid, d, actor="t", op=op))
            )

    @precondition(lambda self: self._in(P, CG))
    @rule(step=st.sampled_from(WORK), resend=st.booleans())
    def quarantine_ready(self, step: str, resend: bool) -> None:
        """Read new entries and quarantine them all as malformed (naming their record): a
        saga whose current entry it was (a deferred saga: a release of its epoch) is
        dead-lettered; the slot of a saga that does not run at the step goes on; a re-send
        writes nothing."""
        entries = self.run(read_ready(self.client, self.keys, step, "w-q", count=10))
        eps = self.run(self._epochs(step, entries))
        for (entry, rid), ep in zip(entries, eps, strict=True):
            strands = self.model[rid].predict_quarantine(step, entry, ep)
            self.run(quarantine(self.sm, step, 0, entry, "malformed (test)", {}, rid))
            harness.event(f"quarantine: {'dead-lettered' if strands else 'entry only'}")
            if not self.model[rid].running(step):  # as a claim's dropped entry: its slot goes
                harness.event(f"quarantine: freed {len(self.fair.free(step, rid))}")
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
        harness.event(f"move {m.state.value}: MOVED")
        assert self.run(get_saga_and_history(self.client, wide, rid)) == here
        if resend:  # the same op again: nothing left to move, nothing written
            self.run(unchanged(self.client, self.keys, move_record(
                self.client, self.keys, wide, rid, op)))  # fmt: skip
        back = self.run(move_record(self.client, wide, self.keys, rid, uuid.uuid4().hex))
        assert back == Moved.MOVED
        assert self.run(get_saga_and_history(self.client, self.keys, rid)) == here

    @precondition(lambda self: self._in(W) or any(m.undo_waiting for m in self.model.values()))
    @rule(step=st.sampled_from(STEPS + UNDO_STEPS))
    def unpark(self, step: str) -> None:
        """A budget raised: the sagas parked for their budget at the step wake now (due or
        not), and so do undos parked for it while their saga compensates (which stays
        compensating); other waiting sagas, candidates too, are left as they are."""
        undo = step.startswith("undo:")
        waiting = [rid for rid, m in self.model.items()
                   if m.step == step and (m.undo_waiting if undo else m.state == W)]  # fmt: skip
        why = {rid: self.model[rid].pec if undo else self.model[rid].ec for rid in waiting}
        woken = [rid for rid in waiting if why[rid] == BUDGET_ERROR]
        got = self.run(budgets._unpark(self.sm, 0, step, waiting, "budget raised", "op-u"))
        assert got == len(woken)
        harness.event(f"unpark{' undo' if undo else ''}: {len(woken)} of {len(waiting)}")
        for rid in woken:
            m = self.model[rid]
            m.due_past, m.entry, m.pec = False, self._entry_of(rid), ""
            if not undo:
                m.state = P


async def _raises(call: Any, error: type[Exception]) -> None:
    with pytest.raises(error):
        await call
