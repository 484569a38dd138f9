"""``GET /api/v1/schedules`` (``saga schedule list --json``) and the Schedules page: every
schedule, its cron, type, user, next tick and last saga. Read-only: schedules are added,
paused and removed with ``saga schedule`` or declared with ``@app.schedule``."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from saga.console.auth import Identity
from saga.console.tokens import Role
from saga.console.web import endpoint

OPENAPI: dict[str, Any] = {
    "/schedules": {"get": {
        "summary": "every schedule: cron, type, user, next tick, last saga (saga schedule list)",
        "description": "Role: viewer.",
        "responses": {
            "200": {"description": "ok", "content": {"application/json": {
                "schema": {"$ref": "#/components/schemas/ScheduleList"}}}},
            **{str(c): {"description": d, "content": {"application/json": {
                "schema": {"$ref": "#/components/schemas/Error"}}}}
               for c, d in ((401, "not signed in, or an unknown token"),
                            (403, "needs the viewer role"))},
        },
    }},
}  # fmt: skip


async def _rows(request: Request) -> Any:
    from saga.cli.shapes import ScheduleList
    from saga.state.schedules import listing

    svc = request.app.state.service
    return ScheduleList(schedules=await listing(svc.redis, svc.keys))


@endpoint(Role.VIEWER, api=True)
async def schedules_api(request: Request, who: Identity | None) -> Response:
    from saga.console.responses import json

    return json(await _rows(request))


@endpoint(Role.VIEWER, api=False)
async def schedules_page(request: Request, who: Identity | None) -> Response:
    from saga.console.responses import render

    return render(request, "schedules.html", rows=(await _rows(request)).schedules)


def api_routes() -> list[Route]:
    return [Route("/api/v1/schedules", schedules_api, methods=["GET"])]


def page_routes() -> list[Route]:
    return [Route("/schedules", schedules_page, methods=["GET"])]
