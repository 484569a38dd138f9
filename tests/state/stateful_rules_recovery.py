"""The stateful test's recovery rules (tests/state/test_stateful.py): time passing for a
running saga's lease, a worker taking over every pending entry (XAUTOCLAIM), and the
controller's requeue of idle entries; a mixin of ``SagaMachine``."""

from __future__ import annotations

import uuid
from typing import Any

from hypothesis import strategies as st
from hypothesis.stateful import multiple, precondition, rule

import tests.state.stateful_harness as harness
from saga.state.codes import RC
from saga.state.keys import GROUP
from saga.state.recovery import recover_idle
from saga.state.replies import text
from saga.state.requeue import requeue_idle
from tests.state.stateful_fairness import USERS
from tests.state.stateful_harness import CLAIMS, WORK, RedisMachine
from tests.state.stateful_invariants import unchanged
from tests.state.stateful_model import CG, RECORDS, WORKERS, P, R


class RecoveryRules(RedisMachine):
    @precondition(lambda self: self._in(R, CG))
    @rule(
        target=CLAIMS, worker=st.sampled_from(WORKERS), expire_all=st.booleans(),
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
                m = self.model[rid]
                expected = m.predict_requeue(step, entry, ep_of[entry])
                assert out.code == expected, (rid, entry, out, m)
                harness.event(f"requeue: {expected.name}")
                # A dropped entry's slot goes on, as a capped claim's (the keys come always).
                if expected == RC.NOT_FOUND or (
                    expected == RC.STALE_ENTRY and not m.running(step)
                ):  # fmt: skip
                    freed = self.fair.free(step, rid)
                    harness.event(f"requeue {expected.name}: freed {len(freed)}")
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
