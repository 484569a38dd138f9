"""The stateful test's retention rule: an ended saga's retention ends (whatever terminal
state it ended in: completed, failed, cancelled, compensated, compensation_failed) and
the sweep (``prune_retired``) deletes it with its dead letter. Its record is not started
again, so a deferral of an older epoch still waiting is released for a saga that is
gone: the claim (capped) and the requeue that find no hash free the slot reserved for
it, found by its record.

The invariant that goes with it (``stateful_invariants.check_retention``): every saga in
a terminal state has its 'ret' and its member in the retired set due then, whichever
transition ended it; a saga that is not (any more) in one has no 'ret'."""

from __future__ import annotations

from hypothesis import strategies as st
from hypothesis.stateful import precondition, rule

import tests.state.stateful_harness as harness
from saga.state.retention import prune_retired
from tests.state.stateful_fairness import USERS
from tests.state.stateful_harness import RedisMachine
from tests.state.stateful_model import RECORDS, Rec

TERMINAL = ("completed", "failed", "cancelled", "compensated", "compensation_failed")


class RetentionRules(RedisMachine):
    @precondition(lambda self: any(m.state in TERMINAL for m in self.model.values()))
    @rule(rid=st.sampled_from(RECORDS))
    def prune(self, rid: str) -> None:
        """Time passes for an ended saga's retention (its 'ret' and its retired member's
        due time set to 0, the stand-in for time): the sweep deletes its hash, history and
        dead letter; the model forgets it but for the deferrals it may have left."""
        state = self.model[rid].state
        if state not in TERMINAL:
            return
        self.run(self.client.hset(self.keys.saga(rid), "ret", 0))
        member = {f"{USERS[rid]}|{rid}": 0}
        # The transition that ended it put it there (XX: only an existing member moves).
        assert self.run(self.client.zadd(self.keys.retired(0), member, xx=True, ch=True)) == 1
        assert self.run(prune_retired(self.sm, 0)) == 1
        # A timer member an operator's retry left stays for the timer sweep (its 'gone').
        self.model[rid] = Rec(gone=True, stale_timer=self.model[rid].stale_timer)
        harness.event(f"prune: a {state} saga deleted")
