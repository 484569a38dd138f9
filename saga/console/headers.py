"""Security headers on every response: a strict Content-Security-Policy (no inline
script or style, nothing from another origin), no framing, no caching of pages that
show patient-related data, and no referrer to other sites (``same-origin``: under
``no-referrer`` browsers send ``Origin: null``, which the CSRF check refuses)."""

from __future__ import annotations

from typing import Any

CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)
HEADERS = [
    (b"content-security-policy", CSP.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"x-frame-options", b"DENY"),
    (b"referrer-policy", b"same-origin"),
    (b"cross-origin-opener-policy", b"same-origin"),
    (b"cross-origin-resource-policy", b"same-origin"),
    (b"permissions-policy", b"camera=(), microphone=(), geolocation=(), interest-cohort=()"),
]
STATIC_PREFIX = "/static/"


class SecurityHeaders:
    """Pure ASGI middleware (no buffering): adds the headers to each response start."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        static = scope["path"].startswith(STATIC_PREFIX)
        cache = b"public, max-age=300" if static else b"no-store"

        async def add(message: Any) -> None:
            if message["type"] == "http.response.start":
                names = {k.lower() for k, _ in message.get("headers", [])}
                extra = [(k, v) for k, v in HEADERS if k not in names]
                extra.append((b"cache-control", cache))
                message["headers"] = [
                    *[
                        (k, v)
                        for k, v in message.get("headers", [])
                        if k.lower() != b"cache-control"
                    ],
                    *extra,
                ]
            await send(message)

        await self.app(scope, receive, add)
