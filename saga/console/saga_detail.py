"""What the saga page shows beside its timeline, as Temporal's UI does: the saga's
input and each step's output as collapsible JSON (``<details>``, no script needed),
and the raw event history (``/sagas/{record}/history``: stream ids, times, every
attribute). Pure functions build the rows; the route reads through ``state/``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import msgspec
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from saga.console import params
from saga.console.auth import Identity
from saga.console.tokens import Role
from saga.console.web import endpoint, who_of
from saga.state.ids import validate_id
from saga.state.model import HistoryEvent


@dataclass(frozen=True)
class JsonBlock:
    name: str
    """``input`` or a step's name."""
    note: str
    """Why it is shown as it is: "" for a standing output, or that a compensation undid it."""
    body: str
    """Indented JSON (or the raw text when it is not JSON)."""


def pretty(raw: str) -> str:
    """``raw`` JSON indented by two, keys in their stored order; the text as it is when
    it is not JSON (an old or foreign value is still shown)."""
    try:
        return msgspec.json.format(raw.encode(), indent=2).decode()
    except (msgspec.DecodeError, UnicodeDecodeError):
        return raw


def json_blocks(
    steps: Sequence[str], input_json: str, outputs: Mapping[str, str], undone: Mapping[str, str]
) -> list[JsonBlock]:
    """The input, then each step's output in the pipeline's order; an output a
    compensation undid stays, marked so (its effect no longer stands)."""
    blocks = [JsonBlock("input", "", pretty(input_json))] if input_json else []
    known = [*steps, *(s for s in [*outputs, *undone] if s not in steps)]
    for step in known:
        if step in outputs:
            blocks.append(JsonBlock(step, "", pretty(outputs[step])))
        elif step in undone:
            blocks.append(JsonBlock(step, "undone by its compensation", pretty(undone[step])))
    return blocks


@dataclass(frozen=True)
class EventRow:
    id: str
    """The history stream's entry id (``<ms>-<seq>``)."""
    event: str
    at: str
    """ISO 8601, UTC, to the millisecond."""
    attributes: list[tuple[str, str]]
    """Every attribute the event carries (the fields left at their default are left out)."""


HIDDEN_FROM_VIEWERS = ("review_decision",)
"""A decision's old and new values are results: operators' to see, as outputs are."""


def event_rows(events: Sequence[HistoryEvent], operator: bool) -> list[EventRow]:
    from saga.console.draw import iso

    rows = []
    for e in events:
        attrs = []
        for name in e.__struct_fields__:
            if name in ("id", "event", "at_ms") or (not operator and name in HIDDEN_FROM_VIEWERS):
                continue
            value = getattr(e, name)
            if value in ("", 0, 0.0):
                continue
            shown = iso(value) if name.endswith("_ms") and name != "duration_ms" else value
            attrs.append((name, str(shown)))
        rows.append(EventRow(e.id, e.event.value, iso(e.at_ms), attrs))
    return rows


@endpoint(Role.VIEWER, api=False)
async def history(request: Request, who: Identity | None) -> Response:
    from saga.console.responses import render, service
    from saga.state.reads import get_saga_and_history

    rid = validate_id(request.path_params["record_id"], "record id")
    svc, w = service(request), who_of(who)
    saga_type = params.saga_type(request.query_params.get("type"))
    keys = await svc.typed(saga_type)
    s, events = await get_saga_and_history(svc.redis, keys, rid)
    operator = w.role == Role.OPERATOR
    return render(request, "history.html", s=s, events=event_rows(events, operator),
                  type_query=f"?type={saga_type}" if saga_type else "")  # fmt: skip


def routes() -> list[Route]:
    return [Route("/sagas/{record_id}/history", history, methods=["GET"])]
