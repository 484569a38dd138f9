"""``/api/v1``: the JSON API the pages' scripts use, in the shapes of the CLI's ``--json``.

Reads need the viewer role, actions the operator role; starting a saga (``api_start``)
the producer role (or operator), which also reads one saga as a viewer does. Bodies are JSON (or a
form); errors are ``{"error": "<one sentence>"}`` with the status that fits.
``openapi.json`` describes every route (``saga.console.openapi``).
"""

from __future__ import annotations

from urllib.parse import urlencode

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from saga.console import params, review_api
from saga.console.auth import Identity
from saga.console.responses import json, service
from saga.console.tokens import Role
from saga.console.web import Body, bool_field, endpoint, list_field, text_field, who_of
from saga.state.ids import validate_id

PREFIX = "/api/v1"
VIEWER, OPERATOR, PRODUCER = Role.VIEWER, Role.OPERATOR, Role.PRODUCER


@endpoint((VIEWER, PRODUCER), api=True)
async def me(request: Request, who: Identity | None) -> Response:
    w = who_of(who)
    return json({"subject": w.subject, "role": w.role.value, "via": w.via})


@endpoint(VIEWER, api=True)
async def sagas(request: Request, who: Identity | None) -> Response:
    """`saga list --json`; the next and previous pages' URLs are in the Link header
    (rel="next", rel="prev"), so the body stays the CLI's document."""
    from saga.cli.cmd_list import document

    q = request.query_params
    svc, saga_type, text = (
        service(request),
        params.saga_type(q.get("type")),
        params.search(q.get("q")),
    )
    if text:  # the sagas whose record id starts with q (the id itself included)
        from saga.state.search import find_prefix

        found = await find_prefix(svc.redis, await svc.typed(saga_type), text)
        return json(document(found.rows, 0))
    page = await svc.page(params.list_query(q), saga_type)
    response = json(document(page.rows, page.skipped))
    links = []
    keep = {k: v for k, v in request.query_params.items() if k not in ("cursor", "before")}
    if page.prev is not None:
        links.append(
            f'<{PREFIX}/sagas?{urlencode({**keep, "before": page.prev.encode()})}>; rel="prev"'
        )
    if page.next is not None:
        links.append(
            f'<{PREFIX}/sagas?{urlencode({**keep, "cursor": page.next.encode()})}>; rel="next"'
        )
    if links:
        response.headers["Link"] = ", ".join(links)
    return response


@endpoint(VIEWER, api=True)
async def counts(request: Request, who: Identity | None) -> Response:
    saga_type = params.saga_type(request.query_params.get("type"))
    return json({"counts": await service(request).counts(saga_type)})


@endpoint((VIEWER, PRODUCER), api=True)
async def saga(request: Request, who: Identity | None) -> Response:
    """``saga show --json``; a producer reads it as a viewer does, within its rate."""
    from saga.console.api_start import limit

    if who_of(who).role == PRODUCER:
        limit(request, who_of(who))
    rid = validate_id(request.path_params["record_id"], "record id")
    saga_type = params.saga_type(request.query_params.get("type"))
    return json(await service(request).saga(rid, who_of(who), saga_type))


@endpoint(OPERATOR, api=True, mutates=True)
async def retry(request: Request, who: Identity | None, body: Body) -> Response:
    rid = validate_id(request.path_params["record_id"], "record id")
    step, force = text_field(body, "step", 32) or None, bool_field(body, "force")
    return json(await service(request).retry(who_of(who), rid, step, force, _type(request, body)))


@endpoint(OPERATOR, api=True, mutates=True)
async def cancel(request: Request, who: Identity | None, body: Body) -> Response:
    """``saga cancel --json``; with ``{"compensate": true}``, ``saga cancel --compensate
    --json`` (the committed steps are undone, latest first)."""
    rid = validate_id(request.path_params["record_id"], "record id")
    if bool_field(body, "compensate"):
        return json(await service(request).compensate(who_of(who), rid, _type(request, body)))
    return json(await service(request).cancel(who_of(who), rid, _type(request, body)))


def _type(request: Request, body: Body) -> str | None:
    """The saga type an action is on: ``type`` in the body or the query (``--type``);
    the console's own type without one."""
    return params.saga_type(text_field(body, "type", 32) or request.query_params.get("type"))


@endpoint(VIEWER, api=True)
async def queues(request: Request, who: Identity | None) -> Response:
    return json(await service(request).queues())


@endpoint(VIEWER, api=True)
async def dead_letters(request: Request, who: Identity | None) -> Response:
    q = request.query_params
    limit = params.limit(q.get("limit"), 50, params.MAX_PAGE)
    return json(await service(request).dead_letters(q.get("step"), limit))


@endpoint(OPERATOR, api=True, mutates=True)
async def replay(request: Request, who: Identity | None, body: Body) -> Response:
    ids = list_field(body, "record_ids")
    for rid in ids or []:
        validate_id(rid, "record id")
    limit = params.limit(str(body.get("limit", "")) or None, 100, 1000)
    result = await service(request).replay(
        who_of(who), text_field(body, "step", 32) or None, ids, bool_field(body, "dry_run"), limit
    )
    return json(result)


@endpoint(OPERATOR, api=True, mutates=True)
async def purge(request: Request, who: Identity | None, body: Body) -> Response:
    return json(await service(request).purge(who_of(who), text_field(body, "step", 32) or None))


@endpoint(VIEWER, api=True)
async def costs(request: Request, who: Identity | None) -> Response:
    q = request.query_params
    doc = await service(request).costs(params.user(q.get("user")), params.since_ms(q.get("since")))
    return json(doc)


@endpoint(VIEWER, api=True)
async def costs_daily(request: Request, who: Identity | None) -> Response:
    q = request.query_params
    user, since = params.user(q.get("user")), params.since_ms(q.get("since"))
    return json(await service(request).costs_daily(user, since))


@endpoint(VIEWER, api=True)
async def budgets(request: Request, who: Identity | None) -> Response:
    """``saga budget show --json`` (``?user=``: that user, budgeted or not) with each
    user's budget-parked sagas per type."""
    return json(await service(request).budgets(params.user(request.query_params.get("user"))))


@endpoint(OPERATOR, api=True, mutates=True)
async def set_budget(request: Request, who: Identity | None, body: Body) -> Response:
    """``saga budget set``: ``{"daily": USD, "monthly": USD}``, either may be absent or
    null (no limit); replaces the user's budget."""
    from saga.console.budgets import budget_of

    user = validate_id(request.path_params["user_id"], "user id")
    return json(await service(request).set_budget(who_of(who), user, budget_of(body)))


@endpoint(OPERATOR, api=True, mutates=True)
async def clear_budget(request: Request, who: Identity | None, body: Body) -> Response:
    """``saga budget clear --json``."""
    user = validate_id(request.path_params["user_id"], "user id")
    return json(await service(request).clear_budget(who_of(who), user))


@endpoint(None, api=True)
async def openapi(request: Request, who: Identity | None) -> Response:
    from saga.console.openapi import document

    return json(document())


def routes() -> list[Route]:
    from saga.console import api_schedules, api_start, api_start_signals

    p = PREFIX
    return [
        *api_start.routes(),
        *api_start_signals.routes(),
        *api_schedules.api_routes(),
        Route(f"{p}/me", me, methods=["GET"]),
        Route(f"{p}/sagas", sagas, methods=["GET"]),
        Route(f"{p}/counts", counts, methods=["GET"]),
        Route(f"{p}/sagas/{{record_id}}", saga, methods=["GET"]),
        Route(f"{p}/sagas/{{record_id}}/retry", retry, methods=["POST"]),
        Route(f"{p}/sagas/{{record_id}}/cancel", cancel, methods=["POST"]),
        *review_api.routes(p),  # the review's reads and decisions (accept whole among them)
        Route(f"{p}/queues", queues, methods=["GET"]),
        Route(f"{p}/dead-letters", dead_letters, methods=["GET"]),
        Route(f"{p}/dead-letters/replay", replay, methods=["POST"]),
        Route(f"{p}/dead-letters/purge", purge, methods=["POST"]),
        Route(f"{p}/costs", costs, methods=["GET"]),
        Route(f"{p}/costs/daily", costs_daily, methods=["GET"]),
        Route(f"{p}/budgets", budgets, methods=["GET"]),
        Route(f"{p}/budgets/{{user_id}}", set_budget, methods=["PUT"]),
        Route(f"{p}/budgets/{{user_id}}", clear_budget, methods=["DELETE"]),
        Route(f"{p}/openapi.json", openapi, methods=["GET"]),
    ]
