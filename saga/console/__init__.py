"""``saga console``: the web console and its JSON API (``/api/v1``).

An ASGI app (Starlette, served by uvicorn) that reads through the same ``state/``
queries as the CLI and returns the same shapes as its ``--json``. Modules:

    app        the Starlette app: routes, middleware, lifespan (one Redis client)
    auth       who is asking: bearer tokens, browser sessions, forward-auth, --dev
    csrf       the CSRF check of every state-changing request
    headers    security headers (strict CSP, no caching) on every response
    service    reads and actions shared by the API and the pages, audit-logged
    api        /api/v1 routes (JSON)          openapi   the OpenAPI document
    pages      HTML routes                     draw      SVG timeline and cost chart
    server     runs uvicorn                    tokens    token minting and the token file

Starlette, uvicorn and Jinja2 come with the ``console`` extra and are imported
only by ``saga console`` (the CLI stays lean).
"""
