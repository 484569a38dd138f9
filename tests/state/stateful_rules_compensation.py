"""The stateful test's compensation rule: the operator's ``saga cancel --compensate``
(and ``saga retry`` of a failed compensation). The undo steps themselves are claimed,
committed and failed by the core rules (test_stateful), like the steps."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from hypothesis import strategies as st
from hypothesis.stateful import precondition, rule

import tests.state.stateful_harness as harness
from saga.state import operator
from saga.state.errors import SagaNotFoundError, StepConflictError
from tests.state.stateful_harness import RedisMachine
from tests.state.stateful_invariants import unchanged
from tests.state.stateful_model import CD, CG, RECORDS, UNDOABLE, C


class CompensationRules(RedisMachine):
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
        harness.event(f"compensate: released {len(self.fair.free(m.step, rid))}")
        m.begin_compensation(lambda: self._entry_of(rid))
        assert (res.state, res.step, res.duplicate) == (m.state, m.step, False)
        harness.event(f"compensate: {m.state.value}")
        if resend:
            again = operator.compensate(self.sm, rid, UNDOABLE, actor="test", op=op)
            assert self.run(unchanged(self.client, self.keys, again)).duplicate


async def _refused(call: Any) -> None:
    with pytest.raises(StepConflictError):
        await call
