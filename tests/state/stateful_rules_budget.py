"""The stateful test's budget holds (docs/budgets.md, "Reserve, then settle"): any claim
ever issued (zombies included) may reserve a call's worst case (``reserve_budget``);
the commit or fail of the attempt settles it: every hold id that attempt reserved is
passed as a cached-answer key, with a cost, and the script releases each hold that is
still there, once (``settle_request`` and ``settled``, used by the commit and fail
rules); ``lapse`` is the maintenance sweep (``lapse_holds``), holds forced due as the
stand-in for time.

The model: every hold's id -> (user, USD, token), and each user's spend. Amounts are
binary fractions, so Lua's and Python's sums agree exactly. The invariant: the holds
hash and deadlines hold exactly the model's holds, each user's total held is the sum of
theirs, the spend is the model's (a hold settled twice, or never, fails it)."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from hypothesis import strategies as st
from hypothesis.stateful import invariant, precondition, rule

import tests.state.stateful_harness as harness
from saga.state import budget_holds
from saga.state.budget_holds import HoldRequest
from saga.state.budgets import Budget
from saga.state.codes import RC
from saga.state.days import utc_day
from saga.state.errors import LeaseLostError, SagaNotFoundError
from saga.state.model import Claim
from saga.state.replies import text
from tests.state.helpers import snapshot
from tests.state.stateful_fairness import USERS
from tests.state.stateful_harness import CLAIMS, RedisMachine
from tests.state.stateful_model import CG, R, Rec

BUDGET = Budget(daily=1.0)
AMOUNTS = (0.125, 0.25, 0.5)
SETTLE_USD = 0.0625
"""The real cost an attempt's commit or fail attributes per hold it made."""


class BudgetRules(RedisMachine):
    def __init__(self, url: str) -> None:
        super().__init__(url)
        self.holds: dict[str, tuple[str, float, str, str]] = {}
        """Hold id -> (user, USD, token of the attempt that holds it, record)."""
        self.spent: defaultdict[str, float] = defaultdict(float)
        self.made: defaultdict[str, list[str]] = defaultdict(list)
        """Token -> hold ids its attempt reserved (or took over): what it settles."""

    def _live(self, m: Rec, token: str) -> bool:
        """The attempt of ``token`` still runs (a step's, or an undo's while compensating)."""
        return bool(token) and m.state in (R, CG) and m.token == token

    @rule(held=CLAIMS, usd=st.sampled_from(AMOUNTS), call=st.integers(0, 1))
    def reserve(self, held: tuple[str, Claim], usd: float, call: int) -> None:
        _, c = held
        m = self.model[c.record_id]
        user = USERS[c.record_id]
        hold_id = self.keys.llm_cache(c.record_id, c.step, f"e{c.epoch}-c{call}")
        req = HoldRequest(record_id=c.record_id, user_id=user, token=c.token,
                          hold_id=hold_id, usd=usd, deadline_ms=c.lease_until_ms)  # fmt: skip
        total = self.spent[user] + sum(u for who, u, _, _ in self.holds.values() if who == user)
        if m.state is None or m.gone:
            expected = RC.NOT_FOUND
        elif not self._live(m, c.token):
            expected = RC.LEASE_LOST
        elif hold_id in self.holds:
            expected = RC.DUPLICATE
        elif total >= 1.0 or total + usd > 1.0:
            expected = RC.OVER_BUDGET
        else:
            expected = RC.OK
        before = self.run(snapshot(self.client, self.keys.prefix))
        try:
            over = self.run(budget_holds.reserve(self.client, self.keys, [self.keys], req, BUDGET))
            got = RC.OK if over is None else RC.OVER_BUDGET
        except LeaseLostError:
            got = RC.LEASE_LOST
        except SagaNotFoundError:
            got = RC.NOT_FOUND
        if got == RC.OK and expected == RC.DUPLICATE:
            got = RC.DUPLICATE  # reserve answers None for both
        assert got == expected, (got, expected, m, self.holds)
        harness.event(f"reserve: {expected.name}")
        if expected in (RC.NOT_FOUND, RC.LEASE_LOST, RC.OVER_BUDGET):
            assert self.run(snapshot(self.client, self.keys.prefix)) == before
            return
        if expected == RC.OK:
            self.holds[hold_id] = (user, usd, c.token, c.record_id)
        else:  # a killed attempt's call run again: the hold is this attempt's now
            owner, amount, _, rid = self.holds[hold_id]
            self.holds[hold_id] = (owner, amount, c.token, rid)
        if hold_id not in self.made[c.token]:
            self.made[c.token].append(hold_id)

    def settle_request(self, c: Claim) -> dict[str, Any]:
        """What an attempt's commit or fail passes: its holds' ids, and their real cost."""
        ids = tuple(self.made.get(c.token, ()))
        return {"cost_keys": ids, "cost": SETTLE_USD * len(ids)}

    def settled(self, c: Claim, cost: float) -> None:
        """The attempt's commit or fail went through (OK): its holds released, once."""
        for hold_id in self.made.get(c.token, ()):
            if self.holds.pop(hold_id, None) is not None:
                harness.event("settle: hold released")
        self.spent[USERS[c.record_id]] += cost

    @precondition(lambda self: bool(self.holds))
    @rule(force_due=st.booleans())
    def lapse(self, force_due: bool) -> None:
        """The sweep: only holds past their deadline (forced: all of them) are looked at;
        one of an attempt still live under its lease moves on, any other is released."""
        if force_due:
            self.run(self.client.zadd(self.keys.holds_due(0), dict.fromkeys(self.holds, 0)))
        released = extended = 0
        if force_due:
            for hold_id, (_, _, token, rid) in list(self.holds.items()):
                m = self.model[rid]
                if self._live(m, token) and m.lease_live:
                    extended += 1
                else:
                    del self.holds[hold_id]
                    released += 1
        got = self.run(budget_holds.lapse_holds(self.client, self.keys, 0))
        assert (got.released, got.extended) == (released, extended), (got, self.holds)
        harness.event(f"lapse: released {released}, extended {extended}")

    @invariant()
    def holds_agree_with_the_model(self) -> None:
        k = self.keys
        pipe = self.client.pipeline(transaction=False)
        pipe.hgetall(k.holds(0))
        pipe.zrange(k.holds_due(0), 0, -1)
        pipe.hgetall(k.spend(0, utc_day()[1]))
        raw, due, spend = self.run(pipe.execute())
        fields = {text(f): text(v) for f, v in raw.items()}
        totals = {f[2:]: float(v) for f, v in fields.items() if f.startswith("u|")}
        found = {f: v for f, v in fields.items() if not f.startswith("u|")}
        expected = {i: f"{u}|{usd!r}|{t}|{rid}" for i, (u, usd, t, rid) in self.holds.items()}
        assert found == expected
        assert {text(d) for d in due} == set(self.holds)
        per_user: defaultdict[str, float] = defaultdict(float)
        for u, usd, _, _ in self.holds.values():
            per_user[u] += usd
        assert totals == {u: v for u, v in per_user.items() if v}
        spent = {text(f): float(v) for f, v in spend.items() if b"|" not in f}
        assert spent == {u: v for u, v in self.spent.items() if v}
