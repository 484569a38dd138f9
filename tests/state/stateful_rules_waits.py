"""The stateful test's timer and signal rules. The sweep of the partition's waits (``time_out_due``,
every worker's and the controller's timers loop). A saga a commit parked with "run the
next step in ten minutes" (the commit rule's ``later``: ctx.run_next_after) waits with
no entry; time passing is stood in for by forcing every timer due (ZADD score 1, its
'wdue' 1), after which the sweep's 'resume' path adds the step's entry, once: a second
sweep finds nothing. A member left by an operator's retry is dropped ('gone') whenever
the sweep's clock passes it.

Signals: the main model's types wait for no event, so every signal is kept for a wait to
come (one per event; another id of a kept event dropped), a resend of a signal id is
'seen', and a saga that has ended refuses one. A saga waiting on a run-next-at timer
keeps it too: a signal never ends a timer. ``check_signals`` (stateful_invariants)
holds the hash's kept signals, their count and the remembered ids against the model."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import strategies as st
from hypothesis.stateful import precondition, rule

import tests.state.stateful_harness as harness
from saga.state import signals
from saga.state.errors import SagaNotFoundError, StepConflictError
from saga.state.replies import text
from tests.state.stateful_harness import RedisMachine
from tests.state.stateful_invariants import unchanged
from tests.state.stateful_model import CD, CF, CG, RECORDS, WT, C, F, P, X

ENDED = (C, F, X, CG, CD, CF)
"""States a signal is refused in (signal_saga's 'ended')."""

FAR_MS = 10**13
"""A sweep's clock far ahead of the server's: the script re-checks each timer by its own."""


class WaitRules(RedisMachine):
    @precondition(lambda self: any(m.state == WT or m.stale_timer for m in self.model.values()))
    @rule(force_due=st.booleans(), resend=st.booleans())
    def fire_timers(self, force_due: bool, resend: bool) -> None:
        k = self.keys
        members = [text(r) for r in self.run(self.client.zrange(k.waits(0), 0, -1))]
        if force_due:
            for rid in members:
                self.run(self.client.zadd(k.waits(0), {rid: 1}))
                if self.model[rid].state == WT:
                    self.run(self.client.hset(k.saga(rid), mapping={"wdue": 1, "due": 1}))
                    self.model[rid].timer_past = True
        due = [rid for rid in members if self.model[rid].state == WT and self.model[rid].timer_past]
        stale = [rid for rid in members if self.model[rid].state != WT]  # due or not
        paths = self.run(signals.time_out_due(self.sm, 0, FAR_MS))
        expected = {"resume": len(due), "gone": len(stale)}
        left = len(members) - len(due) - len(stale)
        expected["not_due"] = left
        assert paths == {p: n for p, n in expected.items() if n}, (paths, members)
        harness.event(f"fire timers: {len(due)} resumed, {len(stale)} gone")
        for rid in due:
            m = self.model[rid]
            m.state, m.entry, m.timer_past = P, self._entry_of(rid), False
        for rid in stale:
            self.model[rid].stale_timer = False
        if resend:  # a racing sweeper: nothing more fires
            again = self.run(signals.time_out_due(self.sm, 0, FAR_MS))
            assert again.get("resume", 0) == 0 and again.get("gone", 0) == 0, again

    @rule(
        rid=st.sampled_from(RECORDS),
        event=st.sampled_from(("approved", "other")),
        sid=st.sampled_from(("s0", "s1", "s2")),
    )
    def signal(self, rid: str, event: str, sid: str) -> None:
        m = self.model[rid]
        call = signals.signal(self.sm, rid, event, data=b'{"by":"x"}', signal_id=sid)
        if m.state is None or m.gone:
            self.run(unchanged(self.client, self.keys, _raises(call, SagaNotFoundError)))
            return
        if sid in m.seen:
            res = self.run(unchanged(self.client, self.keys, call))
            assert (res.outcome, res.state) == ("seen", m.state), res
            return
        if m.state in ENDED:
            self.run(unchanged(self.client, self.keys, _raises(call, StepConflictError)))
            return
        res = self.run(call)
        expected = "dropped" if event in m.kept else "kept"
        assert (res.outcome, res.state) == (expected, m.state), (res, m)
        m.seen.add(sid)
        m.kept.setdefault(event, sid)
        harness.event(f"signal: {expected} ({m.state.value})")


async def _raises(call: Any, error: type[Exception]) -> None:
    with pytest.raises(error):
        await call
