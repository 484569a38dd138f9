"""The console's ASGI app: the API and page routes, vendored static files, health
probes, security headers, and one Redis client for the app's life."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

from jinja2 import Environment, PackageLoader, select_autoescape
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.templating import Jinja2Templates

from saga.config.settings import Settings
from saga.console import api, api_schedules, budget_pages, pages, review_pages, saga_detail
from saga.console.api_start_rate import RateLimiter
from saga.console.auth import Access
from saga.console.config import ConsoleConfig
from saga.console.headers import SecurityHeaders
from saga.console.service import Service


def create_app(settings: Settings, config: ConsoleConfig, redis: Any | None = None) -> Starlette:
    """The app; ``redis`` is a client to use (else one is opened from ``settings``)."""
    from saga.wiring.runtime import document_pipeline, keys_of, open_client

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        client = redis if redis is not None else open_client(settings)
        pipeline = document_pipeline(settings)
        keys = keys_of(settings, pipeline.name)  # SAGA_PIPELINE's type, as the workers'
        app.state.access = Access(client, keys, config)
        app.state.service = Service(client, keys, settings, pipeline)
        c = settings.console
        app.state.start_limiter = RateLimiter(c.start_rate, c.start_burst) if c.start_rate else None
        try:
            yield
        finally:
            if redis is None:
                await client.aclose()

    app = Starlette(
        routes=[
            *api.routes(),
            *review_pages.routes(),
            *pages.routes(),
            *budget_pages.routes(),
            *saga_detail.routes(),
            *api_schedules.page_routes(),
            Route("/livez", livez, methods=["GET"]),
            Route("/readyz", readyz, methods=["GET"]),
            Mount("/static", StaticFiles(packages=[("saga.console", "static")]), name="static"),
        ],
        middleware=[Middleware(SecurityHeaders)],
        lifespan=lifespan,
    )
    app.state.templates = templates()
    return app


def templates() -> Jinja2Templates:
    env = Environment(
        loader=PackageLoader("saga.console", "templates"),
        autoescape=select_autoescape(["html"]),
        trim_blocks=True,
        lstrip_blocks=True,
    )
    return Jinja2Templates(env=env)


async def livez(request: Request) -> Response:
    return PlainTextResponse("ok")


async def readyz(request: Request) -> Response:
    """Ready while Redis answers a PING."""
    try:
        await request.app.state.service.redis.ping()
    except Exception as exc:
        return PlainTextResponse(f"redis unreachable ({type(exc).__name__})", status_code=503)
    return PlainTextResponse("ok")
