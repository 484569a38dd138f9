"""The one wrapper every route goes through: who is asking, may they, the CSRF check of
state-changing requests, and errors as one sentence (JSON for the API, a page or a
redirect to sign-in for people).

``@endpoint(Role.VIEWER)`` on ``async def f(request, who)``; with ``mutates=True``
the wrapper reads the body (a form or JSON, at most 64 KiB), checks CSRF for
browser credentials, and calls ``f(request, who, body)``.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import parse_qs

import msgspec
import structlog
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response

from saga.console import csrf
from saga.console.auth import Access, Identity, require
from saga.console.errors import ConsoleError, TooManyRequests
from saga.console.tokens import Role
from saga.state.errors import InvalidIdError, SagaNotFoundError, StateError

log = structlog.get_logger("saga.console")
MAX_BODY = 64 * 1024
Body = dict[str, Any]
Handler = Callable[..., Awaitable[Response]]


def endpoint(
    role: Role | tuple[Role, ...] | None, *, api: bool, mutates: bool = False
) -> Callable[[Handler], Any]:
    """``role`` None: open to anyone (sign-in, health); the identity may be None. A tuple
    of roles: any of them will do."""

    def wrap(fn: Handler) -> Any:
        @functools.wraps(fn)
        async def handle(request: Request) -> Response:
            token, new = csrf.token_of(request)
            request.state.csrf = token
            try:
                who = await access(request).identify(request)
                if role is not None:
                    who = require(who, role)
                request.state.who = who
                if mutates:
                    body = await read_body(request)
                    if who is None or who.ambient:
                        csrf.check(request, _text(body.get(csrf.FIELD)))
                    response = await fn(request, who, body)
                else:
                    response = await fn(request, who)
            except Exception as exc:
                response = error_response(request, exc, api=api)
            if new:
                set_cookie(request, response, csrf.COOKIE, token, max_age=None)
            return response

        return handle

    return wrap


def access(request: Request) -> Access:
    a: Access = request.app.state.access
    return a


def error_response(request: Request, exc: Exception, *, api: bool) -> Response:
    status, message = classify(exc)
    if status == 401 and not api:
        return RedirectResponse("/login", status_code=303)
    if api:
        headers = {"WWW-Authenticate": 'Bearer realm="saga"'} if status == 401 else None
        if isinstance(exc, TooManyRequests):
            headers = {"Retry-After": str(exc.retry_after_s)}
        return JSONResponse({"error": message}, status_code=status, headers=headers)
    templates = request.app.state.templates
    context = {"status": status, "message": message, "who": getattr(request.state, "who", None)}
    return templates.TemplateResponse(request, "error.html", context, status_code=status)  # type: ignore[no-any-return]


def classify(exc: Exception) -> tuple[int, str]:
    """The status and the one sentence for an error; anything unexpected is logged by
    type and path only (its message might carry data)."""
    from redis.exceptions import ConnectionError as RedisConnectionError
    from redis.exceptions import TimeoutError as RedisTimeoutError

    if isinstance(exc, ConsoleError):
        return exc.status, exc.message
    if isinstance(exc, InvalidIdError):
        return 400, f"{exc}."
    if isinstance(exc, SagaNotFoundError):
        return 404, f"{exc}."
    if isinstance(exc, StateError):
        return 409, f"{exc}."
    if isinstance(exc, RedisConnectionError | RedisTimeoutError | OSError):
        log.warning("console_redis_unreachable", error=type(exc).__name__)
        return 503, "Redis is unreachable; try again in a moment."
    log.error("console_error", error=type(exc).__name__)
    return 500, "something went wrong inside the console; the log has the error's type."


async def read_body(request: Request) -> Body:
    """A form (repeated fields become lists) or a JSON object."""
    raw = await request.body()
    if len(raw) > MAX_BODY:
        raise ConsoleError(f"the request body is over {MAX_BODY // 1024} KiB")
    kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if kind == "application/json":
        try:
            data = msgspec.json.decode(raw) if raw else {}
        except msgspec.DecodeError:
            raise ConsoleError("the request body is not valid JSON") from None
        if not isinstance(data, dict):
            raise ConsoleError("the request body must be a JSON object")
        return data
    if kind in ("application/x-www-form-urlencoded", ""):
        fields = parse_qs(raw.decode("utf-8", "replace"), keep_blank_values=True)
        return {k: v[0] if len(v) == 1 else v for k, v in fields.items()}
    raise ConsoleError("send a form or a JSON object (Content-Type application/json)")


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def text_field(body: Body, name: str, most: int = 200) -> str:
    value = body.get(name, "")
    if not isinstance(value, str):
        raise ConsoleError(f"{name} must be a string")
    if len(value) > most:
        raise ConsoleError(f"{name} is longer than {most} characters")
    return value.strip()


def bool_field(body: Body, name: str) -> bool:
    value = body.get(name, False)
    if isinstance(value, bool):
        return value
    return isinstance(value, str) and value.lower() in ("1", "true", "yes", "on")


def list_field(body: Body, name: str) -> list[str] | None:
    """A list of strings (a JSON array, or a form's repeated or single field)."""
    if name not in body:
        return None
    value = body[name]
    items = value if isinstance(value, list) else [value]
    if not all(isinstance(v, str) for v in items):
        raise ConsoleError(f"{name} must be a list of strings")
    return items


def set_cookie(
    request: Request, response: Response, name: str, value: str, *, max_age: int | None
) -> None:
    """HttpOnly, SameSite=Strict, Secure when the request came over HTTPS."""
    response.set_cookie(
        name, value, max_age=max_age, path="/", httponly=True, samesite="strict",
        secure=is_https(request),
    )  # fmt: skip


def is_https(request: Request) -> bool:
    if request.url.scheme == "https":
        return True
    proto = request.headers.get("x-forwarded-proto", "")
    return proto == "https" and access(request).from_trusted_proxy(request)


def who_of(who: Identity | None) -> Identity:
    """The identity of a route that required a role (never None there)."""
    assert who is not None
    return who
