"""``/api/v1/sagas/{id}/review…`` and ``/api/v1/review-queue``: the review in the shapes
of ``saga review show|<kind> --json``. Reading a review or deciding needs the reviewer
role; accepting a saga's flagged results whole (no ``item``) the operator role, as
before. A decision on a version another reviewer moved past is a 409."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from saga.console import params
from saga.console import review_service as rs
from saga.console.auth import Identity, require
from saga.console.errors import ConsoleError, NotFound
from saga.console.review_queue import queue
from saga.console.service import Service
from saga.console.tokens import Role
from saga.console.web import Body, endpoint, text_field, who_of
from saga.state.ids import validate_id

KINDS = ("accept", "correct", "reject", "add")


def _json(data: object, status: int = 200) -> Response:
    from saga.console.responses import json

    return json(data, status)


def _service(request: Request) -> Service:
    s: Service = request.app.state.service
    return s


@endpoint(Role.REVIEWER, api=True)
async def show(request: Request, who: Identity | None) -> Response:
    rid = validate_id(request.path_params["record_id"], "record id")
    saga_type = params.saga_type(request.query_params.get("type"))
    return _json(await rs.load(_service(request), rid, saga_type))


@endpoint(Role.VIEWER, api=True, mutates=True)  # the role needed depends on the body
async def decide(request: Request, who: Identity | None, body: Body) -> Response:
    """``{item, version, note, name, value, unit, range, flag, page, line}``; ``accept``
    without ``item`` accepts the flagged results whole (``saga review accept <record>``)."""
    rid = validate_id(request.path_params["record_id"], "record id")
    kind, w = request.path_params["kind"], who_of(who)
    if kind not in KINDS:
        raise NotFound(f"no review action {kind!r}: accept, correct, reject or add")
    # the role first: a role without review rights learns nothing of the body's checks
    whole = kind == "accept" and not body.get("item")
    require(w, Role.OPERATOR if whole else Role.REVIEWER)
    saga_type = params.saga_type(text_field(body, "type", 64) or None)
    item = text_field(body, "item", 16)
    note = text_field(body, "note", 300)
    if whole:
        return _json(await _service(request).accept_review(w, rid, note, saga_type))
    if not item:
        raise ConsoleError("item is missing: b<i>, r<i>, u<i>, or new (add)")
    version = body.get("version")
    if version is not None and (isinstance(version, bool) or not isinstance(version, int)):
        raise ConsoleError("version must be an integer (the review's, as read)")
    page = body.get("page", 0)
    if isinstance(page, bool) or not isinstance(page, int):
        raise ConsoleError("page must be an integer")
    fields = {f: text_field(body, f, 300) for f in rs.FIX_FIELDS}
    fix = rs.fix_of(fields, page) if kind in ("correct", "add") else None
    got = await rs.decide(_service(request), w, rid, item, kind, version=version, fix=fix,
                          note=note, saga_type=saga_type)  # fmt: skip
    return _json(got)


@endpoint(Role.REVIEWER, api=True)
async def page(request: Request, who: Identity | None) -> Response:
    """A page of the saga's document as PNG, ``?item=`` its line highlighted."""
    q = request.query_params
    rid = validate_id(request.path_params["record_id"], "record id")
    saga_type = params.saga_type(q.get("type"))
    svc = _service(request)
    view = await rs.load(svc, rid, saga_type)
    item = rs.find(view, q.get("item", ""))
    number = request.path_params["page"]
    if not number.isdigit():
        raise ConsoleError("the page must be a whole number")
    drawn = await rs.page_png(svc, rs.page_cache(request.app), rid, item, int(number), saga_type)
    if drawn is None:
        raise NotFound("no picture of that page can be made")
    return Response(drawn.png, media_type="image/png")


@endpoint(Role.VIEWER, api=True)
async def review_queue(request: Request, who: Identity | None) -> Response:
    q = request.query_params
    limit = params.limit(q.get("limit"), 200, 500)
    doc = await queue(_service(request), params.user(q.get("user")),
                      params.saga_type(q.get("type")), limit)  # fmt: skip
    return _json(doc)


def routes(prefix: str) -> list[Route]:
    p = prefix
    return [
        Route(f"{p}/sagas/{{record_id}}/review", show, methods=["GET"]),
        Route(f"{p}/sagas/{{record_id}}/review/pages/{{page}}", page, methods=["GET"]),
        Route(f"{p}/sagas/{{record_id}}/review/{{kind}}", decide, methods=["POST"]),
        Route(f"{p}/review-queue", review_queue, methods=["GET"]),
    ]
