"""``POST /api/v1/sagas``: start a saga from any language, with a ``producer`` token.

The body is ``{"record_id", "user_id", "type"?, "input"?, "priority"?}``. Starting is
idempotent by record id, as ``saga start`` is: 201 with the new saga, 200 with the one
the record has already (same user), 409 when another user owns the record. The answer
is ``saga start --json``'s document, as a viewer sees the saga (no document name, no
outputs) unless the caller is an operator. ``GET /api/v1/sagas/{record_id}`` (in
``api``) reads it back. Every call of a producer is rate-limited per token
(``api_start_rate``): 429 with ``Retry-After``.
"""

from __future__ import annotations

import time
from typing import Any

import msgspec
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from saga.console.auth import Identity
from saga.console.errors import ConsoleError, TooManyRequests
from saga.console.tokens import Role
from saga.console.web import Body, endpoint, text_field, who_of
from saga.state.errors import SagaExistsError
from saga.state.ids import validate_id

PREFIX = "/api/v1"
STARTERS = (Role.PRODUCER, Role.OPERATOR)


class Conflict(ConsoleError):
    status = 409


FIELDS = frozenset({"record_id", "user_id", "type", "input", "priority"})


@endpoint(STARTERS, api=True, mutates=True)
async def start(request: Request, who: Identity | None, body: Body) -> Response:
    from saga.cli.shapes_saga import StartDocument
    from saga.cli.timeline import saga_view
    from saga.console.responses import json, service
    from saga.console.service import _audited

    w = who_of(who)
    limit(request, w)
    unknown = sorted(set(body) - FIELDS - {"csrf"})
    if unknown:
        raise ConsoleError(
            f"unknown field {unknown[0]!r}; a start takes {', '.join(sorted(FIELDS))}"
        )
    rid = validate_id(_required(body, "record_id"), "record id")
    uid = validate_id(_required(body, "user_id"), "user id")
    priority = _priority(body.get("priority", 0))
    first = _input(body.get("input"))
    svc = service(request)
    client = await _client(request, text_field(body, "type", 64) or None)
    with _audited(w, "start", rid, user_id=uid, priority=priority):
        try:
            res = await client.start(rid, uid, input=first, priority=priority)
        except ValueError as exc:  # the input does not fit the first step
            raise ConsoleError(f"{exc}.") from None
        except SagaExistsError:  # the owner's id is not the caller's to learn
            raise Conflict(
                f"record {rid} has a saga of another user; pick another record id"
            ) from None
        saga = await client.get(rid)
    view = saga_view(saga)
    if w.role != Role.OPERATOR:  # as a viewer sees it: a document's name can identify a patient
        view.document = ""
        view.error_detail = ""
    response = json(StartDocument(created=res.created, saga=view), 201 if res.created else 200)
    own = client.keys.saga_type == svc.keys.saga_type
    where = f"{PREFIX}/sagas/{rid}" + ("" if own else f"?type={client.keys.saga_type}")
    response.headers["Location"] = where
    return response


def limit(request: Request, who: Identity) -> None:
    """Count one request of ``who``'s token; over its rate, a 429 with Retry-After."""
    limiter = getattr(request.app.state, "start_limiter", None)
    if limiter is None:  # SAGA_CONSOLE_START_RATE=0
        return
    wait = limiter.take(f"{who.via}:{who.subject}", time.monotonic())
    if wait:
        raise TooManyRequests(
            f"this token is over its rate of {limiter.rate:g} requests a second "
            f"(burst {limiter.burst}); retry after {wait} s",
            wait,
        )


def _required(body: Body, name: str) -> str:
    value = text_field(body, name, 128)
    if not value:
        raise ConsoleError(f"{name} is required")
    return value


def _priority(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 9:
        raise ConsoleError("priority must be a whole number from 0 to 9")
    return value


def _input(value: Any) -> bytes | None:
    """The first step's input: a JSON object (checked against the step's type by the
    client), or None for the type's default."""
    if value is None:
        return None
    if not isinstance(value, dict):
        raise ConsoleError("input must be a JSON object (the first step's input)")
    return msgspec.json.encode(value)


async def _client(request: Request, saga_type: str | None) -> Any:
    """A SagaClient of ``saga_type`` (default: the console's own), which must be registered;
    one per type and registration, kept for the app's life."""
    from saga.api.client import SagaClient
    from saga.console.responses import service
    from saga.state.keys import validate_type
    from saga.state.types import type_info

    svc = service(request)
    if not saga_type or saga_type == svc.keys.saga_type:
        return svc.sagas
    info = await type_info(svc.redis, svc.keys, validate_type(saga_type))
    if info is None:
        await svc.typed(saga_type)  # raises the one sentence naming the registered types
        raise ConsoleError(f"no saga type {saga_type!r} is registered")
    state = request.app.state
    cache: dict[str, Any] = getattr(state, "start_clients", None) or {}
    state.start_clients = cache
    found = cache.get(saga_type)
    if found is None or found.type_info != info:
        found = cache[saga_type] = SagaClient(svc.redis, svc.keys, info, svc.settings)
    return found


def routes() -> list[Route]:
    return [Route(f"{PREFIX}/sagas", start, methods=["POST"])]
