"""The HTML pages: server-rendered, usable without JavaScript (the script only keeps
counts, queues and a running saga fresh). Every action is a POST form with the CSRF
token, reached through a confirmation page; URLs carry record ids and filters only.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

import msgspec
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from saga.cli.branch_labels import step_labels
from saga.console import params
from saga.console.auth import SESSION_COOKIE, Identity
from saga.console.draw import cost_chart, span_text, timeline
from saga.console.errors import ConsoleError, Unauthenticated
from saga.console.responses import render, service
from saga.console.service import Service
from saga.console.tokens import Role
from saga.console.web import Body, endpoint, set_cookie, text_field, who_of
from saga.state.ids import validate_id
from saga.state.model import SagaState

VIEWER, OPERATOR = Role.VIEWER, Role.OPERATOR
DONE = {
    "retry": "Retried: the saga runs again in a new epoch (the timeline shows from where).",
    "cancel": "Cancelled.",
    "compensate": "Cancelled: its completed steps are being undone, latest first (the "
    "undo:<step> rows below); it ends compensated, or compensation_failed.",
    "accept": "Review accepted: the flags are cleared and your name is in the history.",
    "purge": "Dead letters purged.",
}

ACTIONS = ("retry", "cancel", "compensate", "accept")
ACTIONS_TEXT = "action must be retry, cancel, compensate or accept"


def see_other(url: str) -> Response:
    return RedirectResponse(url, status_code=303)


@endpoint(None, api=False)
async def home(request: Request, who: Identity | None) -> Response:
    return see_other("/sagas" if who else "/login")


@endpoint(None, api=False)
async def login_form(request: Request, who: Identity | None) -> Response:
    return render(request, "login.html", who=who, error="")


@endpoint(None, api=False, mutates=True)
async def login(request: Request, who: Identity | None, body: Body) -> Response:
    try:
        cookie, found = await request.app.state.access.sign_in(text_field(body, "token", 200))
    except Unauthenticated as exc:
        return render(request, "login.html", status=401, who=None, error=exc.message)
    request.state.who = found
    response = see_other("/sagas")
    ttl = request.app.state.access.config.settings.session_ttl_s
    set_cookie(request, response, SESSION_COOKIE, cookie, max_age=ttl)
    return response


@endpoint(None, api=False, mutates=True)
async def logout(request: Request, who: Identity | None, body: Body) -> Response:
    cookie = request.cookies.get(SESSION_COOKIE)
    if cookie:
        await request.app.state.access.sign_out(cookie)
    response = see_other("/login")
    response.delete_cookie(SESSION_COOKIE, path="/")
    return response


@endpoint(VIEWER, api=False)
async def sagas(request: Request, who: Identity | None) -> Response:
    q = request.query_params
    query, saga_type = params.list_query(q), params.saga_type(q.get("type"))
    svc, text = service(request), params.search(q.get("q"))
    found = None
    if text:  # a record id opens its saga; the start of one lists the sagas it begins
        exact, found = await svc.search(text, saga_type)
        if exact:
            return see_other(f"/sagas/{text}" + (f"?type={saga_type}" if saga_type else ""))
    page = found or await svc.page(query, saga_type)
    counts = await svc.counts(saga_type)
    steps, types = await svc.steps(None, saga_type), await svc.type_names()
    keep = {k: v for k, v in q.items() if k not in ("cursor", "before") and v}
    nxt = getattr(page, "next", None)
    prev = getattr(page, "prev", None)
    more = urlencode({**keep, "cursor": nxt.encode()}) if nxt else ""
    back = urlencode({**keep, "before": prev.encode()}) if prev else ""
    # A record id may exist in several types: a row of another type links with its type.
    other = f"?type={saga_type}" if saga_type and saga_type != svc.keys.saga_type else ""
    return render(request, "sagas.html", page=page, counts=counts, steps=steps, f=keep,
                  states=params.STATES, next_query=more, prev_query=back, search=found,
                  paged="cursor" in q or "before" in q, types=types, orders=params.ORDERS,
                  own_type=svc.keys.saga_type, type_query=other)  # fmt: skip


@endpoint(VIEWER, api=False)
async def saga(request: Request, who: Identity | None) -> Response:
    from saga.cli.outputs import render_outputs
    from saga.state.reads import get_saga_and_history

    rid = validate_id(request.path_params["record_id"], "record id")
    svc, w = service(request), who_of(who)
    sagas = await svc.client_of(params.saga_type(request.query_params.get("type")))
    keys = sagas.keys
    s, events = await get_saga_and_history(svc.redis, keys, rid)
    now = _now_ms()
    operator = w.role == Role.OPERATOR
    if not operator:  # a viewer's copy: no document reference, no operator's error detail
        s = msgspec.structs.replace(s, document="", error_detail="")
    outputs = render_outputs(s.outputs, s.undone_outputs) if operator else ""
    blocks = await _json_blocks(svc, keys, s) if operator else []
    info = sagas.type_info
    labels = step_labels(info.parents, info.lanes, fancy=True)
    return render(request, "saga.html", s=s, rows=timeline(s, events, now, labels),
                  budget_parked=await _budget_parked(svc, keys, s),
                  span=span_text(events, not s.state.terminal, now), outputs=outputs,
                  blocks=blocks,
                  steps=sagas.type_info.steps, undoable=bool(sagas.type_info.undoable),
                  done=DONE.get(request.query_params.get("done", "")),
                  document=s.document,
                  other_type=keys.saga_type if keys != svc.keys else "")  # fmt: skip


@endpoint(OPERATOR, api=False)
async def confirm(request: Request, who: Identity | None) -> Response:
    rid = validate_id(request.path_params["record_id"], "record id")
    q = request.query_params
    action, saga_type = q.get("action", ""), params.saga_type(q.get("type"))
    if action not in ACTIONS:
        raise ConsoleError(ACTIONS_TEXT)
    svc, step = service(request), q.get("step", "")
    sagas = await svc.client_of(saga_type)
    info = sagas.type_info
    if action == "retry" and step not in info.steps:
        raise ConsoleError(f"step {step!r} is not a step of {info.name}")
    if action == "compensate" and not info.undoable:
        raise ConsoleError(f"no step of {info.name} has a compensation; cancel instead")
    s = await sagas.get(rid)
    plan = svc.undo_plan(info.undoable, s.outputs) if action == "compensate" else []
    return render(request, "confirm.html", s=s, action=action, step=step, plan=plan,
                  saga_type=saga_type or "", type_query=_type_query(svc, saga_type))  # fmt: skip


@endpoint(OPERATOR, api=False, mutates=True)
async def act(request: Request, who: Identity | None, body: Body) -> Response:
    """One action on a saga of any registered type (the form's ``type``)."""
    rid = validate_id(request.path_params["record_id"], "record id")
    action, svc, w = request.path_params["action"], service(request), who_of(who)
    saga_type = params.saga_type(text_field(body, "type", 32) or None)
    if action == "retry":
        await svc.retry(w, rid, text_field(body, "step", 32) or None, False, saga_type)
    elif action == "cancel":
        await svc.cancel(w, rid, saga_type)
    elif action == "compensate":
        await svc.compensate(w, rid, saga_type)
    elif action == "accept":
        await svc.accept_review(w, rid, text_field(body, "note", 300), saga_type)
    else:
        raise ConsoleError(ACTIONS_TEXT)
    typed = _type_query(svc, saga_type)
    return see_other(f"/sagas/{rid}{typed}{'&' if typed else '?'}done={action}")


def _type_query(svc: Service, saga_type: str | None) -> str:
    """``?type=T`` for a saga of another type than the console's own, else ""."""
    return f"?type={saga_type}" if saga_type and saga_type != svc.keys.saga_type else ""


@endpoint(VIEWER, api=False)
async def queues(request: Request, who: Identity | None) -> Response:
    return render(request, "queues.html", doc=await service(request).queues())


@endpoint(VIEWER, api=False)
async def dead_letters(request: Request, who: Identity | None) -> Response:
    step = request.query_params.get("step") or None
    svc = service(request)
    letters = (await svc.dead_letters(step, 200)).dead_letters
    return render(request, "dead_letters.html", letters=letters, step=step or "",
                  steps=await svc.steps(None),
                  done=DONE.get(request.query_params.get("done", "")))  # fmt: skip


@endpoint(OPERATOR, api=False, mutates=True)
async def replay(request: Request, who: Identity | None, body: Body) -> Response:
    """Dry run first: the first POST shows what would be replayed and asks to confirm;
    the confirmation replays exactly those records."""
    step = text_field(body, "step", 32) or None
    ids = body.get("record_id")
    chosen = [ids] if isinstance(ids, str) else list(ids or [])
    if body.get("scope") == "selected" and not chosen:
        raise ConsoleError("select at least one dead letter, or dry-run all of them")
    for rid in chosen:
        validate_id(rid, "record id")
    dry = body.get("confirm") != "1"
    result = await service(request).replay(
        who_of(who), step, chosen if chosen else None, dry_run=dry, limit=200
    )
    return render(request, "replay.html", result=result, step=step or "")


@endpoint(OPERATOR, api=False)
async def purge_confirm(request: Request, who: Identity | None) -> Response:
    step = request.query_params.get("step") or None
    count = len((await service(request).dead_letters(step, 1000)).dead_letters)
    return render(request, "purge.html", step=step or "", count=count)


@endpoint(OPERATOR, api=False, mutates=True)
async def purge(request: Request, who: Identity | None, body: Body) -> Response:
    await service(request).purge(who_of(who), text_field(body, "step", 32) or None)
    return see_other("/dead-letters?done=purge")


@endpoint(VIEWER, api=False)
async def costs(request: Request, who: Identity | None) -> Response:
    q = request.query_params
    user, since = params.user(q.get("user")), q.get("since") or ""
    svc, since_ms = service(request), params.since_ms(since)
    doc, daily = await svc.costs(user, since_ms), await svc.costs_daily(user, since_ms)
    return render(request, "costs.html", doc=doc, chart=cost_chart(daily["days"]),
                  user=user or "", since=since)  # fmt: skip


async def _budget_parked(svc: Service, keys: Any, s: Any) -> bool:
    """Whether the saga waits for its user's budget (an undo's reason is in ``pec``,
    read only for a compensating saga)."""
    from saga.state.budgets import parked_for_budget
    from saga.state.replies import text

    if s.state not in (SagaState.WAITING_RETRY, SagaState.COMPENSATING):
        return False
    pec = (
        text(await svc.redis.hget(keys.saga(s.record_id), "pec"))
        if s.state == SagaState.COMPENSATING
        else ""
    )
    return parked_for_budget(s.state, s.error_class, pec)


async def _json_blocks(svc: Service, keys: Any, s: Any) -> list[Any]:
    """The input and the outputs as JSON, in the order of the saga type's steps."""
    from saga.console.saga_detail import json_blocks
    from saga.state.queries import registered_steps
    from saga.state.reads import get_input

    steps = svc.pipeline.names if keys == svc.keys else await registered_steps(svc.redis, keys)
    raw = await get_input(svc.redis, keys, s.record_id)
    return json_blocks(steps, raw, s.outputs, s.undone_outputs)


def _now_ms() -> int:
    import time

    return int(time.time() * 1000)


def routes() -> list[Route]:
    return [
        Route("/", home, methods=["GET"]),
        Route("/login", login_form, methods=["GET"]),
        Route("/login", login, methods=["POST"]),
        Route("/logout", logout, methods=["POST"]),
        Route("/sagas", sagas, methods=["GET"]),
        Route("/sagas/{record_id}", saga, methods=["GET"]),
        Route("/sagas/{record_id}/confirm", confirm, methods=["GET"]),
        Route("/sagas/{record_id}/{action}", act, methods=["POST"]),
        Route("/queues", queues, methods=["GET"]),
        Route("/dead-letters", dead_letters, methods=["GET"]),
        Route("/dead-letters/replay", replay, methods=["POST"]),
        Route("/dead-letters/purge", purge_confirm, methods=["GET"]),
        Route("/dead-letters/purge", purge, methods=["POST"]),
        Route("/costs", costs, methods=["GET"]),
    ]
