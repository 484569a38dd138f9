"""A person reviews a flagged saga in a real headless Chromium against `saga up --console`
with real workers and a real PDF: the review queue, the value highlighted on its page
image, a correction, a rejection, a missed value added; the saga completes with the
reviewed values and its history names the reviewer; a viewer cannot decide; two
reviewers deciding at once get one success and one clear conflict. Screenshots go to
tmp/artefacts/console (and docs/ with SAGA_DOCS_SCREENSHOTS=1)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import anyio
import msgspec
import pytest

from saga.adapters.embedded_redis import EmbeddedServer
from saga.api.client import SagaClient
from saga.config.settings import load_settings
from saga.state.connection import connect
from saga.state.keys import Keys
from saga.state.reads import get_saga_and_history
from saga.wiring.runtime import document_pipeline
from tests.console.browser import CHROMIUM_ARGS, Stack, chromium_or_skip, saga_up, shot
from tests.console.support import REPO
from tests.console.test_review_pages import yellow
from tests.executor.support import wait_until
from tests.steps.pdfgen import make_pdf

pytestmark = pytest.mark.anyio
WAIT_MS = 60_000
DOCS = REPO / "docs"
LINES = ["City Lab - Complete Blood Count", "Test Result Unit Reference",
         "Hemoglobin 13.2 g/dL 12.0 - 15.5", "Sodium 1450 mmol/L 135 - 145",
         "Glucose 95 mg/dL 70 - 99", "Potassium four point one mmol/L 3.5 - 5.1",
         "Ferritin 85 ng/mL 15 - 150"]  # fmt: skip
"""Read by the rules parser as: three values, Sodium rejected (impossible), the Potassium
line unexplained: flagged for review."""


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
    keys = Keys(prefix=f"t{uuid.uuid4().hex[:10]}")
    with saga_up(redis_server.url, keys, tmp_path_factory.mktemp("review")) as running:
        yield running


@pytest.fixture(scope="module")
async def browser(chromium: str, stack: Stack) -> AsyncIterator[Any]:
    from playwright.async_api import async_playwright

    async with async_playwright() as pw:
        b = await pw.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
        await anyio.to_thread.run_sync(stack.wait_ready)
        yield b
        await b.close()


def mint(stack: Stack, name: str, role: str) -> str:
    """`saga console token add NAME --role ROLE`, as an operator would."""
    argv = [sys.executable, "-m", "saga.cli.main", "console", "token", "add", name, "--role",
            role, "--json"]  # fmt: skip
    secret = str(Path(stack.env["SAGA_DATA_DIR"]) / "console-secret")  # saga up's own
    env = {**stack.env, "SAGA_CONSOLE_SECRET_FILE": secret}
    res = subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True,
                         timeout=60, check=False)  # fmt: skip
    assert res.returncode == 0, res.stderr
    return str(json.loads(res.stdout)["token"])


class Person:
    """A browser context signed in with a token; no script error, no CSP violation."""

    def __init__(self, context: Any, page: Any, errors: list[str]) -> None:
        self.context, self.page, self.errors = context, page, errors


async def signed_in(browser: Any, stack: Stack, token: str, width: int = 1360) -> Person:
    context = await browser.new_context(viewport={"width": width, "height": 900})
    p = await context.new_page()
    errors: list[str] = []
    p.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    p.set_default_timeout(WAIT_MS)
    await p.goto(stack.url + "/login")
    await p.fill("#token", token)
    await p.click("button[type=submit]")
    await p.wait_for_url("**/sagas")
    return Person(context, p, errors)


async def flagged_saga(stack: Stack, rid: str) -> None:
    """The PDF goes through the real router, parser and grouper and ends flagged."""
    doc = stack.docs / f"{rid}.pdf"
    doc.write_bytes(make_pdf([LINES]))
    settings = load_settings(stack.env)
    client = connect(stack.env["REDIS_URL"])
    try:
        sagas = SagaClient(client, Keys(prefix=stack.env["SAGA_KEY_PREFIX"]),
                           document_pipeline(settings), settings)  # fmt: skip
        await sagas.start(rid, "user-r", document=str(doc))

        async def flagged() -> bool:
            s = await sagas.get(rid)
            return s.state.value == "completed" and s.needs_review

        await wait_until(flagged, within=90, what=f"{rid} to complete flagged", every=0.1,
                         on_timeout=stack.tail)  # fmt: skip
    finally:
        await client.aclose()


async def saga_and_history(stack: Stack, rid: str) -> tuple[Any, list[Any]]:
    client = connect(stack.env["REDIS_URL"])
    try:
        return await get_saga_and_history(client, Keys(prefix=stack.env["SAGA_KEY_PREFIX"]), rid)
    finally:
        await client.aclose()


async def docs_shot(page: Any, name: str, full: bool = True, only: str = "") -> None:
    """An artefact, and with SAGA_DOCS_SCREENSHOTS=1 the docs' picture (``only``: just
    that element, e.g. ``main`` without the header)."""
    await shot(page, name)
    if os.environ.get("SAGA_DOCS_SCREENSHOTS") == "1":
        path = str(DOCS / f"{name}.png")
        if only:
            await page.locator(only).screenshot(path=path)
        else:
            await page.screenshot(path=path, full_page=full)


async def correct_reject_add(p: Any) -> None:
    """Correct b0, reject r0, add the unexplained line u0 as Potassium, through the forms."""
    await p.click("#row-b0 a.item-link")
    await p.fill("#fix-value", "13.4")
    await p.click("#correct-item")
    assert "Corrected" in await p.inner_text("#flash")
    await p.click("#row-r0 a.item-link")
    await p.fill("#reject-note", "misprint: 145")
    await p.click("#reject-item")
    assert "Rejected" in await p.inner_text("#flash")
    await p.click("#row-u0 a.item-link")
    await p.fill("#fix-name", "Potassium")
    await p.fill("#fix-value", "4.1")
    await p.fill("#fix-unit", "mmol/L")
    await p.fill("#fix-range", "3.5 - 5.1")
    await p.click("#add-item")
    assert "the review is complete and grouper re-runs" in await p.inner_text("#flash")


async def test_a_reviewer_reviews_a_flagged_saga_end_to_end(browser: Any, stack: Stack) -> None:
    """Queue → review page with r0's line highlighted on the page image → correct b0,
    reject r0, add u0 → the grouper re-runs and the saga completes with the reviewed
    values; the history names ann for each decision; a viewer cannot decide."""
    rid = f"mr-rev-{uuid.uuid4().hex[:6]}"
    await flagged_saga(stack, rid)
    ann = await signed_in(browser, stack, mint(stack, "ann", "reviewer"))
    p = ann.page
    await p.click("nav >> text=Review")
    await p.wait_for_url("**/review")
    row = p.locator("#queue tr", has_text=rid)
    assert "rejected by the checks" in await row.inner_text()
    assert "rejected" in await p.inner_text("#reason-counts")
    await docs_shot(p, "console-review-queue", full=False)
    await row.get_by_role("link", name=rid).click()
    await p.wait_for_url(f"**/sagas/{rid}/review")
    await p.click("#row-r0 a.item-link")
    await p.wait_for_url("**item=r0*")
    image = p.locator("#page-image")
    await image.wait_for()
    assert await image.evaluate("i => i.complete && i.naturalWidth > 600")
    src = await image.get_attribute("src")
    assert src == f"/sagas/{rid}/review/page/1?item=r0"
    png = await (await p.request.get(stack.url + src)).body()
    assert yellow(png) > 500  # Sodium's line, in yellow
    await docs_shot(p, "console-review")

    await correct_reject_add(p)
    assert await p.locator("#decisions tbody tr").count() == 3

    await p.click(f"a[href='/sagas/{rid}']")
    await p.locator("h1 .state.st-completed").wait_for()  # the grouper re-ran by itself
    assert "needs review" not in await p.inner_text("h1")
    events = await p.locator("table.timeline tr.event").all_inner_texts()
    decided = [e for e in events if "review_decided" in e]
    assert len(decided) == 3 and all("by console ann" in e for e in decided)
    await docs_shot(p, "console-review-history")
    saga, history = await saga_and_history(stack, rid)
    parsed = msgspec.json.decode(saga.outputs["parser"])
    values = {b["name"]: b["value"] for b in parsed["extraction"]["biomarkers"]}
    assert values == {"Hemoglobin": 13.4, "Glucose": 95, "Ferritin": 85, "Potassium": 4.1}
    grouped = saga.outputs["grouper"]
    assert "Potassium" in grouped and "Sodium" not in grouped
    assert [e.event.value for e in history].count("committed") == 4  # grouper twice
    assert ann.errors == []
    await ann.context.close()

    await viewer_cannot_review(browser, stack, rid)


async def viewer_cannot_review(browser: Any, stack: Stack, rid: str) -> None:
    """A viewer gets a 403 on the review page and no link to it on the saga's page."""
    vic = await signed_in(browser, stack, mint(stack, "vic", "viewer"))
    res = await vic.page.goto(f"{stack.url}/sagas/{rid}/review")
    assert res.status == 403
    assert "needs the reviewer role" in await vic.page.inner_text("main")
    await vic.page.goto(f"{stack.url}/sagas/{rid}")
    assert await vic.page.locator("#review-link").count() == 0
    await vic.context.close()


async def test_two_reviewers_at_once_and_the_narrow_layout(browser: Any, stack: Stack) -> None:
    """Two reviewers open the same review and reject r0 at the same moment: one is
    recorded, the other is told another reviewer came first; at 390 px the values and
    the page stack without the page scrolling sideways."""
    rid = f"mr-two-{uuid.uuid4().hex[:6]}"
    await flagged_saga(stack, rid)
    people = [await signed_in(browser, stack, mint(stack, name, "reviewer"))
              for name in ("bea", "cyd")]  # fmt: skip
    for person in people:
        await person.page.goto(f"{stack.url}/sagas/{rid}/review?item=r0")
    async with anyio.create_task_group() as tg:
        for person in people:
            tg.start_soon(person.page.click, "#reject-item")
    texts = []
    for person in people:
        await person.page.locator("#flash, #review-error").first.wait_for()
        texts.append(await person.page.inner_text("main"))
    won = [t for t in texts if "Rejected: the value leaves" in t]
    lost = [t for t in texts if "Another reviewer decided on this saga after you opened it" in t]
    assert (len(won), len(lost)) == (1, 1)
    _, history = await saga_and_history(stack, rid)
    assert [e.event.value for e in history].count("review_decided") == 1
    for person in people:
        await person.context.close()

    narrow = await signed_in(browser, stack, mint(stack, "dee", "reviewer"), width=390)
    await narrow.page.goto(f"{stack.url}/sagas/{rid}/review?item=u0")
    await narrow.page.locator("#page-image").wait_for()
    grid = await narrow.page.evaluate(
        "() => { const g = document.querySelector('.review-grid'); "
        "return [g.scrollWidth, g.clientWidth, g.getBoundingClientRect().right]; }"
    )
    assert grid[0] <= grid[1] and grid[2] <= 390, grid
    await docs_shot(narrow.page, "console-review-narrow", only="main")  # the header is not ours
    assert narrow.errors == []
    await narrow.context.close()
