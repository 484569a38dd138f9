"""The console beside Temporal's UI, over HTTP against a real console and Redis: the
saga's input and each step's output as collapsible JSON in step order (an undone one
kept), the raw event history tab, search by record id and prefix, previous/next
pages and the sort by updated or created."""

from __future__ import annotations

import json
import re
from html import unescape
from typing import Any

import pytest

from saga.console.saga_detail import json_blocks, pretty
from saga.console.tokens import Role
from saga.state.keys import Keys
from saga.state.machine import StateMachine
from saga.state.reads import get_history
from tests.console.sagas import PATIENT, completed, flagged, waiting
from tests.console.support import RunningConsole, sign_in

pytestmark = pytest.mark.anyio


def details(html: str) -> list[tuple[str, str]]:
    """(id, the JSON inside) of each ``<details class="json">`` in page order."""
    found = re.findall(r'<details class="json[^"]*" id="json-([a-z_]+)"[^>]*>.*?<pre>(.*?)</pre>',
                       html, re.S)  # fmt: skip
    return [(name, unescape(body)) for name, body in found]


async def test_an_operator_sees_the_input_and_each_output_as_json_in_step_order(
    sm: StateMachine, console: RunningConsole, tokens: dict[Role, str]
) -> None:
    """The saga page of an operator has the input, then router, parser, grouper, each
    the stored JSON indented; a viewer's page has none of them."""
    await flagged(sm, "mr-json", "u-1")
    async with console.client() as http:
        await sign_in(http, tokens[Role.OPERATOR])
        res = await http.get("/sagas/mr-json")
    assert res.status_code == 200
    found = details(res.text)
    assert [name for name, _ in found] == ["input", "router", "parser", "grouper"]
    assert json.loads(found[0][1]) == {"document": "/records/Jane-Doe-1970-03-14/report.pdf"}
    assert json.loads(found[1][1]) == {"document_name": "Jane-Doe-1970-03-14-report.pdf",
                                       "page_count": 2}  # fmt: skip
    assert "\n  " in found[2][1]  # indented, not one line
    async with console.client() as http:
        await sign_in(http, tokens[Role.VIEWER])
        viewer = await http.get("/sagas/mr-json")
    assert details(viewer.text) == [] and PATIENT not in viewer.text


def test_json_blocks_keep_an_undone_output_in_its_step_place() -> None:
    """After a compensation the undone output stays, in the step's place, marked undone;
    a value that is not JSON is shown as it is."""
    undone = {"flight": '{"seat": "3A"}', "hotel": "x"}
    blocks = json_blocks(["flight", "hotel", "mail"], '{"trip": 1}', {"mail": "{}"}, undone)
    assert [(b.name, b.note) for b in blocks] == [
        ("input", ""), ("flight", "undone by its compensation"),
        ("hotel", "undone by its compensation"), ("mail", "")]  # fmt: skip
    assert blocks[1].body == pretty('{"seat": "3A"}') == '{\n  "seat": "3A"\n}'
    assert blocks[2].body == "x"


async def test_the_history_tab_lists_every_event_with_its_id_time_and_attributes(
    sm: StateMachine, console: RunningConsole, tokens: dict[Role, str], redis: Any, keys: Keys
) -> None:
    """/sagas/{id}/history: one row per stream entry, oldest first, with the entry id,
    the event, its ISO time and its attributes (step, attempt, epoch, worker, review)."""
    await flagged(sm, "mr-hist", "u-1")
    events = await get_history(redis, keys, "mr-hist")
    async with console.client() as http:
        await sign_in(http, tokens[Role.VIEWER])
        page = await http.get("/sagas/mr-hist")
        assert 'href="/sagas/mr-hist/history"' in page.text
        res = await http.get("/sagas/mr-hist/history")
        missing = await http.get("/sagas/mr-none/history")
    assert res.status_code == 200, res.text
    ids = re.findall(r'<tr id="ev-([0-9]+-[0-9]+)">', res.text)
    assert ids == [e.id for e in events] and len(ids) >= 4
    names = re.findall(r"<td><b>([a-z_]+)</b></td>", res.text)
    assert names == [e.event.value for e in events]
    committed = next(e for e in events if e.event.value == "committed" and e.step == "parser")
    row = res.text.split(f'<tr id="ev-{committed.id}">')[1].split("</tr>")[0]
    assert 'class="k">step</span> <span class="v">parser</span>' in row
    assert 'class="k">attempt</span> <span class="v">1</span>' in row
    assert 'class="k">review</span>' in row
    t = committed.at_ms
    assert re.search(r"<time datetime=\"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z\">", row)
    assert f".{t % 1000:03d}Z" in row
    assert missing.status_code == 404 and "no saga exists for record 'mr-none'" in unescape(
        missing.text
    )


async def test_search_opens_a_record_or_lists_the_ids_it_begins(
    sm: StateMachine, console: RunningConsole, tokens: dict[Role, str]
) -> None:
    """q=<id> redirects to the saga; q=<start> lists the sagas whose id begins so (and
    no other); a glob character is one clear sentence, a 400."""
    for rid in ("lab-2026-001", "lab-2026-002", "lab-2027-001", "other-1"):
        await completed(sm, rid, "u-1")
    async with console.client() as http:
        await sign_in(http, tokens[Role.VIEWER])
        exact = await http.get("/sagas", params={"q": "lab-2026-002"})
        prefix = await http.get("/sagas", params={"q": "lab-2026"})
        bad = await http.get("/sagas", params={"q": "lab*"})
    assert exact.status_code == 303 and exact.headers["location"] == "/sagas/lab-2026-002"
    assert listed(prefix.text) == ["lab-2026-002", "lab-2026-001"]
    assert "2 saga(s) whose record id starts with <b>lab-2026</b>" in prefix.text
    assert bad.status_code == 400 and "give a record id or its start" in unescape(bad.text)


async def test_previous_and_next_pages_and_the_sort_by_update(
    sm: StateMachine, console: RunningConsole, tokens: dict[Role, str]
) -> None:
    """Pages of 2 over 6 sagas: next, next, then previous twice gives the first page back
    (which has no previous link); sort=updated puts the saga created first and failed
    last first; the API gives both links in its Link header."""
    from saga.state.operator import cancel

    await waiting(sm, "pg-old", "u-1")  # out of the ready stream: the others claim theirs
    for i in range(5):
        await completed(sm, f"pg-{i}", "u-1")
    await cancel(sm, "pg-old")  # created first, changed last
    async with console.client() as http:
        await sign_in(http, tokens[Role.VIEWER])
        first = await http.get("/sagas?limit=2")
        assert 'id="prev-page"' not in first.text
        second = await http.get(link(first.text, "next-page"))
        third = await http.get(link(second.text, "next-page"))
        back = await http.get(link(third.text, "prev-page"))
        front = await http.get(link(back.text, "prev-page"))
        by_update = await http.get("/sagas?sort=updated&limit=2")
        api = await http.get("/api/v1/sagas", params={"limit": "2", "cursor": cursor(second)})
        bad = await http.get("/sagas?sort=name")
    assert listed(first.text) == ["pg-4", "pg-3"]
    assert listed(second.text) == ["pg-2", "pg-1"] and listed(third.text) == ["pg-0", "pg-old"]
    assert listed(back.text) == listed(second.text) and listed(front.text) == listed(first.text)
    assert 'id="prev-page"' not in front.text and 'id="next-page"' in front.text
    assert listed(by_update.text) == ["pg-old", "pg-4"]
    assert 'rel="prev"' in api.headers["link"] and 'rel="next"' in api.headers["link"]
    assert bad.status_code == 400 and "sort must be created or updated" in bad.text


def listed(html: str) -> list[str]:
    return re.findall(r'<a href="/sagas/([^"?]+)[^"]*" class="record">', html)


def link(html: str, anchor: str) -> str:
    found = re.search(rf'<a href="([^"]+)"[^>]* id="{anchor}">', html)
    assert found, anchor
    return unescape(found.group(1))


def cursor(res: Any) -> str:
    found = re.search(r"cursor=([^&\"]+)", link(res.text, "next-page"))
    assert found
    return found.group(1)


async def test_queues_show_every_type_ready_as_undelivered_and_the_workers(
    redis: Any, keys: Keys, sm: StateMachine, console: RunningConsole, tokens: dict[Role, str]
) -> None:
    """The Queues page is `saga top` of every registered type: a row per type and step
    whose ready is the undelivered count (not the stream's length), the parked and
    deferred columns, and each live worker with its host, pid and health address."""
    import time

    from saga.state.presence import Presence, announce
    from saga.state.types import TypeInfo, register_type
    from tests.cli.inspect_support import STEPS, machine, start

    await register_type(redis, keys, TypeInfo(name="orders", steps=tuple(STEPS)))
    orders = await machine(redis, keys.of_type("orders"))
    for rid in ("o-1", "o-2", "o-3"):
        await start(orders, rid)
    await completed(sm, "d-1", "u-1")  # documents: its router entries delivered and acked
    me = Presence(worker="w-7f3a", saga_type="orders", steps=("router",), host="node-4",
                  pid=4242, health="10.1.2.3:8080", started_ms=int(time.time() * 1000))  # fmt: skip
    await announce(redis, keys, me, int(time.time() * 1000))
    async with console.client() as http:
        await sign_in(http, tokens[Role.VIEWER])
        res = await http.get("/queues")
    assert res.status_code == 200
    rows = {m[0]: m[1:] for m in re.findall(
        r'<tr data-step="([a-z_:/]+)">\s*<td>[a-z]+</td><td>[a-z:_]+</td><td class="num">(\S+)</td>'
        r'\s*<td class="num">(\d+)</td>', res.text)}  # fmt: skip
    assert rows["orders/router"] == ("3", "0")  # 3 started, none delivered
    assert rows["documents/router"] == ("0", "0")  # its stream still holds the entry
    assert {"orders/parser", "documents/grouper"} <= set(rows)
    assert '<th class="num">parked</th><th class="num">deferred</th>' in res.text
    worker = res.text.split('<table class="list" id="workers">')[1].split("</table>")[0]
    for shown in ("w-7f3a", "orders", "router", "node-4", "4242", "10.1.2.3:8080"):
        assert f">{shown}<" in worker, shown


async def test_actions_work_on_every_registered_type(
    redis: Any, keys: Keys, console: RunningConsole, tokens: dict[Role, str]
) -> None:
    """A dead-lettered saga of type orders (not the console's own) is retried through its
    page's confirmation, and another cancelled through the API with its type; the own
    type's record of the same id is untouched."""
    from saga.state.reads import get_saga
    from saga.state.types import TypeInfo, register_type
    from tests.cli.inspect_support import STEPS, machine, start
    from tests.console.sagas import dead
    from tests.console.support import csrf_of

    await register_type(redis, keys, TypeInfo(name="orders", steps=tuple(STEPS)))
    orders = await machine(redis, keys.of_type("orders"))
    await dead(orders, "o-dead", "u-1")
    await start(orders, "o-run", "u-1")
    await start(await machine(redis, keys), "o-run", "u-1")  # the own type, same id
    async with console.client() as http:
        await sign_in(http, tokens[Role.OPERATOR])
        page = await http.get("/sagas/o-dead?type=orders")
        assert 'name="type" value="orders"' in page.text
        ask = {"action": "retry", "step": "parser", "type": "orders"}
        confirm = await http.get("/sagas/o-dead/confirm", params=ask)
        assert confirm.status_code == 200 and "A saga of type <b>orders</b>" in confirm.text
        form = {"step": "parser", "type": "orders", "csrf": csrf_of(http)}
        done = await http.post("/sagas/o-dead/retry", data=form)
    assert done.status_code == 303
    assert done.headers["location"] == "/sagas/o-dead?type=orders&done=retry"
    async with console.client(tokens[Role.OPERATOR]) as api:
        cancelled = await api.post("/api/v1/sagas/o-run/cancel", json={"type": "orders"})
    assert cancelled.status_code == 200, cancelled.text
    retried = await get_saga(redis, keys.of_type("orders"), "o-dead")
    assert (retried.state.value, retried.step, retried.epoch) == ("pending", "parser", 2)
    assert (await get_saga(redis, keys.of_type("orders"), "o-run")).state.value == "cancelled"
    assert (await get_saga(redis, keys, "o-run")).state.value == "pending"


async def test_the_api_searches_by_record_id_prefix(
    sm: StateMachine, console: RunningConsole, tokens: dict[Role, str]
) -> None:
    """GET /api/v1/sagas?q=<start>: the list document of the sagas whose id starts so."""
    from tests.console.support import check_schema

    for rid in ("lab-1", "lab-2", "lib-1"):
        await completed(sm, rid, "u-1")
    async with console.client(tokens[Role.VIEWER]) as api:
        doc = (await api.get("/api/v1/sagas", params={"q": "lab-"})).json()
        bad = await api.get("/api/v1/sagas", params={"q": "la?"})
    check_schema("ListDocument", doc)
    assert [r["record_id"] for r in doc["sagas"]] == ["lab-2", "lab-1"]
    assert bad.status_code == 400 and "give a record id or its start" in bad.json()["error"]


async def test_outputs_stay_visible_after_a_compensation(
    redis: Any, keys: Keys, start_console: Any, tokens: dict[Role, str]
) -> None:
    """A trip compensated from the console (hotel then flight undone by their workers)
    still shows its input and both outputs as JSON, in step order, marked undone."""
    from saga.state.requests import CommitRequest
    from saga.state.streams import ensure_groups
    from tests.console.test_compensate import TRIPS, at
    from tests.state.helpers import claim_next

    trips = start_console(SAGA_PIPELINE=TRIPS)
    tk = keys.of_type("trips")
    await ensure_groups(redis, tk, ["flight", "hotel", "pay", "undo:flight", "undo:hotel"])
    tsm = StateMachine(redis, tk)
    await at(tsm, "t-undo", "pay")
    async with trips.client(tokens[Role.OPERATOR]) as api:
        res = await api.post("/api/v1/sagas/t-undo/cancel", json={"compensate": True})
        assert res.status_code == 200, res.text
    for step, prev, nxt in (("hotel", "flight", "undo:flight"), ("flight", "_input", "")):
        claim = await claim_next(tsm, f"undo:{step}", "w-u", prev_step=prev)
        req = CommitRequest(output=b"{}", next_step=nxt, worker="w-u")
        assert (await tsm.commit(claim, req)).code.name == "OK"
    async with trips.client() as http:
        await sign_in(http, tokens[Role.OPERATOR])
        page = await http.get("/sagas/t-undo")
    assert "compensated" in page.text
    found = details(page.text)
    assert [name for name, _ in found] == ["input", "flight", "hotel"]
    assert json.loads(found[2][1]) == {"trip": {"who": "ann"}, "what": ["flight", "hotel"]}
    marked = re.findall(r'<details class="json undone" id="json-([a-z]+)"', page.text)
    assert marked == ["flight", "hotel"]
    assert page.text.count("(undone by its compensation)") >= 2
