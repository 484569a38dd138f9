"""The review pages: a flagged saga's values beside their source page (reviewer and
operator only: viewers see no document and no value), the decision forms (POST with
the CSRF token; no JavaScript needed), and the review queue.

The page's image is drawn on the server with the chosen value's line highlighted
(``review_source``); when the line cannot be found on the picture, the page says so
in a sentence; when no picture can be made, the page shows the lines of that page
the parser read, the value's span marked.
"""

from __future__ import annotations

from urllib.parse import urlencode

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from saga.cli.review_rows import ItemRow, rows
from saga.console import params
from saga.console import review_service as rs
from saga.console.auth import Identity
from saga.console.errors import ConsoleError, NotFound
from saga.console.pages import see_other
from saga.console.responses import render, service
from saga.console.review_queue import age_text, queue, slug
from saga.console.tokens import Role
from saga.console.web import Body, endpoint, text_field, who_of
from saga.state.errors import ReviewConflictError
from saga.state.ids import validate_id

DONE = {
    "accept": "Accepted: the value stands as the machine read it.",
    "correct": "Corrected: the machine's reading is kept beside yours.",
    "reject": "Rejected: the value leaves the reviewed results.",
    "add": "Added: the value joins the reviewed results.",
}
COMPLETE = "Every flagged item is decided: the review is complete and {step} re-runs on the " \
    "reviewed values in a new epoch (the machine's result stays in the history)."  # fmt: skip


def _type_query(saga_type: str | None) -> str:
    return f"type={saga_type}" if saga_type else ""


def review_url(rid: str, saga_type: str | None = None, **extra: str) -> str:
    q = {k: v for k, v in {"type": saga_type or "", **extra}.items() if v}
    return f"/sagas/{rid}/review" + (f"?{urlencode(q)}" if q else "")


@endpoint(Role.REVIEWER, api=False)
async def review_page(request: Request, who: Identity | None) -> Response:
    q = request.query_params
    rid = validate_id(request.path_params["record_id"], "record id")
    saga_type = params.saga_type(q.get("type"))
    done = q.get("done", "")
    flash = DONE.get(done, "")
    if q.get("complete") and q.get("rerun"):
        flash = COMPLETE.format(step=validate_id(q["rerun"], "step"))
    return await _page(request, rid, saga_type, q.get("item", ""), flash=flash)


async def _page(
    request: Request, rid: str, saga_type: str | None, item_id: str, *, flash: str = "",
    error: str = "", status: int = 200,
) -> Response:  # fmt: skip
    svc = service(request)
    view = await rs.load(svc, rid, saga_type)
    item = rs.chosen(view, item_id)
    found = rows(view)
    selected = next((r for r in found if item and r.id == item.id), None)
    page = selected.page if selected else 0
    image = located = False
    if page:
        drawn = await rs.page_png(svc, rs.page_cache(request.app), rid, item, page, saga_type)
        image, located = drawn is not None, drawn is not None and drawn.located
    same_page = [r for r in found if page and r.page == page]
    return render(request, "review.html", status=status, view=view, rows=found,
                  sel=selected, page=page, image=image, located=located, same_page=same_page,
                  marked=marked, flash=flash,
                  decisions=await rs.decisions(svc, rid, saga_type), error=error,
                  saga_type=saga_type or "",
                  type_query=_type_query(saga_type), url=review_url,
                  elsewhere=[r for r in found if r.kind in ("rejected", "line")])  # fmt: skip


def marked(r: ItemRow) -> tuple[str, str, str]:
    """The line cut around the value's span: (before, span, after)."""
    line, a, b = r.line, r.start, r.end
    if not (0 <= a < b <= len(line)):
        return line, "", ""
    return line[:a], line[a:b], line[b:]


@endpoint(Role.REVIEWER, api=False)
async def page_image(request: Request, who: Identity | None) -> Response:
    """The source page as PNG, the item's line highlighted (404 when none can be drawn)."""
    q = request.query_params
    rid = validate_id(request.path_params["record_id"], "record id")
    saga_type = params.saga_type(q.get("type"))
    svc = service(request)
    view = await rs.load(svc, rid, saga_type)
    item = rs.find(view, q.get("item", ""))
    page = int(request.path_params["page"])
    drawn = await rs.page_png(svc, rs.page_cache(request.app), rid, item, page, saga_type)
    if drawn is None:
        raise NotFound("no picture of that page can be made")
    return Response(drawn.png, media_type="image/png")


@endpoint(Role.REVIEWER, api=False, mutates=True)
async def decide(request: Request, who: Identity | None, body: Body) -> Response:
    rid = validate_id(request.path_params["record_id"], "record id")
    saga_type = params.saga_type(text_field(body, "type", 64) or None)
    item, kind = text_field(body, "item", 16), text_field(body, "kind", 16)
    version = _int(text_field(body, "version", 12), "version")
    page = _int(text_field(body, "page", 6) or "0", "page")
    fields = {f: text_field(body, f, 300) for f in rs.FIX_FIELDS}
    fix = rs.fix_of(fields, page) if kind in ("correct", "add") else None
    if kind == "correct" and fix is None:
        raise ConsoleError("say what to correct: a value, unit, range, flag or name")
    try:
        got = await rs.decide(service(request), who_of(who), rid, item, kind, version=version,
                              fix=fix, note=text_field(body, "note", 300),
                              saga_type=saga_type)  # fmt: skip
    except ReviewConflictError:
        return await _page(
            request,
            rid,
            saga_type,
            item,
            status=409,
            error=(
                "Another reviewer decided on this saga after you opened it; their decision is "
                "shown below. Nothing of yours was recorded: decide again if you still disagree."
            ),
        )
    except ConsoleError as exc:
        return await _page(request, rid, saga_type, item, status=400, error=exc.message)
    extra = {"done": got.kind, "item": got.item}
    if got.completed:
        extra.update(complete="1", rerun=got.rerun)
    return see_other(review_url(rid, saga_type, **extra))


def _int(value: str, name: str) -> int:
    try:
        return int(value)
    except ValueError:
        raise ConsoleError(f"{name} must be a whole number") from None


@endpoint(Role.VIEWER, api=False)
async def queue_page(request: Request, who: Identity | None) -> Response:
    q = request.query_params
    user, saga_type = params.user(q.get("user")), params.saga_type(q.get("type"))
    svc = service(request)
    doc = await queue(svc, user, saga_type)
    return render(request, "review_queue.html", doc=doc, age=age_text, slug=slug,
                  types=await svc.type_names(), f={"user": user or "", "type": saga_type or ""},
                  can_review=who_of(who).role.allows(Role.REVIEWER),
                  url=review_url)  # fmt: skip


def routes() -> list[Route]:
    return [
        Route("/review", queue_page, methods=["GET"]),
        Route("/sagas/{record_id}/review", review_page, methods=["GET"]),
        Route("/sagas/{record_id}/review", decide, methods=["POST"]),
        Route("/sagas/{record_id}/review/page/{page:int}", page_image, methods=["GET"]),
    ]
