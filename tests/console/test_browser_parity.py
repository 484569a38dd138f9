"""The console's layout in a real headless Chromium (the existing Playwright setup):
every page fits 1360 px without a horizontal scroll, and at 390 px (a phone) the page
itself never scrolls sideways: the header wraps and a wide table scrolls in its own
box. The cost chart's labels sit inside its drawing; the JSON of outputs folds open
without a script. Screenshots go to tmp/artefacts/console (and docs/ with
SAGA_DOCS_SCREENSHOTS=1)."""

from __future__ import annotations

import os
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest

from saga.console.tokens import Role
from saga.state.keys import Keys
from saga.state.machine import StateMachine
from saga.state.model import FailAction
from saga.state.presence import Presence, announce
from saga.state.types import TypeInfo, register_type
from tests.cli.inspect_support import STEPS, fail, machine, start
from tests.console.browser import CHROMIUM_ARGS, REPO, chromium_or_skip, shot
from tests.console.sagas import completed, dead, flagged
from tests.console.support import RunningConsole

pytestmark = pytest.mark.anyio
LONG = (
    "the provider answered 503 Service Unavailable for the third time in a row while "
    "the parser asked for the second page; the circuit opens after five such answers"
)
PAGES = ["/sagas", "/sagas?sort=updated", "/sagas?q=mr-", "/sagas/mr-flag",
         "/sagas/mr-flag/history", "/sagas/mr-long", "/queues", "/dead-letters",
         "/costs?since=2d", "/budgets"]  # fmt: skip


@pytest.fixture
async def browser() -> AsyncIterator[Any]:
    from playwright.async_api import async_playwright

    chromium = chromium_or_skip()
    async with async_playwright() as pw:
        b = await pw.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
        yield b
        await b.close()


async def signed_in(browser: Any, console: RunningConsole, token: str, width: int) -> Any:
    context = await browser.new_context(viewport={"width": width, "height": 900})
    page = await context.new_page()
    page.set_default_timeout(30_000)
    await page.goto(console.url + "/login")
    await page.fill("#token", token)
    await page.click("button[type=submit]")
    await page.wait_for_url("**/sagas")
    return page


async def a_busy_console(redis: Any, keys: Keys, sm: StateMachine) -> None:
    """Every kind of row: flagged, failed with a long error, waiting, a second type, a
    cost under a cent, a live worker."""
    await flagged(sm, "mr-flag", "user-with-a-long-name-0042")
    await dead(sm, "mr-dead", "u-2")
    await start(sm, "mr-long", "u-3")
    await fail(sm, "router", FailAction.DEAD, error=("ProviderUnavailableError", LONG))
    for i in range(8):  # today's total $0.000022: the chart's top reads $0.000025
        await completed(sm, f"mr-2026-11-{i:04d}", f"u-{i}", cost=0.000011 if i < 2 else 0.0)
    await register_type(redis, keys, TypeInfo(name="orders", steps=tuple(STEPS)))
    await start(await machine(redis, keys.of_type("orders")), "ord-1", "u-1")
    now = int(time.time() * 1000)
    me = Presence(worker="documents-router-7f9c4b6d5-x2x9q-1234", saga_type="documents",
                  steps=("router", "parser", "grouper"), host="documents-router-7f9c4b6d5-x2x9q",
                  pid=1234, health="10.244.17.201:8080", started_ms=now)  # fmt: skip
    await announce(redis, keys, me, now)


async def overflow(page: Any) -> dict[str, Any]:
    """The page's width against the window's, the widest scroll box's overflow, and
    (to say what to fix) the first elements outside the window but in no scroll box."""
    result: dict[str, Any] = await page.evaluate(
        """() => {
          const w = document.documentElement.clientWidth;
          return {
            page: document.documentElement.scrollWidth, window: w,
            boxes: Math.max(0, ...[...document.querySelectorAll('.scroll')]
                   .map(b => b.scrollWidth - b.clientWidth)),
            outside: [...document.querySelectorAll('body *')]
              .filter(e => e.getBoundingClientRect().right > w + 1 && !e.closest('.scroll'))
              .slice(0, 4).map(e => e.tagName + '.' + e.className),
          };
        }"""
    )
    return result


async def test_every_page_fits_1360_and_390_pixels(
    redis: Any, keys: Keys, sm: StateMachine, console: RunningConsole,
    tokens: dict[Role, str], browser: Any,
) -> None:  # fmt: skip
    """At 1360 px nothing scrolls sideways, not even a table's box; at 390 px the page
    does not (tables scroll in their box), the header's links are all on screen."""
    await a_busy_console(redis, keys, sm)
    wide = await signed_in(browser, console, tokens[Role.OPERATOR], 1360)
    narrow = await signed_in(browser, console, tokens[Role.OPERATOR], 390)
    for path in PAGES:
        for page, width in ((wide, 1360), (narrow, 390)):
            res = await page.goto(console.url + path)
            assert res.status == 200, path
            got = await overflow(page)
            assert got["page"] <= got["window"] <= width, (path, width, got)
            if width == 1360:
                assert got["boxes"] == 0, (path, got)
            links = await page.eval_on_selector_all(
                "header nav a", "as => as.map(a => a.getBoundingClientRect().right)"
            )
            assert links and max(links) <= width, (path, width, links)
        await shot(narrow, "narrow" + path.replace("/", "-").replace("?", "-"))
    await narrow.goto(console.url + "/sagas/mr-long")  # no document name in the docs
    if os.environ.get("SAGA_DOCS_SCREENSHOTS") == "1":
        await narrow.screenshot(path=str(REPO / "docs" / "console-narrow.png"), full_page=False)
        await wide.goto(console.url + "/sagas/mr-flag/history")
        await wide.screenshot(path=str(REPO / "docs" / "console-history.png"), full_page=False)


async def test_chart_labels_sit_inside_the_drawing_and_json_folds_open(
    redis: Any, keys: Keys, sm: StateMachine, console: RunningConsole,
    tokens: dict[Role, str], browser: Any,
) -> None:  # fmt: skip
    """Every label of the cost chart (a top of $0.000025: six places) lies inside the
    SVG's view box; an output's <details> opens on a click and shows its JSON."""
    await a_busy_console(redis, keys, sm)
    page = await signed_in(browser, console, tokens[Role.OPERATOR], 1360)
    await page.goto(console.url + "/costs?since=2d")
    boxes = await page.eval_on_selector_all(
        "figure.chart svg text", "ts => ts.map(t => { const b = t.getBBox(); "
        "return [t.textContent, b.x, b.y, b.x + b.width, b.y + b.height]; })"
    )  # fmt: skip
    assert boxes and any(label == "$0.000025" for label, *_ in boxes), boxes
    for label, left, top, right, bottom in boxes:
        assert left >= 0 and top >= 0 and right <= 720 and bottom <= 200, (label, boxes)
    await page.goto(console.url + "/sagas/mr-flag")
    parser = page.locator("details#json-parser")
    assert not await parser.evaluate("d => d.open")
    await parser.locator("summary").click()
    assert await parser.evaluate("d => d.open")
    assert '"extraction"' in await parser.locator("pre").inner_text()
    await shot(page, "saga-json-open")
