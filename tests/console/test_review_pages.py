"""The review page, its source image, the decision forms, the review API and the queue,
against a real console, a real server and a real PDF: reviewers decide, viewers cannot
(and see no document), two reviewers at once get one success and one conflict."""

from __future__ import annotations

import io
import time
from pathlib import Path
from typing import Any

import anyio
import httpx
import msgspec
import pytest
from PIL import Image

from saga.console.tokens import Role, add_stored_token
from saga.state.keys import Keys
from saga.state.machine import StateMachine
from saga.state.reads import get_saga_and_history
from saga.state.requests import CommitRequest
from tests.cli.inspect_support import commit
from tests.cli.test_review import REASON, parser_output
from tests.console.conftest import StartConsole
from tests.console.support import RunningConsole, check_schema, console_signer, csrf_of, sign_in
from tests.state.helpers import claim_next, server_ms, wait_lease_expired
from tests.steps.pdfgen import make_pdf

pytestmark = pytest.mark.anyio
HB = "Hemoglobin  11.2 g/dL  12.0 - 15.5 g/dL  L"


@pytest.fixture
def docs(tmp_path: Path) -> Path:
    d = tmp_path / "docs"
    d.mkdir()
    return d


@pytest.fixture
def review_console(start_console: StartConsole, docs: Path) -> RunningConsole:
    return start_console(SAGA_DOCUMENT_ROOTS=str(docs))


@pytest.fixture
async def ann(redis: Any, keys: Keys) -> str:
    """A reviewer's token (``ann``)."""
    now = int(time.time() * 1000)
    return await add_stored_token(redis, keys, "ann", Role.REVIEWER, signer=console_signer(),
                                  now_ms=now)  # fmt: skip


async def flagged_with_pdf(sm: StateMachine, rid: str, document: Path, user: str = "u-1") -> None:
    """Completed with the parser's output flagged, its values on pages 2 and 3 of a real
    PDF at ``document`` (written here unless it is to be missing)."""
    await sm.start(rid, user, "router", document=str(document))
    await commit(sm, "router")
    c = await claim_next(sm, "parser", "w1")
    req = CommitRequest(output=parser_output(), next_step="grouper", delete_pages=True,
                        review=REASON)  # fmt: skip
    assert (await sm.commit(c, req)).code.name == "OK"
    await commit(sm, "grouper")


def write_pdf(path: Path) -> None:
    path.write_bytes(make_pdf([["Lab report"], [HB, "Sodium 1450 mmol/L"], ["Iron 80 ug/dL"]]))


def yellow(png: bytes) -> int:
    """Pixels of the line's highlight (the page itself is black on white)."""
    px = Image.open(io.BytesIO(png)).convert("RGB").tobytes()
    return sum(1 for i in range(0, len(px), 3)
               if px[i] > 240 and 200 < px[i + 1] < 245 and px[i + 2] < 190)  # fmt: skip


async def test_a_reviewer_sees_values_beside_the_page_with_the_line_highlighted(
    sm: StateMachine, review_console: RunningConsole, ann: str, docs: Path
) -> None:
    """The page lists every item with its reasons and page, shows the chosen item's page
    as an image, and the image has the line highlighted only when an item on it is asked."""
    write_pdf(docs / "report.pdf")
    await flagged_with_pdf(sm, "mr-flag", docs / "report.pdf")
    async with review_console.client(ann) as http:
        page = await http.get("/sagas/mr-flag/review?item=r0")
        assert page.status_code == 200, page.text
        html = page.text
        for item in ("row-b0", "row-r0", "row-u0"):
            assert f'id="{item}"' in html
        assert "outside any physiological value for Sodium" in html
        assert 'src="/sagas/mr-flag/review/page/2?item=r0"' in html
        assert "style=" not in html and "<script>" not in html
        assert 'id="not-located"' not in html  # a text page: the line is found
        assert "script-src 'self'" in page.headers["content-security-policy"]
        lit = await http.get("/sagas/mr-flag/review/page/2?item=r0")
        assert lit.headers["content-type"] == "image/png"
        plain = await http.get("/sagas/mr-flag/review/page/2")
        elsewhere = await http.get("/sagas/mr-flag/review/page/2?item=u0")  # u0 is on page 3
        assert yellow(lit.content) > 500
        assert yellow(plain.content) == 0 and yellow(elsewhere.content) == 0
        assert (await http.get("/sagas/mr-flag/review/page/9")).status_code == 404
        api = await http.get("/api/v1/sagas/mr-flag/review")
        assert api.status_code == 200
        check_schema("ReviewView", api.json())
        png = await http.get("/api/v1/sagas/mr-flag/review/pages/3?item=u0")
        assert png.status_code == 200 and yellow(png.content) > 200


async def test_without_a_readable_document_the_page_shows_the_lines_with_the_span(
    sm: StateMachine, review_console: RunningConsole, ann: str, docs: Path
) -> None:
    """A document that cannot be read any more: the lines the parser read on that page,
    the value's span marked, and no image."""
    await flagged_with_pdf(sm, "mr-gone", docs / "gone.pdf")
    async with review_console.client(ann) as http:
        html = (await http.get("/sagas/mr-gone/review?item=b0")).text
    assert 'id="page-image"' not in html and 'id="no-image"' in html
    assert "Hemoglobin  <mark>11.2</mark> g/dL" in html
    assert "<mark>1450</mark>" in html  # r0 is on the same page


def write_tiff(path: Path) -> None:
    """The report as a scanner sends it: a three-page TIFF at 200 dpi, no text layer; its
    page 2 holds Hemoglobin's line but not Sodium's (the parser's output says it does)."""
    import pypdfium2 as pdfium

    pdf = pdfium.PdfDocument(make_pdf([["Lab report"], [HB], ["Iron 80 ug/dL"]]))
    frames = [p.render(scale=200 / 72).to_pil().convert("L") for p in pdf]
    frames[0].save(path, format="TIFF", save_all=True, append_images=frames[1:],
                   dpi=(200, 200), compression="tiff_deflate")  # fmt: skip


async def test_on_a_picture_document_the_line_is_boxed_or_the_page_says_it_is_not_found(
    sm: StateMachine, start_console: StartConsole, ann: str, docs: Path
) -> None:
    """A TIFF document with OCR on: Hemoglobin's line is found on page 2 by Tesseract and
    highlighted; Sodium's, not on the picture, leaves it unmarked and the page says so."""
    import shutil

    if shutil.which("tesseract") is None:
        pytest.skip("no tesseract: apt-get install tesseract-ocr")
    write_tiff(docs / "report.tiff")
    await flagged_with_pdf(sm, "mr-scan", docs / "report.tiff")
    running = start_console(SAGA_DOCUMENT_ROOTS=str(docs), SAGA_OCR="on",
                            SAGA_OCR_LANGUAGES="eng")  # fmt: skip
    async with running.client(ann) as http:
        found = (await http.get("/sagas/mr-scan/review?item=b0")).text
        assert 'id="page-image"' in found and 'id="not-located"' not in found
        assert "b0's line highlighted" in found
        lit = await http.get("/sagas/mr-scan/review/page/2?item=b0")
        assert lit.status_code == 200 and yellow(lit.content) > 300
        lost = (await http.get("/sagas/mr-scan/review?item=r0")).text
        assert 'id="page-image"' in lost and 'id="not-located"' in lost
        assert "r0's line not found" in lost and "The line could not be found" in lost
        plain = await http.get("/sagas/mr-scan/review/page/2?item=r0")
        assert plain.status_code == 200 and yellow(plain.content) == 0


async def test_a_viewer_cannot_review_and_sees_no_document(
    sm: StateMachine, review_console: RunningConsole, tokens: dict[Role, str], docs: Path
) -> None:
    """The review page, its image, the review API and a decision are 403 for a viewer;
    the queue shows the saga with no document and no link to decide."""
    write_pdf(docs / "report.pdf")
    await flagged_with_pdf(sm, "mr-flag", docs / "report.pdf")
    async with review_console.client(tokens[Role.VIEWER]) as http:
        for path in (
            "/sagas/mr-flag/review",
            "/sagas/mr-flag/review/page/2",
            "/api/v1/sagas/mr-flag/review",
            "/api/v1/sagas/mr-flag/review/pages/2",
        ):
            res = await http.get(path)
            assert res.status_code == 403, path
        res = await http.post("/api/v1/sagas/mr-flag/review/reject", json={"item": "r0"})
        assert res.status_code == 403
        assert res.json()["error"] == "this needs the reviewer role; you are signed in as viewer"
        queue = await http.get("/review")
        assert queue.status_code == 200 and "mr-flag" in queue.text
        assert "report.pdf" not in queue.text and "/sagas/mr-flag/review" not in queue.text


async def test_forms_decide_each_item_and_the_review_completes(
    sm: StateMachine, review_console: RunningConsole, ann: str, docs: Path, redis: Any,
    keys: Keys,
) -> None:  # fmt: skip
    """Signed in as a reviewer: correct b0, reject r0, add u0 through the forms (CSRF);
    the saga re-runs the grouper on the reviewed values and history names ann each time.
    A form without the CSRF token changes nothing."""
    write_pdf(docs / "report.pdf")
    await flagged_with_pdf(sm, "mr-flag", docs / "report.pdf")
    async with httpx.AsyncClient(base_url=review_console.url, timeout=30) as http:
        await sign_in(http, ann)
        forged = await http.post(
            "/sagas/mr-flag/review", data={"item": "r0", "kind": "reject", "version": "0"}
        )
        assert forged.status_code == 403
        forms = [
            {"item": "b0", "kind": "correct", "value": "11.8", "version": "0"},
            {"item": "r0", "kind": "reject", "note": "misprint", "version": "1"},
            {"item": "u0", "kind": "add", "name": "Iron", "value": "80", "unit": "ug/dL",
             "version": "2"},
        ]  # fmt: skip
        for form in forms:
            res = await http.post("/sagas/mr-flag/review", data={**form, "csrf": csrf_of(http)})
            assert res.status_code == 303, res.text
        done = await http.get(res.headers["location"])
        assert "the review is complete and grouper re-runs" in done.text
        trail = done.text.split('id="decisions"', 1)[1].split("</table>", 1)[0]
        assert "<td>Hemoglobin 11.2 g/dL (12.0 - 15.5, low)</td>" in trail
        assert "<td>Hemoglobin 11.8 g/dL (12.0 - 15.5, low)</td>" in trail
        assert "<td>misprint</td>" in trail and "<td>Iron 80 ug/dL</td>" in trail
    saga, events = await get_saga_and_history(redis, keys, "mr-flag")
    assert (saga.state.value, saga.step, saga.needs_review) == ("pending", "grouper", False)
    decided = [e.detail for e in events if e.event == "review_decided"]
    assert decided == ["correct b0 by console ann", "reject r0 by console ann",
                       "add u0 by console ann"]  # fmt: skip
    out = msgspec.json.decode(saga.outputs["parser"])
    assert [b["name"] for b in out["extraction"]["biomarkers"]] == ["Hemoglobin", "Iron"]


async def test_two_reviewers_at_once_one_success_one_clear_conflict(
    sm: StateMachine, review_console: RunningConsole, ann: str, redis: Any, keys: Keys,
    docs: Path,
) -> None:  # fmt: skip
    """Two reviewers post a decision on version 0 at the same moment: one is recorded
    (200), the other is a 409 that says another reviewer came first; the page a stale
    form comes back to says nothing of theirs was recorded."""
    write_pdf(docs / "report.pdf")
    await flagged_with_pdf(sm, "mr-flag", docs / "report.pdf")
    now = int(time.time() * 1000)
    bob = await add_stored_token(redis, keys, "bob", Role.REVIEWER, signer=console_signer(),
                                 now_ms=now)  # fmt: skip
    results: list[httpx.Response] = []

    async def decide(token: str, kind: str) -> None:
        async with review_console.client(token) as http:
            body = {"item": "r0", "version": 0}
            results.append(await http.post(f"/api/v1/sagas/mr-flag/review/{kind}", json=body))

    async with anyio.create_task_group() as tg:
        tg.start_soon(decide, ann, "reject")
        tg.start_soon(decide, bob, "accept")
    assert sorted(r.status_code for r in results) == [200, 409]
    [lost] = [r for r in results if r.status_code == 409]
    assert "another reviewer decided on record 'mr-flag' first" in lost.json()["error"]
    async with httpx.AsyncClient(base_url=review_console.url, timeout=30) as http:
        await sign_in(http, ann)
        stale = await http.post(
            "/sagas/mr-flag/review",
            data={"item": "r0", "kind": "reject", "version": "0", "csrf": csrf_of(http)},
        )
        assert stale.status_code == 409
        assert "Another reviewer decided on this saga after you opened it" in stale.text
    _, events = await get_saga_and_history(redis, keys, "mr-flag")
    assert sum(e.event == "review_decided" for e in events) == 1


async def test_queue_is_oldest_first_with_counts_per_reason_and_a_user_filter(
    sm: StateMachine, review_console: RunningConsole, ann: str, docs: Path
) -> None:
    """Two flagged sagas: oldest first, counts per kind of reason, the user filter keeps
    one; the API answers the same document (its schema holds)."""
    write_pdf(docs / "report.pdf")
    await flagged_with_pdf(sm, "z-old", docs / "report.pdf", user="u-1")
    # the next one is flagged at a later millisecond of the server's clock (its ZADD score)
    await wait_lease_expired(sm.client, await server_ms(sm.client))
    await flagged_with_pdf(sm, "a-new", docs / "report.pdf", user="u-2")
    async with review_console.client(ann) as http:
        doc = (await http.get("/api/v1/review-queue")).json()
        check_schema("ReviewQueue", doc)
        assert [r["record_id"] for r in doc["rows"]] == ["z-old", "a-new"]
        assert doc["counts"] == {"coverage": 2, "rejected": 2}
        assert doc["total"] == 2
        one = (await http.get("/api/v1/review-queue?user=u-2")).json()
        assert [r["record_id"] for r in one["rows"]] == ["a-new"]
        html = (await http.get("/review?user=u-2")).text
        assert 'href="/sagas/a-new/review"' in html and "z-old" not in html
