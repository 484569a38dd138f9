"""The Budgets page: viewers read limits, spend, what is left, who is over and until
when, and the parked sagas; operators set and clear a budget through a confirmation and
a POST form with the CSRF token; bad input is one sentence on the page with a 400; a
budget-parked saga's page links to its user's budget."""

from __future__ import annotations

import html
import re
import time
from typing import Any

import pytest

from saga.console.draw import when
from saga.console.tokens import Role
from saga.state import budgets
from saga.state.budgets import Budget, next_day
from saga.state.keys import Keys
from saga.state.machine import StateMachine
from saga.state.reads import get_saga
from tests.console.sagas import waiting
from tests.console.support import RunningConsole, csrf_of, sign_in
from tests.console.test_budgets import two_users

pytestmark = pytest.mark.anyio


def row(page: str, user: str) -> str:
    found = re.search(rf'<tr id="budget-{re.escape(user)}".*?</tr>', page, re.S)
    assert found, page
    return html.unescape(re.sub(r"<[^>]+>", " ", found.group(0)))


def words(text: str) -> str:
    return " ".join(text.split())


async def test_a_viewer_sees_spend_left_over_and_parked_but_no_controls(
    sm: StateMachine, console: RunningConsole, tokens: dict[Role, str], redis: Any, keys: Keys
) -> None:
    """Each budgeted user is a row: limits, spend, what is held (reserved), what is left,
    over until the next UTC midnight, the budget-parked sagas (linked to the list); no set
    form or clear link."""
    await two_users(sm, redis, keys)
    async with console.client() as http:
        await sign_in(http, tokens[Role.VIEWER])
        page = (await http.get("/budgets")).text
    over = words(row(page, "u-over"))
    assert over.startswith("u-over $0.50 $0.75 $0 $0 - $0.75 - over the daily budget")
    assert f"parked until {when(int(next_day(time.time()) * 1000))} UTC" in over
    assert over.endswith("2 documents")
    assert 'href="/sagas?state=parked&amp;user=u-over"' in page
    assert words(row(page, "u-ok")) == "u-ok - $0 $0 - $100 $0 $100 within budget 0"
    assert 'id="set"' not in page and "/budgets/confirm" not in page


async def test_an_operator_raises_a_budget_through_a_confirmation(
    sm: StateMachine, console: RunningConsole, tokens: dict[Role, str], redis: Any, keys: Keys
) -> None:
    """The form leads to a confirmation saying what wakes; without the CSRF token the POST
    is refused; with it the budget is set, the parked sagas run again, and the page says
    how many."""
    await two_users(sm, redis, keys)
    async with console.client() as http:
        await sign_in(http, tokens[Role.OPERATOR])
        page = (await http.get("/budgets")).text
        assert 'id="set"' in page and "/budgets/confirm?action=clear&amp;user=u-over" in page
        confirm = await http.get("/budgets/confirm", params={
            "action": "set", "user": "u-over", "daily": "5", "monthly": ""})  # fmt: skip
        assert confirm.status_code == 200, confirm.text
        assert "2 saga(s) parked for the budget run again now (documents 2)." in confirm.text
        assert f'name="csrf" value="{csrf_of(http)}"' in confirm.text
        res = await http.post("/budgets/u-over/set", data={"daily": "5", "monthly": ""})
        assert res.status_code == 403
        assert (await get_saga(redis, keys, "bp-1")).state.value == "waiting_retry"
        form = {"daily": "5", "monthly": "", "csrf": csrf_of(http)}
        res = await http.post("/budgets/u-over/set", data=form)
        assert res.status_code == 303, res.text
        assert res.headers["location"] == "/budgets?user=u-over&done=set&woken=2"
        done = (await http.get(res.headers["location"])).text
    assert "Budget set. 2 parked sagas run again now." in done
    assert words(row(done, "u-over")).startswith("u-over $5 $0.75 $0 $4.25 - $0.75 - within")
    assert await budgets.budgets(redis, keys, "u-over") == {"u-over": Budget(daily=5.0)}
    assert (await get_saga(redis, keys, "bp-2")).state.value == "pending"


async def test_a_budget_already_spent_is_said_before_it_is_set(
    sm: StateMachine, console: RunningConsole, tokens: dict[Role, str], redis: Any, keys: Keys
) -> None:
    """Confirming a budget below the spend says nothing wakes and until when."""
    await two_users(sm, redis, keys)
    async with console.client() as http:
        await sign_in(http, tokens[Role.OPERATOR])
        confirm = await http.get("/budgets/confirm", params={
            "action": "set", "user": "u-over", "daily": "0.6"})  # fmt: skip
    assert "The new daily budget is already spent" in confirm.text
    assert "2 parked saga(s) keep waiting" in confirm.text


async def test_an_operator_clears_a_budget(
    sm: StateMachine, console: RunningConsole, tokens: dict[Role, str], redis: Any, keys: Keys
) -> None:
    """Clear asks first, then removes the budget and wakes the parked sagas."""
    await two_users(sm, redis, keys)
    async with console.client() as http:
        await sign_in(http, tokens[Role.OPERATOR])
        confirm = await http.get("/budgets/confirm", params={"action": "clear", "user": "u-over"})
        assert "Clear the budget of u-over?" in confirm.text
        assert "2 saga(s) parked for the budget run again now." in confirm.text
        res = await http.post("/budgets/u-over/clear", data={"csrf": csrf_of(http)})
        assert res.headers["location"] == "/budgets?user=u-over&done=clear&woken=2"
        done = (await http.get(res.headers["location"])).text
    assert "Budget cleared. 2 parked sagas run again now." in done
    assert "no budget" in row(done, "u-over")
    async with console.client() as http:  # again: there is nothing to clear
        await sign_in(http, tokens[Role.OPERATOR])
        res = await http.post("/budgets/u-over/clear", data={"csrf": csrf_of(http)})
        assert res.headers["location"] == "/budgets?user=u-over&done=none&woken=0"
        again = (await http.get(res.headers["location"])).text
    assert "The user had no budget; nothing changed." in again
    assert await budgets.budgets(redis, keys) == {"u-ok": Budget(monthly=100.0)}


@pytest.mark.parametrize(
    ("query", "error"),
    [
        ({"user": "u-1", "daily": "-2"},
         "the daily budget must be a number of USD, 0 or more, such as 5 or 2.50"),
        ({"user": "u-1", "monthly": "ten"},
         "the monthly budget must be a number of USD, 0 or more, such as 5 or 2.50"),
        ({"user": "u-1"}, "give a daily or a monthly budget (USD), or both"),
        ({"user": "bad user", "daily": "1"},
         "user id 'bad user' contains ' '; allowed are letters, digits and . _ : @ + = -."),
        ({"user": "", "daily": "1"}, "user id is empty."),
    ],
)  # fmt: skip
async def test_bad_input_is_one_sentence_on_the_page(
    console: RunningConsole, tokens: dict[Role, str], redis: Any, keys: Keys,
    query: dict[str, str], error: str,
) -> None:  # fmt: skip
    """The Budgets page comes back with a 400, the sentence and the typed values kept;
    a bad POST (a hand-made form) is the error page with a 400; nothing is stored."""
    async with console.client() as http:
        await sign_in(http, tokens[Role.OPERATOR])
        res = await http.get("/budgets/confirm", params={"action": "set", **query})
        assert res.status_code == 400
        shown = html.unescape(res.text)
        assert f'<p class="flash error" role="alert" id="error">{error}</p>' in shown
        assert "Traceback" not in res.text
        if query.get("daily"):
            assert f'value="{query["daily"]}"' in res.text
        res = await http.post("/budgets/u-1/set", data={"daily": "-1", "csrf": csrf_of(http)})
        assert res.status_code == 400 and "0 or more" in res.text
    assert await budgets.budgets(redis, keys) == {}


async def test_a_viewer_cannot_reach_the_controls(
    sm: StateMachine, console: RunningConsole, tokens: dict[Role, str], redis: Any, keys: Keys
) -> None:
    """The confirmation and the POSTs are 403 for a viewer, even with the CSRF token."""
    await two_users(sm, redis, keys)
    async with console.client() as http:
        await sign_in(http, tokens[Role.VIEWER])
        res = await http.get("/budgets/confirm", params={"user": "u-over", "daily": "9"})
        assert res.status_code == 403
        for action in ("set", "clear"):
            res = await http.post(f"/budgets/u-over/{action}",
                                  data={"daily": "9", "csrf": csrf_of(http)})  # fmt: skip
            assert res.status_code == 403
    assert await budgets.budgets(redis, keys, "u-over") == {"u-over": Budget(daily=0.5)}


async def test_a_budget_parked_saga_links_to_its_users_budget(
    sm: StateMachine, console: RunningConsole, tokens: dict[Role, str], redis: Any, keys: Keys
) -> None:
    """The saga page says it is parked for the budget and links to it; a saga waiting on
    an ordinary retry says nothing of budgets."""
    await two_users(sm, redis, keys)
    await waiting(sm, "w-2", "u-ok")
    async with console.client() as http:
        await sign_in(http, tokens[Role.VIEWER])
        parked = (await http.get("/sagas/bp-1")).text
        other = (await http.get("/sagas/w-1")).text
    assert "the LLM budget of u-over is spent" in parked
    assert 'href="/budgets?user=u-over" id="budget-link"' in parked
    assert "budget-link" not in other and "Waiting to retry router" in other
