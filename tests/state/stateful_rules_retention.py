"""The stateful test's retention rule: a completed saga's retention ends and the sweep
(``prune_retired``) deletes it. Its record is not started again, so a deferral of an
older epoch still waiting is released for a saga that is gone: the claim (capped) and
the requeue that find no hash free the slot reserved for it, found by its record."""

from __future__ import annotations

from hypothesis import strategies as st
from hypothesis.stateful import precondition, rule

import tests.state.stateful_harness as harness
from saga.state.retention import prune_retired
from tests.state.stateful_fairness import USERS
from tests.state.stateful_harness import RedisMachine
from tests.state.stateful_model import RECORDS, C, Rec


class RetentionRules(RedisMachine):
    @precondition(lambda self: self._in(C))
    @rule(rid=st.sampled_from(RECORDS))
    def prune(self, rid: str) -> None:
        """Time passes for a completed saga's retention (its 'ret' and its retired member's
        due time set to 0, the stand-in for time): the sweep deletes its hash and
        history; the model forgets it but for the deferrals it may have left."""
        if self.model[rid].state != C:
            return
        self.run(self.client.hset(self.keys.saga(rid), "ret", 0))
        member = {f"{USERS[rid]}|{rid}": 0}
        assert self.run(self.client.zadd(self.keys.retired(0), member, xx=True, ch=True)) == 1
        assert self.run(prune_retired(self.sm, 0)) == 1
        self.model[rid] = Rec(gone=True)
        harness.event("prune: a completed saga deleted")
