"""The maps model with a compensation on the map itself (tests/state/test_stateful_map.py).

x -> m (its compensation undoes each committed item: ``includes/undo_plan.lua``) -> j, on
the rules of tests/state/stateful_map.py plus: an item failed for good, j failed for
good, or the operator's compensate (from any state but completed, and to resume a failed
compensation) starts the compensation; undo:m's entries are claimed, committed
(re-sent too) and failed for good (compensation_failed) in any order. The model holds:

- the plan is the run's committed items not yet undone, latest commit first (the order
  read from their commit times, 'mc'), failed, pending or running items never in it; an
  empty plan dead-letters (a failure) or compensates at once (the operator's);
- each undo claim is of the plan's head: the item's input, output and the key it ran
  under; its commit marks the item undone (``mu:m:<i>``), once: no item is undone twice
  ('committed' events of undo:m per item), a re-sent commit is a duplicate;
- a re-sent failure is a duplicate only if it is the saga's last recorded one ('failtok',
  written by fail_undo and by j's fail_step); an earlier attempt's is fenced (LEASE_LOST).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import pytest
from hypothesis import strategies as st
from hypothesis.stateful import Bundle, initialize, invariant, multiple, precondition, rule

from saga.api.undo import next_undo, step_key, undone_item
from saga.state import operator
from saga.state.codes import RC
from saga.state.errors import SagaNotFoundError, StepConflictError
from saga.state.map_calls import MapPlan
from saga.state.model import Claim, FailAction
from saga.state.replies import text
from saga.state.requests import CommitRequest, FailRequest
from saga.state.streams import ensure_groups
from tests.state.helpers import history, read_ready
from tests.state.stateful_map import CONC, FAR_MS, RECORDS, MapMachine, Rec

UNDO = "undo:m"
ENDED = ("compensating", "compensated", "compensation_failed")


@dataclass
class Undo:
    plan: list[int] = field(default_factory=list)
    """The items left to undo, in order (while compensating)."""
    pending: bool = False
    """An undo entry waits to be claimed."""
    token: str = ""
    """The live undo claim's token ("" when none)."""
    committed: set[str] = field(default_factory=set)
    failtok: str = ""
    """The saga's last recorded failure (its 'failtok'): an undo's or j's."""


class UndoMapMachine(MapMachine):
    undos = Bundle("undos")

    def __init__(self, url: str) -> None:
        super().__init__(url)
        self.plan = MapPlan(over="x", next_step="j", concurrency=CONC, undo=("m",))
        self.sm.maps["m"] = self.plan
        self.run(ensure_groups(self.client, self.keys, [UNDO]))
        self.u = {rid: Undo() for rid in RECORDS}

    # -- the model's compensation ---------------------------------------------------
    def _undoable(self, rid: str, m: Rec) -> list[int]:
        """The run's committed items not undone, latest commit first (ties: higher index)."""
        items = [i for i in range(m.n) if m.mi.get(i) == (m.run, "d") and i not in m.undone]
        if not items:
            return []
        mc = self.run(self.client.hmget(self.keys.saga(rid), [f"mc:m:{i}" for i in items]))
        return [i for _, i in sorted(zip([int(v) for v in mc], items, strict=True), reverse=True)]

    def _begin(self, rid: str, m: Rec, *, dead: bool) -> None:
        plan = self._undoable(rid, m)
        if not plan and dead:
            m.state = "failed"
            return
        u = self.u[rid]
        m.epoch += 1
        u.plan, u.pending, u.token = plan, bool(plan), ""
        m.state = "compensating" if plan else "compensated"
        if plan:
            m.step = UNDO

    def _failed_for_good(self, rid: str, m: Rec) -> None:
        self._begin(rid, m, dead=True)

    # -- rules -------------------------------------------------------------------------
    @precondition(lambda self: self._at("j"))
    @rule()
    def join_fails(self) -> None:
        """j fails for good: the map's items are undone (all committed: the fan-in ran)."""
        for c in self._claim_plain("j", "m"):
            m = self.model[c.record_id]
            req = FailRequest(action=FailAction.DEAD, error_class="Boom", error_message="boom",
                              undo=("m",))  # fmt: skip
            out = self.run(self.sm.fail(c, req))
            self.u[c.record_id].failtok = c.token
            self._begin(c.record_id, m, dead=True)
            assert (out.code, out.state) == (RC.OK, m.state), (out, m)

    @initialize(target=MapMachine.claims, n0=st.integers(1, 3), n1=st.integers(0, 3))
    def spawned(self, n0: int, n1: int) -> object:
        """Both records started, at their maps, the first items claimed: the rules start
        where there is something to undo (the maps model draws the way there)."""
        super().start(RECORDS[0], n0)
        super().start(RECORDS[1], n1)
        self.over()
        self.claim()  # the spawns
        return self.claim()

    @precondition(lambda self: any(m.done or m.state in ("compensation_failed", "cancelled")
                                   for m in self.model.values()))  # fmt: skip
    @rule(rid=st.sampled_from(RECORDS))
    def compensate(self, rid: str) -> None:
        """The operator's compensate: from any state but completed; a compensating or
        compensated saga is left alone; a failed compensation resumes."""
        m = self.model[rid]
        call = operator.compensate(self.sm, rid, ("m",), actor="test")
        if not m.state:
            with pytest.raises(SagaNotFoundError):
                self.run(call)
            return
        if m.state == "completed":
            with pytest.raises(StepConflictError):
                self.run(call)
            return
        res = self.run(call)
        if m.state in ("compensating", "compensated"):
            assert res.duplicate and res.state == m.state, (res, m)
            return
        self._begin(rid, m, dead=False)
        assert (res.state, res.step) == (m.state, m.step), (res, m)

    @rule(rid=st.sampled_from(RECORDS))
    def cancel(self, rid: str) -> None:
        if self.model[rid].state not in ENDED:
            super().cancel(rid)

    @precondition(lambda self: any(u.pending for u in self.u.values()))
    @rule(target=undos)
    def undo_claim(self) -> object:
        entries = self.run(read_ready(self.client, self.keys, UNDO, "w-a", count=100))
        outs = self.run(self.sm.claim(UNDO, 0, entries, worker="w-a", lease_ms=FAR_MS,
                                      max_lease_expiries=3, prev_step="x"))  # fmt: skip
        got: list[Claim] = []
        for (_, rid), o in zip(entries, outs, strict=True):
            m, u = self.model[rid], self.u[rid]
            live = m.state == "compensating" and u.pending
            assert o.code == (RC.OK if live else RC.STALE_ENTRY), (o, m, u)
            if o.claim is None:
                continue
            i = u.plan[0]
            assert undone_item(o.claim) == i, (o.claim.extra, u)
            assert text(o.claim.extra["output"]) == m.outs[i].decode(), (o.claim.extra, m)
            assert step_key(o.claim) == f"{rid}:m:{i}:e{m.run}", step_key(o.claim)
            u.pending, u.token = False, o.claim.token
            got.append(o.claim)
        return multiple(*got)

    @rule(c=undos)
    def undo_commit(self, c: Claim | None) -> None:
        if c is None:
            return
        m, u = self.model[c.record_id], self.u[c.record_id]
        out = self.run(self.sm.commit(c, CommitRequest(output=b"{}", next_step=next_undo(c))))
        if c.token in u.committed:
            assert out.code == RC.DUPLICATE, (out, u)
            return
        if not (m.state == "compensating" and u.token == c.token):
            assert out.code == RC.LEASE_LOST, (out, m, u)
            return
        m.undone.add(u.plan.pop(0))
        u.committed.add(c.token)
        u.token, u.pending = "", bool(u.plan)
        m.state = "compensating" if u.plan else "compensated"
        assert (out.code, out.state) == (RC.OK, m.state), (out, m, u)

    @rule(c=undos)
    def undo_fail(self, c: Claim | None) -> None:
        """An undo fails for good: compensation_failed (the operator may resume it)."""
        if c is None:
            return
        m, u = self.model[c.record_id], self.u[c.record_id]
        req = FailRequest(action=FailAction.DEAD, error_class="Boom", error_message="no")
        out = self.run(self.sm.fail(c, req))
        if c.token == u.failtok:
            assert out.code == RC.DUPLICATE, (out, u)
            return
        if not (m.state == "compensating" and u.token == c.token):
            assert out.code == RC.LEASE_LOST, (out, m, u)
            return
        u.failtok, u.token, m.state = c.token, "", "compensation_failed"
        assert (out.code, out.state) == (RC.OK, m.state), (out, m)

    # -- invariants ------------------------------------------------------------------
    @invariant()
    def each_item_is_undone_once(self) -> None:
        self.run(self._check_undos())

    async def _check_undos(self) -> None:
        for rid, m in self.model.items():
            if not m.state:
                continue
            h = {
                text(k): text(v)
                for k, v in (await self.client.hgetall(self.keys.saga(rid))).items()
            }
            if m.state == "compensating":
                assert h["undo"] == ",".join(f"m[{i}]" for i in self.u[rid].plan), (h, self.u[rid])
            marked = {int(f.split(":")[2]) for f, v in h.items()
                      if f.startswith("mu:m:") and v.startswith(f"{m.run}|")}  # fmt: skip
            assert marked == m.undone, (marked, m)
            hist = await history(self.client, self.keys, rid)
            undone = Counter(f.get("i") for f in hist
                             if f.get("e") == "committed" and f["s"] == UNDO)  # fmt: skip
            assert max(undone.values(), default=0) <= 1, undone  # no item undone twice
            assert {int(i) for i in undone} == m.undone, (undone, m)
