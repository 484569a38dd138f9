"""Budget metrics (docs/budgets.md, "Seeing it"): what the worker's calls held, the
holds the maintenance sweep released because their attempt was gone (fleet-wide, from
the partitions' counters), and, with ``SAGA_METRICS_BY_USER``, each budgeted user's
reserved, spent and left. The per-user numbers come from ``budgets.statuses`` (what
``saga budget show`` prints), read off the scrape path with the queue numbers.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from opentelemetry.metrics import CallbackOptions, Meter, Observation

from saga.state.budgets import BudgetStatus, statuses
from saga.state.keys import Keys

MOST_USERS = 200
"""Budgeted users exported per scrape at most (per-user series are opt-in anyway)."""


class BudgetSnapshot:
    """The last budget numbers read (``refresh``, with the queue numbers)."""

    def __init__(self) -> None:
        self.per_user = False
        self.users: list[BudgetStatus] = []
        self.lapsed: dict[str, int] = {}
        """Saga type -> holds lapsed, summed over its partitions."""

    async def refresh(self, client: Any, types: Sequence[Keys]) -> None:
        pipe = client.pipeline(transaction=False)
        for keys in types:
            for p in keys.all_partitions():
                pipe.hget(keys.stats(p), "holds_lapsed")
        replies = iter(await pipe.execute())
        self.lapsed = {
            k.saga_type: sum(int(next(replies) or 0) for _ in k.all_partitions()) for k in types
        }
        if self.per_user and types:
            self.users = (await statuses(client, types[0]))[:MOST_USERS]


class BudgetInstruments:
    def __init__(self, meter: Meter, snapshot: BudgetSnapshot, saga_type: str) -> None:
        self.snapshot, self.saga_type = snapshot, saga_type
        self._reserved = meter.create_counter(
            "saga_budget_reserved_usd",
            unit="1",
            description="USD held against users' budgets by this process's model calls "
            "(each call's worst case, released when its attempt commits or fails).",
        )
        meter.create_observable_counter(
            "saga_budget_holds_lapsed",
            [self._lapsed],
            unit="1",
            description="Budget holds released by the maintenance sweep because their "
            "attempt was gone (killed and never re-run, cancelled, retried).",
        )
        if snapshot.per_user:
            for name, field, text in (
                ("saga_budget_held_usd", "held", "USD held now by the user's calls in flight."),
                ("saga_budget_spent_usd", "spent", "USD the user spent this period (UTC)."),
                ("saga_budget_left_usd", "left", "USD left of the user's budget this period, "
                 "after spend and holds."),
            ):  # fmt: skip
                meter.create_observable_gauge(name, [self._per_user(field)], description=text)

    def reserved(self, step: str, usd: float) -> None:
        if usd:
            self._reserved.add(usd, {"saga_type": self.saga_type, "step": step})

    def _lapsed(self, _options: CallbackOptions) -> Iterable[Observation]:
        for saga_type, n in list(self.snapshot.lapsed.items()):
            yield Observation(n, {"saga_type": saga_type})

    def _per_user(self, field: str) -> Any:
        def observe(_options: CallbackOptions) -> Iterable[Observation]:
            for s in list(self.snapshot.users):
                if field == "held":
                    yield Observation(s.reserved_usd, {"user_id": s.user_id})
                    continue
                for period, limit, spent in (
                    ("day", s.daily_usd, s.spent_today_usd),
                    ("month", s.monthly_usd, s.spent_month_usd),
                ):
                    labels = {"user_id": s.user_id, "period": period}
                    if field == "spent":
                        yield Observation(spent, labels)
                    elif limit is not None:
                        yield Observation(max(0.0, limit - spent - s.reserved_usd), labels)

        return observe


NAMES = ["saga_budget_reserved_usd_total", "saga_budget_holds_lapsed_total"]
PER_USER_NAMES = ["saga_budget_held_usd", "saga_budget_spent_usd", "saga_budget_left_usd"]
