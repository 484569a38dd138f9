"""The console's list filter `type` (the CLI's `--type`): the API and the pages list a
registered type's sagas, read one of them, and answer an unknown type in one sentence."""

from __future__ import annotations

from typing import Any

import pytest

from saga.console.tokens import Role
from saga.state.keys import Keys
from saga.state.machine import StateMachine
from saga.state.types import TypeInfo, register_type
from tests.cli.inspect_support import STEPS, machine, start
from tests.console.sagas import completed, flagged
from tests.console.support import RunningConsole, check_schema, cli_json, sign_in

pytestmark = pytest.mark.anyio


async def two_types(redis: Any, keys: Keys, sm: StateMachine) -> None:
    """`documents` (the console's own) and `orders` share record id mr-1, by other users."""
    await register_type(redis, keys, TypeInfo(name="orders", steps=tuple(STEPS)))
    orders = await machine(redis, keys.of_type("orders"))
    await completed(sm, "mr-1", "doc-user")
    await completed(orders, "mr-1", "order-user")
    await flagged(orders, "mr-2", "order-user")
    await start(orders, "mr-3", "order-user")


async def test_api_lists_and_reads_one_type(
    redis: Any, keys: Keys, sm: StateMachine, console: RunningConsole,
    tokens: dict[Role, str], env: dict[str, str],
) -> None:  # fmt: skip
    """`type=orders` gives what `saga list --type orders` gives, its counts, and its saga
    of a shared record id; no `type` is the console's own type."""
    await two_types(redis, keys, sm)
    async with console.client(tokens[Role.VIEWER]) as http:
        listed = (await http.get("/api/v1/sagas", params={"type": "orders"})).json()
        own = (await http.get("/api/v1/sagas")).json()
        review = (await http.get("/api/v1/sagas", params={"type": "orders", "review": "1"})).json()
        counts = (await http.get("/api/v1/counts", params={"type": "orders"})).json()["counts"]
        one = (await http.get("/api/v1/sagas/mr-1", params={"type": "orders"})).json()
        mine = (await http.get("/api/v1/sagas/mr-1")).json()
    check_schema("ListDocument", listed)
    assert listed["sagas"] == (await cli_json(env, "list", "--type", "orders"))["sagas"]
    assert sorted(r["record_id"] for r in listed["sagas"]) == ["mr-1", "mr-2", "mr-3"]
    assert [r["user_id"] for r in own["sagas"]] == ["doc-user"]
    assert [r["record_id"] for r in review["sagas"]] == ["mr-2"]
    assert (counts["completed"], counts["active"], counts["review"]) == (2, 1, 1)
    assert (one["saga"]["user_id"], mine["saga"]["user_id"]) == ("order-user", "doc-user")


async def test_unknown_or_malformed_type_is_one_sentence(
    redis: Any, keys: Keys, sm: StateMachine, console: RunningConsole, tokens: dict[Role, str]
) -> None:
    """An unregistered type: 400 naming the registered ones; a malformed name: 400."""
    await two_types(redis, keys, sm)
    async with console.client(tokens[Role.VIEWER]) as http:
        for path in ("/api/v1/sagas", "/api/v1/counts", "/api/v1/sagas/mr-1"):
            res = await http.get(path, params={"type": "ordres"})
            assert res.status_code == 400, path
            assert res.json() == {"error": "no saga type 'ordres' is registered (registered: "
                                  "documents, orders); a worker or client of the type "
                                  "registers it"}  # fmt: skip
        bad = await http.get("/api/v1/sagas", params={"type": "Orders!"})
    assert bad.status_code == 400
    assert "must be a lowercase identifier" in bad.json()["error"]


async def test_pages_filter_by_type_and_link_to_its_sagas(
    redis: Any, keys: Keys, sm: StateMachine, console: RunningConsole, tokens: dict[Role, str]
) -> None:
    """The list page offers the registered types, lists orders' sagas with links that keep
    the type, and an orders saga's page has its actions, each form carrying the type."""
    await two_types(redis, keys, sm)
    async with console.client() as http:
        await sign_in(http, tokens[Role.OPERATOR])
        page = (await http.get("/sagas", params={"type": "orders"})).text
        detail = await http.get("/sagas/mr-1", params={"type": "orders"})
        own = (await http.get("/sagas/mr-1")).text
        unknown = await http.get("/sagas", params={"type": "ordres"})
    assert '<option value="orders" selected>orders</option>' in page
    assert 'href="/sagas/mr-2?type=orders"' in page and 'href="/sagas/mr-1?type=orders"' in page
    assert "doc-user" not in page and 'href="/sagas?state=failed&amp;type=orders"' in page
    assert detail.status_code == 200
    assert "order-user" in detail.text and 'id="other-type"' in detail.text
    assert 'id="retry"' in detail.text
    assert '<input type="hidden" name="type" value="orders">' in detail.text
    assert 'data-poll="/api/v1/sagas/mr-1?type=orders"' in detail.text
    assert "doc-user" in own and 'id="retry"' in own
    assert unknown.status_code == 400 and "no saga type &#39;ordres&#39;" in unknown.text
