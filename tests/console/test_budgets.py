"""Budgets in the console's JSON API: the list answers like ``saga budget show --json``
with each user's budget-parked sagas; operators set and clear a budget through the CLI's
own functions (parked sagas wake as with ``saga budget``), bad input is one sentence
with a 400, and viewers cannot change anything."""

from __future__ import annotations

import time
from typing import Any

import pytest
from structlog.testing import capture_logs

from saga.console.tokens import Role
from saga.state import budgets
from saga.state.budgets import Budget, next_day
from saga.state.keys import Keys
from saga.state.machine import StateMachine
from saga.state.reads import get_saga, get_saga_and_history
from tests.console.sagas import budget_parked, waiting
from tests.console.support import RunningConsole, check_schema, cli_json

pytestmark = pytest.mark.anyio


async def two_users(sm: StateMachine, redis: Any, keys: Keys) -> None:
    """u-over: daily $0.50, $0.75 spent today, two sagas parked for it and one waiting on
    an ordinary retry; u-ok: monthly $100, nothing spent."""
    await budgets.set_budget(redis, keys, "u-over", Budget(daily=0.5))
    await budgets.set_budget(redis, keys, "u-ok", Budget(monthly=100.0))
    await budget_parked(sm, "bp-1", "u-over", cost=0.5)
    await budget_parked(sm, "bp-2", "u-over", cost=0.25)
    await waiting(sm, "w-1", "u-over")


async def api(console: RunningConsole, token: str, method: str, path: str, **kw: Any) -> Any:
    async with console.client(token) as http:
        return await http.request(method, f"/api/v1{path}", **kw)


async def test_list_is_the_clis_document_with_parked_counts(
    sm: StateMachine, console: RunningConsole, tokens: dict[Role, str], redis: Any, keys: Keys,
    env: dict[str, str],
) -> None:  # fmt: skip
    """A viewer reads every budget, its spend and when an over-budget user resumes, as
    `saga budget show --json` prints them; parked counts only budget-parked sagas, per
    type; ``?user=`` shows a user without a budget too."""
    await two_users(sm, redis, keys)
    res = await api(console, tokens[Role.VIEWER], "GET", "/budgets")
    assert res.status_code == 200, res.text
    doc = res.json()
    check_schema("Budgets", doc)
    assert doc["budgets"] == (await cli_json(env, "budget", "show"))["budgets"]
    ok, over = doc["budgets"]  # sorted by user id
    assert (over["user_id"], over["daily_usd"], over["spent_today_usd"]) == ("u-over", 0.5, 0.75)
    assert over["exceeded"] == "daily"
    assert over["resumes_at_ms"] == int(next_day(time.time()) * 1000)
    assert (ok["user_id"], ok["monthly_usd"], ok["exceeded"]) == ("u-ok", 100.0, "")
    assert doc["parked"] == {"u-over": {"documents": 2}} and doc["parked_complete"] is True
    res = await api(console, tokens[Role.VIEWER], "GET", "/budgets", params={"user": "u-none"})
    assert res.json()["budgets"] == [{
        "user_id": "u-none", "daily_usd": None, "monthly_usd": None, "spent_today_usd": 0.0,
        "spent_month_usd": 0.0, "exceeded": "", "resumes_at_ms": 0,
        "reserved_usd": 0.0}]  # fmt: skip


async def test_raising_a_budget_wakes_the_parked_sagas_and_is_audited(
    sm: StateMachine, console: RunningConsole, tokens: dict[Role, str], redis: Any, keys: Keys
) -> None:
    """A budget still spent wakes nothing; one above the spend wakes the user's parked
    sagas (history 'promoted', budget raised), leaves the ordinary retry waiting, and the
    audit log names the operator."""
    await two_users(sm, redis, keys)
    op = tokens[Role.OPERATOR]
    res = await api(console, op, "PUT", "/budgets/u-over", json={"daily": 0.6, "monthly": 9})
    assert res.status_code == 200, res.text
    check_schema("BudgetSet", res.json())
    assert res.json()["woken"] == 0 and res.json()["budget"]["exceeded"] == "daily"
    assert (await get_saga(redis, keys, "bp-1")).state.value == "waiting_retry"
    with capture_logs() as logs:
        res = await api(console, op, "PUT", "/budgets/u-over", json={"daily": 5})
    assert res.status_code == 200, res.text
    assert res.json()["woken"] == 2
    assert res.json()["budget"] | {"resumes_at_ms": 0} == {
        "user_id": "u-over", "daily_usd": 5.0, "monthly_usd": None, "spent_today_usd": 0.75,
        "spent_month_usd": 0.75, "exceeded": "", "resumes_at_ms": 0,
        "reserved_usd": 0.0}  # fmt: skip
    assert await budgets.budgets(redis, keys, "u-over") == {"u-over": Budget(daily=5.0)}
    for rid in ("bp-1", "bp-2"):
        saga, events = await get_saga_and_history(redis, keys, rid)
        assert saga.state.value == "pending" and events[-1].event.value == "promoted"
        assert "budget raised" in events[-1].detail
    assert (await get_saga(redis, keys, "w-1")).state.value == "waiting_retry"
    audit = [e for e in logs if e["event"] == "console_action"]
    assert [(e["action"], e["actor"], e["user_id"], e["outcome"]) for e in audit] == [
        ("set_budget", "console olga", "u-over", "ok")]  # fmt: skip


async def test_clearing_a_budget_wakes_the_parked_sagas(
    sm: StateMachine, console: RunningConsole, tokens: dict[Role, str], redis: Any, keys: Keys
) -> None:
    """DELETE answers like `saga budget clear --json`; clearing again says it had none."""
    await two_users(sm, redis, keys)
    op = tokens[Role.OPERATOR]
    res = await api(console, op, "DELETE", "/budgets/u-over")
    assert res.status_code == 200, res.text
    check_schema("BudgetCleared", res.json())
    assert res.json() == {"user_id": "u-over", "cleared": True, "woken": 2}
    assert (await get_saga(redis, keys, "bp-2")).state.value == "pending"
    res = await api(console, op, "DELETE", "/budgets/u-over")
    assert res.json() == {"user_id": "u-over", "cleared": False, "woken": 0}
    assert await budgets.budgets(redis, keys) == {"u-ok": Budget(monthly=100.0)}


@pytest.mark.parametrize(
    ("path", "body", "error"),
    [
        ("/budgets/u-1", {"daily": -1}, "the daily budget must be a number of USD, 0 or more, "
                                        "such as 5 or 2.50"),
        ("/budgets/u-1", {"monthly": "lots"}, "the monthly budget must be a number of USD, 0 or "
                                              "more, such as 5 or 2.50"),
        ("/budgets/u-1", {"daily": True}, "the daily budget must be a number of USD, 0 or more, "
                                          "such as 5 or 2.50"),
        ("/budgets/u-1", {"daily": "NaN"}, "the daily budget must be a number of USD, 0 or more, "
                                           "such as 5 or 2.50"),
        ("/budgets/u-1", {}, "give a daily or a monthly budget (USD), or both"),
        ("/budgets/u-1", {"daily": None, "monthly": ""}, "give a daily or a monthly budget "
                                                         "(USD), or both"),
        ("/budgets/u-1", {"monthly": 2e9}, "a monthly budget must be between 0 and 1e9 USD."),
        ("/budgets/bad%7Bid%7D", {"daily": 1}, "user id 'bad{id}' contains '{'; allowed are "
                                               "letters, digits and . _ : @ + = -."),
    ],
)  # fmt: skip
async def test_bad_input_is_one_sentence_and_a_400(
    console: RunningConsole, tokens: dict[Role, str], redis: Any, keys: Keys,
    path: str, body: dict[str, Any], error: str,
) -> None:  # fmt: skip
    """Negative, non-numeric, missing or too large amounts and a user id that cannot be a
    key are refused with one sentence; nothing is stored."""
    res = await api(console, tokens[Role.OPERATOR], "PUT", path, json=body)
    assert (res.status_code, res.json()) == (400, {"error": error})
    assert await budgets.budgets(redis, keys) == {}


async def test_a_viewer_cannot_change_a_budget(
    sm: StateMachine, console: RunningConsole, tokens: dict[Role, str], redis: Any, keys: Keys
) -> None:
    """Setting and clearing are 403 for a viewer; the budget and the parked sagas stay."""
    await two_users(sm, redis, keys)
    for method, kw in (("PUT", {"json": {"daily": 9}}), ("DELETE", {})):
        res = await api(console, tokens[Role.VIEWER], method, "/budgets/u-over", **kw)
        assert res.status_code == 403, res.text
    assert await budgets.budgets(redis, keys, "u-over") == {"u-over": Budget(daily=0.5)}
    assert (await get_saga(redis, keys, "bp-1")).state.value == "waiting_retry"
