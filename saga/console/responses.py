"""What every handler answers with: JSON in the CLI's shapes, a rendered page, and
the request's Service. One module the API's and the pages' route modules all import,
so none of them imports another for these (tests/test_import_graph.py)."""

from __future__ import annotations

from typing import Any

import msgspec
from starlette.requests import Request
from starlette.responses import Response

from saga.cli.common import fmt_resume
from saga.console.draw import usd, when
from saga.console.service import Service


def json(data: Any, status: int = 200) -> Response:
    """msgspec encodes the CLI's Structs as the CLI prints them."""
    return Response(msgspec.json.encode(data), status_code=status, media_type="application/json")


def render(request: Request, name: str, status: int = 200, **context: Any) -> Response:
    context.setdefault("who", getattr(request.state, "who", None))
    context["csrf"] = request.state.csrf
    context["when"], context["usd"], context["resume"] = when, usd, fmt_resume
    templates = request.app.state.templates
    return templates.TemplateResponse(request, name, context, status_code=status)  # type: ignore[no-any-return]


def service(request: Request) -> Service:
    s: Service = request.app.state.service
    return s
