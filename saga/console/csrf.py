"""CSRF protection of every state-changing request made with browser credentials.

A double-submit token: a random ``saga_csrf`` cookie (HttpOnly, SameSite=Strict)
whose value each page puts in its forms (and in a meta tag for scripts); a POST
must send it back in the ``csrf`` field or the ``X-CSRF-Token`` header. Another
site can neither read the cookie nor make the browser send it (SameSite=Strict),
and a request whose ``Origin`` or ``Sec-Fetch-Site`` names another site is
refused outright. Requests with a bearer token carry no ambient credential and
skip the check.
"""

from __future__ import annotations

import hmac
import secrets
from typing import Any
from urllib.parse import urlsplit

from saga.console.errors import Forbidden

COOKIE = "saga_csrf"
HEADER = "x-csrf-token"
FIELD = "csrf"
_STALE = "the form is stale or came from another site; reload the page and try again"


def token_of(request: Any) -> tuple[str, bool]:
    """The request's CSRF token and whether it is new (then the response sets the cookie)."""
    value = request.cookies.get(COOKIE, "")
    if len(value) >= 32:
        return value, False
    return secrets.token_urlsafe(32), True


def check(request: Any, submitted: str | None) -> None:
    """Refuse a cross-site request, or one without the page's token."""
    origin = request.headers.get("origin")
    if origin and urlsplit(origin).netloc != request.headers.get("host", ""):
        raise Forbidden("a request from another site was refused")
    site = request.headers.get("sec-fetch-site")
    if site and site not in ("same-origin", "none"):
        raise Forbidden("a request from another site was refused")
    cookie = request.cookies.get(COOKIE, "")
    given = submitted or request.headers.get(HEADER) or ""
    if not cookie or not given or not hmac.compare_digest(cookie.encode(), given.encode()):
        raise Forbidden(_STALE)
