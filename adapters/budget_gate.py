"""The budget before a model call: hold the call's worst-case cost against the user's
budget (``reserve``), or park the step when it does not fit (``saga budget set``),
without calling the model or spending the attempt. The attempt's commit or fail settles
the hold (docs/budgets.md, "Reserve, then settle").

Cheap when nobody has a budget: whether any budget exists is read at most once per
``refresh_s`` (one HLEN), so the hot path of a deployment without budgets makes no
extra round trip. With budgets, each model call first reads the user's budget and
spend (one pipeline: HGET plus one HMGET per partition and saga type).

Consistency bound: every call holds its worst case before it is made, in one script
that counts the spend and every hold in flight, so the calls in flight can together
never pass the budget; what can is a call whose real cost exceeds its estimate (a
provider's price differing from litellm's map). Right after the very first budget of
the keyspace is set, calls started within ``refresh_s`` (before the workers noticed that
budgets exist) hold nothing. ``check`` is the older spend-only check, kept for callers
without an attempt.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import structlog

from saga.adapters.provider_calls import Estimate
from saga.state import budget_holds, budgets
from saga.state.budget_holds import HoldRequest
from saga.state.keys import Keys
from saga.state.model import Claim
from saga.state.types import type_names
from saga.steps.errors import BudgetExceededError

_log = structlog.get_logger("saga.budget")


class BudgetGate:
    """One per worker process; ``check(user)`` before each model call."""

    def __init__(
        self,
        client: Any,
        keys: Keys,
        *,
        refresh_s: float = 5.0,
        clock: Callable[[], float] = time.time,
        cluster: bool = False,
        on_hold: Callable[[str, float], None] | None = None,
    ) -> None:
        """``cluster``: Redis Cluster (a script sees one slot: see state/budget_holds);
        ``on_hold(step, usd)`` is told of every hold made (the worker's metrics)."""
        self.client, self.keys, self.refresh_s, self.clock = client, keys, refresh_s, clock
        self.cluster, self.on_hold = cluster, on_hold
        self._until = 0.0
        self._on = False
        self._keyspaces: list[Keys] = [keys]

    async def _refresh(self, now: float) -> None:
        self._on = await budgets.any_budgets(self.client, self.keys)
        if self._on:  # spend is counted per saga type: read every registered type's
            names = set(await type_names(self.client, self.keys)) | {self.keys.saga_type}
            self._keyspaces = [self.keys.of_type(n) for n in sorted(names)]
        self._until = now + self.refresh_s

    async def check(self, user_id: str) -> None:
        """Return when ``user_id`` may call a model now; raise BudgetExceededError if not."""
        now = self.clock()
        if now >= self._until:
            await self._refresh(now)
        if not self._on:
            return
        pipe = self.client.pipeline(transaction=False)
        pipe.hget(self.keys.budgets(), user_id)
        budgets.spend_pipeline(pipe, self._keyspaces, user_id, now)
        raw, *spends = await pipe.execute()
        if raw is None:
            return
        found = budgets.over_budget(budgets.decode(raw), budgets.sum_spend(spends), now)
        if found is None:
            return
        _log.warning(
            "budget_exceeded",
            period=found.period,
            spent_usd=found.spent,
            budget_usd=found.limit,
            resumes_at=int(found.resumes_at),
        )
        raise BudgetExceededError(user_id, found.period, found.spent, found.limit, found.resumes_at)

    async def reserve(self, claim: Claim, hold_id: str, estimate: Estimate) -> bool:
        """Hold a call's worst case (``estimate()``, asked only when the user has a
        budget) for ``claim``'s attempt under ``hold_id``. True: held (the attempt's
        commit or fail settles it); False: no budget; BudgetExceededError: it does not
        fit (the step parks)."""
        now = self.clock()
        if now >= self._until:
            await self._refresh(now)
        if not self._on:
            return False
        raw = await self.client.hget(self.keys.budgets(), claim.user_id)
        if raw is None:
            return False
        usd = await estimate()
        req = HoldRequest(
            record_id=claim.record_id,
            user_id=claim.user_id,
            token=claim.token,
            hold_id=hold_id,
            usd=usd,
            deadline_ms=claim.lease_until_ms,
        )
        found = await budget_holds.reserve(
            self.client, self.keys, self._keyspaces, req, budgets.decode(raw),
            now=now, cluster=self.cluster,
        )  # fmt: skip
        if found is None:
            if self.on_hold is not None:
                self.on_hold(claim.step, usd)
            return True
        _log.warning(
            "budget_exceeded",
            period=found.period,
            spent_usd=found.spent,
            budget_usd=found.limit,
            estimate_usd=round(usd, 9),
            resumes_at=int(found.resumes_at),
        )
        raise BudgetExceededError(
            claim.user_id, found.period, found.spent, found.limit, found.resumes_at, usd
        )
