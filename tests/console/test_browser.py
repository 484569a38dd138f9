"""The console in a real headless Chromium against `saga up --console` with real workers:
sign in with the printed token, filter to failed sagas, open one, read why it failed
from its timeline, retry it and watch it complete; replay a dead letter. Screenshots
go to tmp/artefacts/console (and docs/console-saga.png with SAGA_DOCS_SCREENSHOTS=1)."""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from saga.adapters.embedded_redis import EmbeddedServer
from saga.api.client import SagaClient
from saga.config.settings import load_settings
from saga.state.connection import connect
from saga.state.keys import Keys
from saga.state.reads import get_saga_and_history
from saga.wiring.runtime import document_pipeline
from tests.console.browser import (
    CHROMIUM_ARGS,
    DOCS_SHOT,
    Stack,
    chromium_or_skip,
    provide,
    saga_up,
    shot,
)
from tests.executor.support import wait_until

pytestmark = pytest.mark.anyio
WAIT_MS = 60_000


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def chromium() -> str:
    return chromium_or_skip()


@pytest.fixture(scope="module")
def stack(
    chromium: str, redis_server: EmbeddedServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Stack]:
    """One `saga up --console` for the module, on a key prefix of its own."""
    keys = Keys(prefix=f"t{uuid.uuid4().hex[:10]}")
    with saga_up(redis_server.url, keys, tmp_path_factory.mktemp("browser")) as running:
        yield running


@pytest.fixture(scope="module")
async def browser(chromium: str, stack: Stack) -> AsyncIterator[Any]:
    """Chromium, launched while `saga up` boots; ready once both are."""
    from playwright.async_api import async_playwright

    async with async_playwright() as pw:
        b = await pw.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
        await anyio.to_thread.run_sync(stack.wait_ready)
        yield b
        await b.close()


@pytest.fixture
async def page(browser: Any, stack: Stack) -> AsyncIterator[Any]:
    """A fresh browser context signed in through the login form with the printed token."""
    context = await browser.new_context(viewport={"width": 1360, "height": 860})
    p = await context.new_page()
    errors: list[str] = []
    p.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    p.set_default_timeout(WAIT_MS)
    await p.goto(stack.url)
    assert p.url.endswith("/login")
    await p.fill("#token", stack.token)
    await p.click("button[type=submit]")
    await p.wait_for_url("**/sagas")
    yield p
    await context.close()
    assert errors == []  # no CSP violation, no script error


async def failed_saga(stack: Stack, rid: str) -> Path:
    """A saga whose document is not there yet: the router dead-letters it (NotFoundError).
    Returns where the document should be."""
    settings = load_settings(stack.env)
    doc = stack.docs / f"{rid}.pdf"
    client = connect(stack.env["REDIS_URL"])
    keys = Keys(prefix=stack.env["SAGA_KEY_PREFIX"])
    try:
        sagas = SagaClient(client, keys, document_pipeline(settings), settings)
        await sagas.start(rid, "user-7", document=str(doc))

        async def failed() -> bool:
            return (await sagas.get(rid)).state.value == "failed"

        await wait_until(failed, within=60, what=f"{rid} to fail", every=0.1,
                         on_timeout=stack.tail)  # fmt: skip
    finally:
        await client.aclose()
    return doc


async def history_of(stack: Stack, rid: str) -> list[Any]:
    client = connect(stack.env["REDIS_URL"])
    try:
        keys = Keys(prefix=stack.env["SAGA_KEY_PREFIX"])
        return (await get_saga_and_history(client, keys, rid))[1]
    finally:
        await client.aclose()


async def test_find_a_failed_saga_see_why_retry_it_and_watch_it_complete(
    stack: Stack, page: Any
) -> None:
    """List → filter to failed → the saga's timeline says NotFoundError at the router →
    retry from the router (confirmed) → the page follows it to completed."""
    rid = f"mr-web-{uuid.uuid4().hex[:6]}"
    doc = await failed_saga(stack, rid)
    await page.select_option("#f-state", "failed")
    await page.click("form.filters button[type=submit]")
    await page.wait_for_url("**/sagas?*state=failed*")
    await page.get_by_role("link", name=rid).wait_for()
    await shot(page, "1-sagas-failed")
    await page.get_by_role("link", name=rid).click()
    await page.wait_for_url(f"**/sagas/{rid}")
    why = page.locator("section.why.failed")
    assert "Failed at router" in await why.inner_text()
    assert "NotFoundError: no file at the saga's document" in await why.inner_text()
    rows = page.locator("table.timeline tbody tr")
    assert await rows.count() == 2  # started, then the attempt that was dead-lettered
    dead = rows.nth(1)
    assert "dead" in await dead.inner_text() and "NotFoundError" in await dead.inner_text()
    assert await dead.locator("svg.bar rect.b-dead_lettered").count() == 1
    await shot(page, "2-saga-failed")
    provide(doc)  # the cause is fixed: the document is there now
    await page.select_option("#retry-step", "router")
    await page.click("#retry")
    await page.wait_for_url(f"**/sagas/{rid}/confirm?*")
    assert f"Retry {rid} from router?" in await page.inner_text("h1")
    await page.click("#confirm")
    await page.wait_for_url(f"**/sagas/{rid}?done=retry")
    await page.locator("h1 .state.st-completed").wait_for()  # the page updates by itself
    outcomes = await page.locator("table.timeline td.outcome").all_inner_texts()
    assert outcomes == ["started", "dead", "retried", "ok", "ok", "ok"]
    await shot(page, "3-saga-retried-completed")
    if os.environ.get("SAGA_DOCS_SCREENSHOTS") == "1":  # the README's picture: the first screen
        await page.screenshot(path=str(DOCS_SHOT), full_page=False)
    retried = [e for e in await history_of(stack, rid) if e.event.value == "retried"]
    assert retried[0].detail.startswith("from failed at router by console up-")


async def test_replay_a_dead_letter_after_a_dry_run(stack: Stack, page: Any) -> None:
    """Dead letters → select one → dry run shows it → confirm → it replays and completes."""
    rid = f"mr-dlq-{uuid.uuid4().hex[:6]}"
    provide(await failed_saga(stack, rid))
    await page.click("nav >> text=Dead letters")
    await page.wait_for_url("**/dead-letters")
    await page.check(f"input[name=record_id][value='{rid}']")
    await page.click("#dry-run-selected")
    assert "Dry run: 1 saga(s) would be replayed" in await page.inner_text("h1")
    assert rid in await page.inner_text("ul.plain")
    await shot(page, "4-replay-dry-run")
    await page.click("#confirm")
    assert "Replayed 1 saga(s)" in await page.inner_text("h1")
    await page.get_by_role("link", name=rid).click()
    await page.locator("h1 .state.st-completed").wait_for()
    await shot(page, "5-replayed-completed")


async def test_set_and_clear_a_budget_through_its_confirmation(stack: Stack, page: Any) -> None:
    """Budgets → set a user's daily budget (reviewed, then confirmed) → the row shows it,
    spend and what is left → clear it (confirmed) → the user has no budget."""
    user = f"user-b{uuid.uuid4().hex[:6]}"
    await page.click("nav >> text=Budgets")
    await page.wait_for_url("**/budgets")
    await page.fill("#set-user", user)
    await page.fill("#set-daily", "5")  # (bad input: a 400 page, test_budget_pages.py)
    await page.click("#set-submit")
    await page.wait_for_url("**/budgets/confirm?*")
    assert f"Set the budget of {user}?" in await page.inner_text("h1")
    await page.click("#confirm")
    await page.wait_for_url(f"**/budgets?user={user}&done=set*")
    assert "Budget set." in await page.inner_text("#done")
    row = await page.inner_text(f"#budget-{user}")
    assert "$5" in row and "within budget" in row
    await shot(page, "6-budget-set")
    await page.get_by_role("link", name="Clear").click()
    await page.wait_for_url("**/budgets/confirm?*action=clear*")
    await page.click("#confirm")
    await page.wait_for_url(f"**/budgets?user={user}&done=clear*")
    assert "no budget" in await page.inner_text(f"#budget-{user}")
