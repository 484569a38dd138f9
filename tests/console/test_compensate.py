"""Cancel with compensation from the console (issue 21): the API answers like ``saga
cancel --compensate --json``, only operators may, with the page's CSRF token; the saga
page offers it when the type has compensations, and its confirmation lists what will be
undone, latest first. The console serves ``tests.app.undo_apps:trips`` (flight and hotel
have compensations, pay has none)."""

from __future__ import annotations

import html
import re
from typing import Any

import msgspec
import pytest
from structlog.testing import capture_logs

from saga.console.tokens import Role
from saga.state.keys import Keys
from saga.state.machine import StateMachine
from saga.state.reads import get_saga, get_saga_and_history
from saga.state.requests import CommitRequest
from saga.state.streams import ensure_groups
from tests.console.conftest import StartConsole
from tests.console.support import RunningConsole, check_schema, csrf_of, sign_in
from tests.state.helpers import claim_next

pytestmark = pytest.mark.anyio
TRIPS = "tests.app.undo_apps:trips"


@pytest.fixture
def trips_console(start_console: StartConsole) -> RunningConsole:
    return start_console(SAGA_PIPELINE=TRIPS)


@pytest.fixture
async def tsm(redis: Any, keys: Keys) -> StateMachine:
    """A state machine of the trips type, with the groups of its steps and undos."""
    tk = keys.of_type("trips")
    await ensure_groups(redis, tk, ["flight", "hotel", "pay", "undo:flight", "undo:hotel"])
    return StateMachine(redis, tk)


def booked(*what: str) -> bytes:
    return msgspec.json.encode({"trip": {"who": "ann"}, "what": list(what)})


async def at(sm: StateMachine, rid: str, step: str) -> None:
    """A trip whose steps before ``step`` committed, and ``step`` claimed (running);
    ``step`` "": every step committed (completed)."""
    await sm.start(rid, "u-1", "flight", input_json=b'{"who":"ann"}')
    done: list[str] = []
    for s, nxt in (("flight", "hotel"), ("hotel", "pay"), ("pay", "")):
        c = await claim_next(sm, s, "w1")
        if s == step:
            return
        done.append(s)
        req = CommitRequest(output=booked(*done), next_step=nxt, worker="w1")
        assert (await sm.commit(c, req)).code.name == "OK"


async def test_compensate_answers_like_the_cli_and_enqueues_the_first_undo(
    tsm: StateMachine, trips_console: RunningConsole, tokens: dict[Role, str], redis: Any
) -> None:
    """A trip running at pay (flight and hotel committed) ends compensating with
    undo:hotel enqueued, the operator in its history and in the audit log; again is a
    no-op; a completed saga is a 409 in one sentence."""
    keys = tsm.keys
    await at(tsm, "t-1", "pay")
    with capture_logs() as logs:
        async with trips_console.client(tokens[Role.OPERATOR]) as http:
            res = await http.post("/api/v1/sagas/t-1/cancel", json={"compensate": True})
    assert res.status_code == 200, res.text
    check_schema("CancelResult", res.json())
    assert res.json() == {"record_id": "t-1", "previous_state": "running",
                          "state": "compensating", "first_undo": "undo:hotel"}  # fmt: skip
    saga, events = await get_saga_and_history(redis, keys, "t-1")
    assert (saga.state.value, saga.step) == ("compensating", "undo:hotel")
    p = keys.partition_of("t-1")
    assert await redis.xlen(keys.ready(p, "undo:hotel")) == 1
    assert await redis.xlen(keys.ready(p, "undo:flight")) == 0  # one at a time
    assert (events[-1].event.value, events[-1].detail) == (
        "compensating", "from running at pay by console olga")  # fmt: skip
    audit = [e for e in logs if e["event"] == "console_action"]
    assert [(a["action"], a["actor"], a["record_id"], a["outcome"]) for a in audit] == [
        ("compensate", "console olga", "t-1", "ok")]  # fmt: skip
    async with trips_console.client(tokens[Role.OPERATOR]) as http:
        again = await http.post("/api/v1/sagas/t-1/cancel", json={"compensate": True})
        assert again.json()["state"] == "compensating"
        assert await redis.xlen(keys.ready(p, "undo:hotel")) == 1
        plain = await http.post("/api/v1/sagas/t-1/cancel", json={})
        assert plain.json()["state"] == "cancelled" and "first_undo" not in plain.json()
        await at(tsm, "t-done", "")  # a completed trip did its job: refused
        done = await http.post("/api/v1/sagas/t-done/cancel", json={"compensate": True})
        assert done.status_code == 409
        assert done.json() == {"error": "record 't-done' is completed; nothing to compensate."}
    assert (await get_saga(redis, keys, "t-done")).state.value == "completed"


async def test_a_viewer_is_refused_and_a_session_needs_the_csrf_token(
    tsm: StateMachine, trips_console: RunningConsole, tokens: dict[Role, str], redis: Any
) -> None:
    """A viewer gets a 403 and nothing changes; a signed-in browser without the CSRF token
    gets a 403 from the API and the form route; with it, the form compensates."""
    await at(tsm, "t-2", "hotel")
    async with trips_console.client(tokens[Role.VIEWER]) as http:
        res = await http.post("/api/v1/sagas/t-2/cancel", json={"compensate": True})
    assert res.status_code == 403, res.text
    assert res.json() == {"error": "this needs the operator role; you are signed in as viewer"}
    async with trips_console.client() as http:
        await sign_in(http, tokens[Role.OPERATOR])
        api = await http.post("/api/v1/sagas/t-2/cancel", json={"compensate": True})
        assert api.status_code == 403, api.text
        form = await http.post("/sagas/t-2/compensate", data={})
        assert form.status_code == 403, form.text
        assert (await get_saga(redis, tsm.keys, "t-2")).state.value == "running"
        res = await http.post("/sagas/t-2/compensate", data={"csrf": csrf_of(http)})
        assert (res.status_code, res.headers["location"]) == (303, "/sagas/t-2?done=compensate")
    saga = await get_saga(redis, tsm.keys, "t-2")
    assert (saga.state.value, saga.step) == ("compensating", "undo:flight")


async def test_the_page_offers_it_and_the_confirmation_lists_the_undos_latest_first(
    tsm: StateMachine, trips_console: RunningConsole, tokens: dict[Role, str], redis: Any
) -> None:
    """The saga page has the action for an operator; the confirmation names hotel then
    flight (pay has no compensation) and posts with the CSRF token; after it the page
    shows the compensating badge and the undo rows of the timeline."""
    await at(tsm, "t-3", "pay")
    async with trips_console.client() as http:
        await sign_in(http, tokens[Role.OPERATOR])
        page = (await http.get("/sagas/t-3")).text
        assert 'id="compensate"' in page and "Cancel and undo completed steps" in page
        confirm = await http.get("/sagas/t-3/confirm?action=compensate")
        assert confirm.status_code == 200, confirm.text
        plan = re.search(r'<ol class="plan" id="plan">(.*?)</ol>', confirm.text, re.S)
        assert plan is not None
        assert re.findall(r"<b>(\w+)</b>", plan.group(1)) == ["hotel", "flight"]
        assert 'action="/sagas/t-3/compensate"' in confirm.text
        assert f'name="csrf" value="{csrf_of(http)}"' in confirm.text
        res = await http.post("/sagas/t-3/compensate", data={"csrf": csrf_of(http)})
        assert res.status_code == 303
        # the hotel's undo runs (a worker would); the page shows state, plan and rows
        c = await claim_next(tsm, "undo:hotel", "w-u", prev_step="flight")
        after = html.unescape((await http.get("/sagas/t-3?done=compensate")).text)
        assert 'class="state st-compensating"' in after
        assert "Undoing its completed steps: undo:hotel" in after
        assert "<td>undo:hotel</td>" in after and ">compensating<" in after
        assert 'id="compensate"' not in after  # compensating already
        assert c is not None


async def test_the_action_is_absent_without_compensations_or_when_completed(
    tsm: StateMachine, trips_console: RunningConsole, console: RunningConsole,
    tokens: dict[Role, str], sm: StateMachine,
) -> None:  # fmt: skip
    """A type without compensations (the document pipeline) shows no such action and its
    confirmation is refused; a trip that was compensated shows it no more."""
    from tests.cli.inspect_support import start

    await start(sm, "d-1", "u-1")
    async with console.client() as http:
        await sign_in(http, tokens[Role.OPERATOR])
        assert 'id="compensate"' not in (await http.get("/sagas/d-1")).text
        res = await http.get("/sagas/d-1/confirm?action=compensate")
        assert res.status_code == 400
        assert "has a compensation; cancel instead" in res.text
    await tsm.start("t-4", "u-1", "flight", input_json=b'{"who":"ann"}')
    async with trips_console.client() as http:
        await sign_in(http, tokens[Role.OPERATOR])
        confirm = await http.get("/sagas/t-4/confirm?action=compensate")
        assert "Nothing needs undoing" in confirm.text
        await http.post("/sagas/t-4/compensate", data={"csrf": csrf_of(http)})
        page = await http.get("/sagas/t-4")
        assert 'class="state st-compensated"' in page.text
        assert 'id="compensate"' not in page.text
