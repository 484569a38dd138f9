"""The JSON API's reads against a real server with real sagas: the CLI's shapes, the
filters, cursor pages, counts, queues, dead letters and costs; what a viewer sees."""

from __future__ import annotations

import re
import time
from typing import Any

import msgspec
import pytest

from saga.console.tokens import Role
from saga.state.listing import ListQuery, list_sagas
from saga.state.machine import StateMachine
from saga.state.model import FailAction, SagaState
from tests.cli.inspect_support import fail, start
from tests.console.sagas import PATIENT, completed, dead, flagged, waiting
from tests.console.support import RunningConsole, check_schema, cli_json, walk

pytestmark = pytest.mark.anyio


async def population(sm: StateMachine) -> None:
    """One saga in each state the list filters on (the pending one last: it stays queued)."""
    await completed(sm, "mr-ok", "u-1", cost=0.25)
    await dead(sm, "mr-dead", "u-2", step="parser")
    await waiting(sm, "mr-wait", "u-2")
    await flagged(sm, "mr-flag", "u-3")
    await start(sm, "mr-new", "u-1")


async def get(console: RunningConsole, token: str, path: str, **params: str) -> Any:
    async with console.client(token) as http:
        res = await http.get(f"/api/v1{path}", params=params or None)  # {} drops the URL's
    assert res.status_code == 200, res.text
    assert res.headers["content-type"] == "application/json"
    return res


async def api(console: RunningConsole, token: str, path: str, **params: str) -> Any:
    return (await get(console, token, path, **params)).json()


async def test_list_filters_give_the_sagas_the_cli_lists(
    sm: StateMachine, console: RunningConsole, tokens: dict[Role, str], env: dict[str, str]
) -> None:
    """Each filter returns the sagas `saga list` returns for it, in its JSON shape."""
    await population(sm)
    viewer = tokens[Role.VIEWER]
    everything = await api(console, viewer, "/sagas")
    check_schema("ListDocument", everything)
    assert everything["sagas"] == (await cli_json(env, "list"))["sagas"]
    cases = {
        (("state", "failed"),): ["mr-dead"],
        (("state", "waiting_retry"),): ["mr-wait"],
        (("state", "pending"),): ["mr-new"],
        (("step", "parser"),): ["mr-dead"],
        (("user", "u-1"),): ["mr-new", "mr-ok"],
        (("review", "1"),): ["mr-flag"],
        (("user", "u-2"), ("state", "failed")): ["mr-dead"],
        (("since", "1h"), ("user", "u-3")): ["mr-flag"],
    }
    for query, want in cases.items():
        got = await api(console, viewer, "/sagas", **dict(query))
        assert [r["record_id"] for r in got["sagas"]] == want, query
    rows = (await api(console, viewer, "/sagas", state="failed"))["sagas"]
    assert rows[0]["error_class"] == "ParseError"
    assert rows[0]["error_message"] == "no table in mr-dead"


async def test_the_state_filter_takes_parked_as_the_cli_does(
    sm: StateMachine, console: RunningConsole, tokens: dict[Role, str], env: dict[str, str]
) -> None:
    """state=parked lists the sagas waiting for their budget (not those waiting to retry),
    as `saga list --state parked` does; the list page offers it in its state select."""
    await waiting(sm, "mr-wait", "u-2")
    await start(sm, "mr-park", "u-2")
    await fail(sm, "router", FailAction.PARK, error=("BudgetExceededError", "daily budget"))
    viewer = tokens[Role.VIEWER]
    got = (await api(console, viewer, "/sagas", state="parked"))["sagas"]
    assert [(r["record_id"], r["parked_reason"]) for r in got] == [("mr-park", "budget")]
    assert got == (await cli_json(env, "list", "--state", "parked"))["sagas"]
    waiting_too = await api(console, viewer, "/sagas", state="waiting_retry")
    assert sorted(r["record_id"] for r in waiting_too["sagas"]) == ["mr-park", "mr-wait"]
    async with console.client(viewer) as http:
        page = await http.get("/sagas", params={"state": "parked"})
    assert page.status_code == 200, page.text
    assert re.search(r'<option value="parked"\s+selected>', page.text), page.text[:2000]
    assert "mr-park" in page.text and "mr-wait" not in page.text


async def test_cursor_pages_cover_the_list_once_in_order(
    sm: StateMachine, console: RunningConsole, tokens: dict[Role, str]
) -> None:
    """Pages of 3 follow each other by cursor: the same sagas as one long page, no repeats."""
    for i in range(8):
        await completed(sm, f"pg-{i}", "u-7")
    viewer = tokens[Role.VIEWER]
    whole = [r["record_id"] for r in (await api(console, viewer, "/sagas", user="u-7"))["sagas"]]
    assert sorted(whole) == [f"pg-{i}" for i in range(8)]
    seen: list[str] = []
    url, pages = "/sagas?user=u-7&limit=3", 0
    while url:
        res = await get(console, viewer, url)
        seen += [r["record_id"] for r in res.json()["sagas"]]
        pages += 1
        links = res.headers.get("link", "")  # rel="prev" too, after the first page
        assert ('rel="prev"' in links) == (pages > 1), links
        link = re.search(r'</api/v1(/sagas\?[^>]+)>; rel="next"', links)
        url = link.group(1) if link else ""
        if url:  # the next page keeps the filters; its cursor names only a record id
            assert f"cursor={res.json()['sagas'][-1]['created_ms']}.{seen[-1]}" in url, url
            assert "user=u-7" in url and "limit=3" in url
    assert seen == whole
    assert pages in (3, 4)  # 3+3+2, and maybe an empty last page


async def test_saga_is_the_cli_document_and_a_viewer_gets_no_outputs(
    sm: StateMachine, console: RunningConsole, tokens: dict[Role, str], env: dict[str, str]
) -> None:
    """An operator gets `saga show --output --json`; a viewer the same without outputs or
    the document's name, and no string of it names the patient."""
    await flagged(sm, "mr-flag", "u-3")
    op = await api(console, tokens[Role.OPERATOR], "/sagas/mr-flag")
    check_schema("SagaDetail", op)
    shown = await cli_json(env, "show", "mr-flag", "--output")
    assert op["saga"] == shown["saga"]
    assert op["outputs"] == shown["outputs"]
    assert [a["outcome"] for a in op["attempts"]] == ["committed"] * 3
    assert op["saga"]["review"] and op["saga"]["needs_review"]
    viewer = await api(console, tokens[Role.VIEWER], "/sagas/mr-flag")
    check_schema("SagaDetail", viewer)
    assert "outputs" not in viewer
    assert viewer["saga"]["document"] == ""
    assert {k: v for k, v in viewer["saga"].items() if k != "document"} == {
        k: v for k, v in op["saga"].items() if k != "document"
    }
    assert not [s for s in walk(viewer) if PATIENT in s]
    assert any(PATIENT in s for s in walk(op))


async def test_counts_follow_the_state_indexes(
    sm: StateMachine, console: RunningConsole, tokens: dict[Role, str]
) -> None:
    """/counts sums the state indexes; a saga that fails moves from active to failed."""
    viewer = tokens[Role.VIEWER]
    await population(sm)
    before = await api(console, viewer, "/counts")
    check_schema("Counts", before)
    assert before["counts"] == {"active": 1, "waiting_retry": 1, "completed": 2, "failed": 1,
                                "cancelled": 0, "review": 1}  # fmt: skip
    await dead(sm, "mr-dead-2", "u-2", step="router")
    after = (await api(console, viewer, "/counts"))["counts"]
    assert (after["failed"], after["active"]) == (2, 1)


async def test_queues_dead_letters_and_costs_in_the_cli_shapes(
    sm: StateMachine, console: RunningConsole, tokens: dict[Role, str], env: dict[str, str]
) -> None:
    """/queues is `saga top --json`, /dead-letters `saga dlq list --json`, /costs
    `saga costs --json` plus the days; each valid under its schema."""
    await population(sm)
    viewer = tokens[Role.VIEWER]
    queues = await api(console, viewer, "/queues")
    check_schema("TopDocument", queues)
    by_step = {s["step"]: s for s in queues["steps"]}
    assert by_step["parser"]["dead"] == 1 and by_step["router"]["delayed"] == 1
    assert set(queues["breakers"]) == {"llm", "embedding", "billing"}
    letters = await api(console, viewer, "/dead-letters")
    check_schema("DeadLettersDocument", letters)
    assert letters == await cli_json(env, "dlq", "list")
    assert [d["record_id"] for d in letters["dead_letters"]] == ["mr-dead"]
    assert (await api(console, viewer, "/dead-letters", step="router"))["dead_letters"] == []
    costs = await api(console, viewer, "/costs", since="2d")
    check_schema("CostsDocument", costs)
    assert costs == await cli_json(env, "costs", "--since", "2d")
    assert costs["rows"] == [{"user_id": "u-1", "step": "grouper", "attempts": 1, "usd": 0.25}]
    daily = await api(console, viewer, "/costs/daily", since="2d")
    check_schema("CostsDaily", daily)
    today = time.strftime("%Y-%m-%d", time.gmtime())
    assert [d["day"] for d in daily["days"]][-1] == today and len(daily["days"]) == 3
    assert [d["usd"] for d in daily["days"]] == [0, 0, 0.25]
    assert daily["days"][-1]["rows"] == costs["rows"]
    only = await api(console, viewer, "/costs", user="u-2")
    assert only["rows"] == [] and only["total_usd"] == 0
    async with console.client(viewer) as http:
        page = (await http.get("/costs", params={"since": "2d"})).text
    assert "Total $0.25 over 1 attempt(s)" in page
    assert page.count('<rect class="cost-bar"') == 3  # a bar a day, from 2 days ago
    assert f"<title>{today}: $0.2500</title>" in page


async def test_bad_query_values_are_one_sentence(
    console: RunningConsole, tokens: dict[Role, str]
) -> None:
    """A bad filter is a 400 with one sentence, never a traceback."""
    async with console.client(tokens[Role.VIEWER]) as http:
        for params, words in [
            ({"state": "bogus"}, "state 'bogus' must be one of"),
            ({"limit": "0"}, "limit must be a whole number from 1 to 500"),
            ({"since": "yesterday"}, "since 'yesterday' is neither a duration"),
            ({"cursor": "x.y"}, "cursor 'x.y' is not one this listing gave"),
            ({"user": "a b"}, "user id 'a b' contains ' '"),
        ]:
            res = await http.get("/api/v1/sagas", params=params)
            assert res.status_code == 400, params
            assert words in res.json()["error"], res.json()
        res = await http.get("/api/v1/sagas/nope")
        assert res.status_code == 404
        assert res.json()["error"] == "no saga exists for record 'nope'."


def test_list_query_matches_the_state_listing() -> None:
    """The API's filters build the ListQuery `saga list` builds from the same flags."""
    from saga.console.params import list_query

    q = list_query({"state": "failed", "step": "parser", "user": "u-1", "review": "1",
                    "limit": "7"})  # fmt: skip
    assert q == ListQuery(state=SagaState.FAILED, step="parser", user="u-1", review=True, limit=7)
    assert msgspec.structs.asdict(list_query({}))["limit"] == 50
    assert list_sagas  # the console's page reads through saga.state.listing, as the CLI does
