"""``POST /api/v1/sagas/{record_id}/signals/{event}``: deliver an event to a saga's wait
(``@app.wait``) from any language, with a producer (or operator) token, within the
token's rate. Body (optional): ``{"data": {...}, "signal_id": "..."}``; ``?type=T`` for
a saga of another registered type. The answer is ``SagaClient.signal``'s result
(``consumed``, ``kept``, ``dropped`` or ``seen``); the same ``signal_id`` twice is a
no-op, so a client may resend after a lost reply.
"""

from __future__ import annotations

from typing import Any

import msgspec
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from saga.console.auth import Identity
from saga.console.errors import ConsoleError, Unprocessable
from saga.console.web import Body, endpoint, text_field, who_of
from saga.state.errors import UnknownEventError
from saga.state.ids import validate_id, validate_step

PREFIX = "/api/v1"
FIELDS = frozenset({"data", "signal_id"})


def _starters() -> Any:
    from saga.console.api_start import STARTERS

    return STARTERS


@endpoint(_starters(), api=True, mutates=True)
async def signal(request: Request, who: Identity | None, body: Body) -> Response:
    from saga.console import params
    from saga.console.api_start import _client, limit
    from saga.console.responses import json
    from saga.console.service import _audited

    w = who_of(who)
    limit(request, w)
    unknown = sorted(set(body) - FIELDS - {"csrf"})
    if unknown:
        raise ConsoleError(f"unknown field {unknown[0]!r}; a signal takes data and signal_id")
    rid = validate_id(request.path_params["record_id"], "record id")
    event = _event(request.path_params["event"])
    data = body.get("data")
    if data is not None and not isinstance(data, dict):
        raise ConsoleError("data must be a JSON object (the wait's output)")
    sid = text_field(body, "signal_id", 128)
    if sid:
        validate_id(sid, "signal id")
    client = await _client(request, params.saga_type(request.query_params.get("type")))
    try:
        client.type_info.check_event(event)
    except UnknownEventError as exc:
        raise Unprocessable(f"{exc}.") from None
    with _audited(w, "signal", rid, signal_event=event):  # structlog owns "event"
        res = await client.signal(rid, event, data=msgspec.json.encode(data or {}), signal_id=sid)
    return json(res)


def _event(value: str) -> str:
    from saga.state.errors import InvalidIdError

    try:
        return validate_step(value)
    except InvalidIdError:
        raise ConsoleError(
            f"event {value[:40]!r} must be 1-32 lowercase letters, digits or _, from a letter"
        ) from None


def routes() -> list[Route]:
    return [Route(f"{PREFIX}/sagas/{{record_id}}/signals/{{event}}", signal, methods=["POST"])]


SIGNAL_RESULT = {
    "type": "object",
    "required": ["record_id", "event", "signal_id", "outcome", "state", "next_step"],
    "properties": {
        "record_id": {"type": "string"}, "event": {"type": "string"},
        "signal_id": {"type": "string", "description": "send it again to resend safely"},
        "outcome": {"enum": ["consumed", "kept", "dropped", "seen"],
                    "description": "consumed: the wait ended; kept: for the wait to come; "
                    "dropped: another signal of the event is kept; seen: a resend"},
        "state": {"type": "string"}, "next_step": {"type": "string"},
    },
}  # fmt: skip


def _error(description: str, **extra: Any) -> dict[str, Any]:
    error = {"schema": {"$ref": "#/components/schemas/Error"}}
    return {"description": description, **extra, "content": {"application/json": error}}


OPENAPI: dict[str, Any] = {
    "/sagas/{record_id}/signals/{event}": {"post": {
        "summary": "deliver an event to the saga's wait (client.signal); idempotent by signal_id",
        "description": "Role: producer or operator. Rate-limited per token.",
        "parameters": [
            {"name": "record_id", "in": "path", "required": True, "schema": {"type": "string"}},
            {"name": "event", "in": "path", "required": True,
             "schema": {"type": "string", "pattern": "^[a-z][a-z0-9_]{0,31}$"}},
            {"name": "type", "in": "query", "required": False, "schema": {"type": "string"},
             "description": "a saga of this registered type (default: the console's own)"},
        ],
        "requestBody": {"required": False, "content": {"application/json": {"schema": {
            "type": "object", "additionalProperties": False,
            "properties": {"data": {"type": "object", "description": "the wait's output"},
                           "signal_id": {"type": "string"}}}}}},
        "responses": {
            "200": {"description": "delivered", "content": {"application/json": {
                "schema": SIGNAL_RESULT}}},
            "400": _error("bad input"),
            "401": _error("not signed in, or an unknown token"),
            "403": _error("needs the producer or operator role, or a CSRF check failed"),
            "404": _error("no saga for this record"),
            "422": _error("the saga type never waits for this event"),
            "409": _error("the saga has ended: no wait is left"),
            "429": _error("over the token's rate", headers={"Retry-After": {
                "description": "seconds until a request would pass",
                "schema": {"type": "integer"}}}),
        },
    }},
}  # fmt: skip
