"""The stateful test's per-user cap rules (the model's side: stateful_fairness): claims
under the cap, which defer a user's entry past its slot, and the release of deferrals."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st
from hypothesis.stateful import multiple, precondition, rule

import tests.state.stateful_harness as harness
from tests.state.helpers import read_ready
from tests.state.stateful_fairness import CAP
from tests.state.stateful_harness import CLAIMS, RedisMachine
from tests.state.stateful_model import LEASE_MS, STEPS, WORKERS, P


class FairnessRules(RedisMachine):
    @precondition(lambda self: self._in(P))
    @rule(target=CLAIMS, worker=st.sampled_from(WORKERS), count=st.sampled_from([1, 2]))
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
        harness.event(f"release_deferred: {len(expected)}")
