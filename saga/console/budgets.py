"""Budgets in the console: the shapes the API answers with, and the one check of the
amounts a person types (a form's strings or a JSON body's numbers).

Reading and changing a budget goes through ``saga.state.budgets`` (the functions
``saga budget`` uses), so raising or clearing one wakes the user's parked sagas
exactly as the CLI does.
"""

from __future__ import annotations

import math
from typing import Any

import msgspec

from saga.console.errors import ConsoleError
from saga.state.budgets import Budget, BudgetStatus

AMOUNT_TEXT = "a number of USD, 0 or more, such as 5 or 2.50"


class BudgetsView(msgspec.Struct, kw_only=True):
    """``GET /api/v1/budgets``: ``saga budget show --json``'s rows, and how many of each
    listed user's sagas wait for their budget, per saga type."""

    budgets: list[BudgetStatus]
    parked: dict[str, dict[str, int]]
    """User → saga type → sagas parked for the budget (a user with none is absent)."""
    parked_complete: bool
    """False when more sagas waited than one request reads: the counts are lower bounds."""


class BudgetSet(msgspec.Struct, kw_only=True):
    """``PUT /api/v1/budgets/{user_id}``: the user's new status (as ``saga budget set
    --json`` prints it) and how many parked sagas woke."""

    budget: BudgetStatus
    woken: int


def amount(body: dict[str, Any], name: str) -> float | None:
    """``name`` in USD: a JSON number or a form's string; absent, null or "" is no limit."""
    value = body.get(name)
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if isinstance(value, str):
        try:
            value = float(value.strip().removeprefix("$"))
        except ValueError:
            raise ConsoleError(f"the {name} budget must be {AMOUNT_TEXT}") from None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ConsoleError(f"the {name} budget must be {AMOUNT_TEXT}")
    if not math.isfinite(value) or value < 0:
        raise ConsoleError(f"the {name} budget must be {AMOUNT_TEXT}")
    return float(value)


def budget_of(body: dict[str, Any]) -> Budget:
    """The budget a form or a JSON body asks for; at least one of its limits."""
    daily, monthly = amount(body, "daily"), amount(body, "monthly")
    if daily is None and monthly is None:
        raise ConsoleError("give a daily or a monthly budget (USD), or both")
    return Budget(daily=daily, monthly=monthly)  # refuses 1e9 and over (InvalidIdError: 400)


def left(limit: float | None, spent: float) -> float | None:
    """What is left of a limit (never below 0); None without a limit."""
    return None if limit is None else max(0.0, round(limit - spent, 9))
