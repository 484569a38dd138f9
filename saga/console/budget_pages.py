"""The Budgets page: every budgeted user's limits, spend this UTC day and month, what is
left, whether they are over (and until when) and their sagas parked for it. Operators
set or clear a budget through a confirmation page and a POST form with the CSRF token;
the change runs ``saga budget``'s own functions, so parked sagas wake as with the CLI.
"""

from __future__ import annotations

import time
from typing import Any
from urllib.parse import urlencode

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from saga.console import params
from saga.console.auth import Identity
from saga.console.budgets import budget_of, left
from saga.console.errors import ConsoleError
from saga.console.pages import see_other
from saga.console.responses import render, service
from saga.console.tokens import Role
from saga.console.web import Body, classify, endpoint, who_of
from saga.state.budgets import Budget, Exceeded, Spend, over_budget
from saga.state.errors import InvalidIdError
from saga.state.ids import validate_id

VIEWER, OPERATOR = Role.VIEWER, Role.OPERATOR


@endpoint(VIEWER, api=False)
async def budgets(request: Request, who: Identity | None) -> Response:
    q = request.query_params
    return await _page(request, params.user(q.get("user")), done=_done(q))


async def _page(
    request: Request, user: str | None, status: int = 200, error: str = "",
    form: dict[str, str] | None = None, done: str = "",
) -> Response:  # fmt: skip
    """The page; ``user``: only that user's row (shown budgeted or not)."""
    view = await service(request).budgets(user)
    rows = [_row(s, view.parked.get(s.user_id, {})) for s in view.budgets]
    return render(request, "budgets.html", status=status, rows=rows, user=user or "",
                  complete=view.parked_complete, error=error, done=done,
                  form=form or _prefill(view.budgets, user))  # fmt: skip


def _row(s: Any, parked: dict[str, int]) -> dict[str, Any]:
    # What is left is what neither the spend nor the calls in flight (their holds) took.
    return {"s": s, "left_day": left(s.daily_usd, s.spent_today_usd + s.reserved_usd),
            "left_month": left(s.monthly_usd, s.spent_month_usd + s.reserved_usd),
            "parked": sum(parked.values()), "by_type": sorted(parked.items()),
            "budgeted": s.daily_usd is not None or s.monthly_usd is not None}  # fmt: skip


def _prefill(rows: list[Any], user: str | None) -> dict[str, str]:
    """The set form starts from the shown user's current limits."""
    s = rows[0] if user and rows else None
    if s is None:
        return {"user": user or "", "daily": "", "monthly": ""}
    return {"user": s.user_id, "daily": _amount(s.daily_usd), "monthly": _amount(s.monthly_usd)}


def _amount(v: float | None) -> str:
    return "" if v is None else f"{v:g}"


def _done(q: Any) -> str:
    woken = q.get("woken", "")
    n = int(woken) if woken.isdigit() else 0
    woke = f" {n} parked saga{'s' if n != 1 else ''} run again now." if n else ""
    if q.get("done") == "set":
        return "Budget set." + (woke or " No parked saga woke (none waited, or the new "
                                "budget is already spent).")  # fmt: skip
    if q.get("done") == "clear":
        return "Budget cleared." + (woke or " No saga was parked for it.")
    if q.get("done") == "none":
        return "The user had no budget; nothing changed." + woke
    return ""


@endpoint(OPERATOR, api=False)
async def confirm(request: Request, who: Identity | None) -> Response:
    """What the change does, before it is made; bad input comes back on the Budgets page
    with its one sentence (400)."""
    q = request.query_params
    action = q.get("action", "set")
    form = {k: q.get(k, "") for k in ("user", "daily", "monthly")}
    try:
        user = validate_id(form["user"].strip(), "user id")
        if action not in ("set", "clear"):
            raise ConsoleError("action must be set or clear")
        new = budget_of(dict(form)) if action == "set" else None
    except (ConsoleError, InvalidIdError) as exc:
        status, message = classify(exc)
        return await _page(request, None, status=status, error=message, form=form)
    view = await service(request).budgets(user)
    [s] = view.budgets
    parked = view.parked.get(user, {})
    return render(request, "budget_confirm.html", action=action, s=s, new=new,
                  row=_row(s, parked), spent=_spent(s, new),
                  complete=view.parked_complete)  # fmt: skip


def _spent(s: Any, new: Budget | None) -> Exceeded | None:
    """Which period of the new budget is spent already (then nothing wakes)."""
    if new is None:
        return None
    return over_budget(new, Spend(s.spent_today_usd, s.spent_month_usd), time.time())


@endpoint(OPERATOR, api=False, mutates=True)
async def set_budget(request: Request, who: Identity | None, body: Body) -> Response:
    user = validate_id(request.path_params["user_id"], "user id")
    res = await service(request).set_budget(who_of(who), user, budget_of(body))
    return see_other("/budgets?" + urlencode({"user": user, "done": "set", "woken": res.woken}))


@endpoint(OPERATOR, api=False, mutates=True)
async def clear_budget(request: Request, who: Identity | None, body: Body) -> Response:
    user = validate_id(request.path_params["user_id"], "user id")
    res = await service(request).clear_budget(who_of(who), user)
    done = "clear" if res.cleared else "none"
    return see_other("/budgets?" + urlencode({"user": user, "done": done, "woken": res.woken}))


def routes() -> list[Route]:
    return [
        Route("/budgets", budgets, methods=["GET"]),
        Route("/budgets/confirm", confirm, methods=["GET"]),
        Route("/budgets/{user_id}/set", set_budget, methods=["POST"]),
        Route("/budgets/{user_id}/clear", clear_budget, methods=["POST"]),
    ]
