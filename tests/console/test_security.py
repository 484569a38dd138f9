"""The console's guards for patient data: CSRF on every state-changing request, a strict
CSP with no inline script, no patient data in any URL or log line, sessions that end
with their token, forward-auth only from trusted proxies, and sign-in errors."""

from __future__ import annotations

import re
from html.parser import HTMLParser
from typing import Any

import httpx
import pytest
from structlog.testing import capture_logs

from saga.console.headers import CSP
from saga.console.tokens import Role
from saga.state.console_auth import revoke_token
from saga.state.keys import Keys
from saga.state.machine import StateMachine
from saga.state.reads import get_saga
from tests.console.conftest import StartConsole
from tests.console.sagas import PATIENT, dead, flagged
from tests.console.support import RunningConsole, csrf_of, sign_in

pytestmark = pytest.mark.anyio

PAGES = ["/sagas", "/sagas?state=failed", "/sagas/mr-flag", "/sagas/mr-dead",
         "/sagas/mr-flag/history", "/sagas/mr-dead/confirm?action=retry&step=parser",
         "/sagas/mr-flag/confirm?action=accept",
         "/queues", "/dead-letters", "/dead-letters/purge", "/costs", "/login"]  # fmt: skip


def post_routes(console: RunningConsole) -> list[str]:
    """Every POST route of the app, with a record id where the path has a parameter."""
    app: Any = console.server.config.app
    found = []
    for route in app.routes:
        if "POST" in (getattr(route, "methods", None) or ()):
            found.append(route.path.replace("{record_id}", "mr-dead").replace("{action}", "cancel"))
    return found


class Links(HTMLParser):
    """Every URL a page names (links, forms, scripts, styles, polling targets), the
    inline scripts and styles it has, and its forms' field names."""

    def __init__(self) -> None:
        super().__init__()
        self.urls: list[str] = []
        self.inline: list[str] = []
        self.fields: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        self.urls += [a[k] for k in ("href", "src", "action", "data-poll") if k in a]
        self.inline += [f"{tag} {k}" for k in a if k.startswith("on") or k == "style"]
        if tag == "script" and "src" not in a:
            self.inline.append("script without src")
        if tag == "style":
            self.inline.append("style element")
        if tag in ("input", "select") and a.get("name"):
            self.fields.append(a["name"])


async def test_every_post_needs_the_pages_csrf_token_with_browser_credentials(
    sm: StateMachine, console: RunningConsole, tokens: dict[Role, str], redis: Any, keys: Keys
) -> None:
    """With a session cookie, each POST route refuses a request without the token, with a
    wrong one, or from another origin; with the token the action runs. A bearer token
    (no ambient credential) needs none."""
    await dead(sm, "mr-dead", "u-1")
    routes = post_routes(console)
    assert {"/login", "/logout", "/sagas/mr-dead/cancel", "/dead-letters/replay",
            "/api/v1/sagas/mr-dead/retry", "/api/v1/dead-letters/purge"} <= set(routes)  # fmt: skip
    async with console.client() as http:
        await sign_in(http, tokens[Role.OPERATOR])
        good = csrf_of(http)
        for path in routes:
            for form, headers in [({}, {}), ({"csrf": "x" * 43}, {}),
                                  ({"csrf": good}, {"Origin": "https://evil.example"}),
                                  ({"csrf": good}, {"Sec-Fetch-Site": "cross-site"})]:  # fmt: skip
                res = await http.post(path, data=form, headers=headers)
                assert res.status_code == 403, (path, form, headers, res.text)
        assert (await get_saga(redis, keys, "mr-dead")).state.value == "failed"
        res = await http.post("/sagas/mr-dead/cancel", data={"csrf": good})
        assert (res.status_code, res.headers["location"]) == (303, "/sagas/mr-dead?done=cancel")
        assert (await get_saga(redis, keys, "mr-dead")).state.value == "cancelled"
        api = await http.post("/api/v1/sagas/mr-dead/retry", headers={"X-CSRF-Token": good})
        assert api.status_code == 200, api.text
    async with console.client(tokens[Role.OPERATOR]) as http:
        res = await http.post("/api/v1/sagas/mr-dead/cancel", json={})
        assert res.status_code == 200, res.text


async def test_pages_have_a_strict_csp_no_inline_code_and_only_vendored_assets(
    sm: StateMachine, console: RunningConsole, tokens: dict[Role, str]
) -> None:
    """Every page and API answer carries the CSP and the other headers; no page has inline
    script, inline style or event handlers, and every asset comes from /static."""
    await dead(sm, "mr-dead", "u-1")
    await flagged(sm, "mr-flag", "u-1")
    async with console.client() as http:
        await sign_in(http, tokens[Role.OPERATOR])
        for path in [*PAGES, "/api/v1/sagas", "/static/console.js"]:
            res = await http.get(path)
            assert res.status_code == 200, (path, res.text)
            h = res.headers
            assert h["content-security-policy"] == CSP, path
            assert (h["x-frame-options"], h["x-content-type-options"]) == ("DENY", "nosniff")
            assert h["referrer-policy"] == "same-origin"
            static = path.startswith("/static/")
            assert h["cache-control"] == ("public, max-age=300" if static else "no-store")
            if "text/html" in h["content-type"]:
                page = Links()
                page.feed(res.text)
                assert page.inline == [], path
                assert not [u for u in page.urls if re.match(r"(https?:)?//", u)], path
        for asset in ("/static/console.js", "/static/console.css", "/static/favicon.svg"):
            assert (await http.get(asset)).status_code == 200


async def test_no_patient_data_in_urls_or_logs(
    sm: StateMachine, console: RunningConsole, tokens: dict[Role, str]
) -> None:
    """An operator browsing every page and acting: no URL a page names, no redirect and
    no log line carries the document's name (only record ids and filters)."""
    await dead(sm, "mr-dead", "u-1")
    await flagged(sm, "mr-flag", "u-1")
    urls: list[str] = []
    with capture_logs() as logs:
        async with console.client() as http:
            await sign_in(http, tokens[Role.OPERATOR])
            for path in PAGES:
                res = await http.get(path)
                page = Links()
                page.feed(res.text)
                urls += page.urls
                if path == "/sagas/mr-flag":
                    assert PATIENT in res.text  # an operator sees the output and document
            res = await http.post("/sagas/mr-flag/accept", data={"csrf": csrf_of(http)})
            urls.append(res.headers["location"])
            res = await http.post("/sagas/mr-dead/retry",
                                  data={"csrf": csrf_of(http), "step": "router"})  # fmt: skip
            urls.append(res.headers["location"])
    assert len(urls) > 40
    assert not [u for u in urls if PATIENT in u or "report" in u]
    assert [e["action"] for e in logs if e["event"] == "console_action"] == ["accept_review",
                                                                            "retry"]  # fmt: skip
    assert not [e for e in logs if PATIENT in repr(e)]


async def test_a_viewer_sees_neither_outputs_nor_the_document_nor_action_forms(
    sm: StateMachine, console: RunningConsole, tokens: dict[Role, str]
) -> None:
    """The saga page of a viewer has the timeline and error but no outputs, no document
    and no buttons; the confirmation pages are refused."""
    await flagged(sm, "mr-flag", "u-1")
    async with console.client() as http:
        await sign_in(http, tokens[Role.VIEWER])
        res = await http.get("/sagas/mr-flag")
        assert res.status_code == 200
        assert PATIENT not in res.text and "Hemoglobin" not in res.text
        assert "Timeline" in res.text and "Needs a person" in res.text
        assert 'id="retry"' not in res.text and "Outputs" not in res.text
        confirm = await http.get("/sagas/mr-flag/confirm?action=accept")
        assert confirm.status_code == 403
        assert "this needs the operator role" in confirm.text


async def test_revoking_a_token_ends_its_sessions_and_sign_out_ends_one(
    console: RunningConsole, tokens: dict[Role, str], redis: Any, keys: Keys
) -> None:
    """A session cookie works until its token is revoked; signing out ends it at once."""
    async with console.client() as http:
        await sign_in(http, tokens[Role.VIEWER])
        assert (await http.get("/sagas")).status_code == 200
        cookie = http.cookies["saga_session"]
        await revoke_token(redis, keys, "vic")
        assert (await http.get("/sagas")).headers["location"] == "/login"
        assert (await http.get("/api/v1/sagas")).status_code == 401
    async with console.client() as http:
        await sign_in(http, tokens[Role.OPERATOR])
        res = await http.post("/logout", data={"csrf": csrf_of(http)})
        assert res.headers["location"] == "/login"
        http.cookies.set("saga_session", cookie)
        assert (await http.get("/api/v1/me")).status_code == 401


async def test_sign_in_cookies_are_httponly_and_strict_and_a_bad_token_says_so(
    console: RunningConsole,
) -> None:
    """The session and CSRF cookies are HttpOnly and SameSite=Strict; a wrong token is
    a 401 page with one sentence and no session."""
    async with console.client() as http:
        page = await http.get("/login")
        assert "HttpOnly" in page.headers["set-cookie"]
        assert "SameSite=strict" in page.headers["set-cookie"]
        res = await http.post("/login", data={"token": "saga_wrong", "csrf": csrf_of(http)})
        assert res.status_code == 401
        assert "that token is unknown, expired or revoked" in res.text
        assert "saga_session" not in http.cookies


async def test_forward_auth_is_believed_only_from_trusted_proxies(
    start_console: StartConsole, tokens: dict[Role, str]
) -> None:
    """The proxy's user header names the person (operators by group) when the peer is a
    trusted proxy; from anywhere else the header is ignored."""
    header = {"SAGA_CONSOLE_AUTH_HEADER": "X-Forwarded-User"}
    trusted = start_console(**header)
    async with trusted.client(**{"X-Forwarded-User": "alice@example.org"}) as http:
        me = (await http.get("/api/v1/me")).json()
        assert me == {"subject": "alice@example.org", "role": "viewer", "via": "forward"}
        ops = {"X-Forwarded-Groups": "staff,saga-operators"}
        assert (await http.get("/api/v1/me", headers=ops)).json()["role"] == "operator"
        bad = await http.get("/api/v1/me", headers={"X-Forwarded-User": "<script>"})
        assert bad.status_code == 401
    elsewhere = start_console(**header, SAGA_CONSOLE_TRUSTED_PROXIES="10.0.0.0/8")
    async with elsewhere.client(**{"X-Forwarded-User": "alice@example.org"}) as http:
        assert (await http.get("/api/v1/me")).status_code == 401


async def test_dev_mode_acts_as_an_anonymous_operator(start_console: StartConsole) -> None:
    """--dev lets anyone in as the operator 'dev' (the CLI allows it on loopback only)."""
    dev = start_console(dev=True)
    async with httpx.AsyncClient(base_url=dev.url) as http:
        me = (await http.get("/api/v1/me")).json()
        assert me == {"subject": "dev", "role": "operator", "via": "dev"}
