"""The budget check before a model call: park the step when the user's spend has reached
their budget (``saga budget set``), without calling the model or spending the attempt.

Cheap when nobody has a budget: whether any budget exists is read at most once per
``refresh_s`` (one HLEN), so the hot path of a deployment without budgets makes no
extra round trip. With budgets, each model call first reads the user's budget and
spend (one pipeline: HGET plus one HMGET per partition and saga type).

Consistency bound: spend is counted when an attempt commits or fails, and every model
call is checked just before it is made, so once a user's counter reaches the budget no
new call starts. The overshoot is at most what the attempts already past their check
cost — attempts in flight when the budget was reached x the most one attempt costs —
plus, right after the very first budget of the keyspace is set, the calls started
within ``refresh_s`` (before the workers noticed that budgets exist).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import structlog

from saga.state import budgets
from saga.state.keys import Keys
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
    ) -> None:
        self.client, self.keys, self.refresh_s, self.clock = client, keys, refresh_s, clock
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
