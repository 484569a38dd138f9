"""The router step: reference resolution, page splitting, limits and refusals."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from structlog.testing import capture_logs

from saga.adapters.documents import DocumentFetcher
from saga.steps.config import StepConfig
from saga.steps.context import Document
from saga.steps.errors import (
    InvalidInputError,
    NotFoundError,
    PayloadTooLargeError,
    RetryableError,
)
from saga.steps.models import RouterInput, RouterOutput
from saga.steps.router import resolve_reference, route
from saga.steps.testing import ManualContext, MemoryDocuments, make_context
from tests.steps.conftest import LocalServer, Route, local_policy
from tests.steps.pdfgen import empty_pdf, make_pdf

SECRET = "Zebrafinch-7731"  # page text that must never appear in an error or a log line


def _ctx(content: bytes, media_type: str = "text/plain", **config: Any) -> ManualContext:
    documents = MemoryDocuments({"doc": Document("doc.bin", media_type, content)})
    return make_context(documents=documents, config=StepConfig(**config))


@pytest.mark.anyio
async def test_plain_text_splits_on_form_feeds() -> None:
    """Form feeds separate pages; a final form feed opens no empty page."""
    ctx = _ctx(b"Sodium 140 mmol/L\fPotassium 4.1 mmol/L\f")
    out = await route(ctx, RouterInput(document="doc"))
    assert out == RouterOutput(document_name="doc.bin", media_type="text/plain", page_count=2)
    assert ctx.stored_pages == [["Sodium 140 mmol/L", "Potassium 4.1 mmol/L"]]


@pytest.mark.anyio
async def test_plain_text_without_form_feed_is_one_page() -> None:
    """Text with no form feed is a single page, CRLF normalised."""
    ctx = _ctx(b"line one\r\nline two")
    out = await route(ctx, RouterInput(document="doc"))
    assert out.page_count == 1
    assert ctx.stored_pages == [["line one\nline two"]]


@pytest.mark.anyio
async def test_pdf_becomes_one_text_per_page() -> None:
    """Each PDF page becomes one page text, columns kept apart by spaces."""
    pdf = make_pdf([["Glucose  105  mg/dL"], ["Page two"], ["Page three"]])
    ctx = _ctx(pdf, media_type="application/octet-stream")
    out = await route(ctx, RouterInput(document="doc"))
    assert (out.media_type, out.page_count) == ("application/pdf", 3)
    assert ctx.stored_pages[0][0] == "Glucose  105  mg/dL"


@pytest.mark.anyio
async def test_template_resolves_the_document_from_the_record_id(tmp_path: Path) -> None:
    """With no explicit document, SAGA_DOCUMENT_SOURCE's {record_id} is filled in."""
    (tmp_path / "rec-9.txt").write_text("TSH 2.0 mIU/L 0.4-4.0")
    config = StepConfig(document_source=f"{tmp_path}/{{record_id}}.txt")
    async with DocumentFetcher(max_bytes=1024, policy=local_policy(tmp_path)) as fetcher:
        ctx = make_context(record_id="rec-9", documents=fetcher, config=config)
        out = await route(ctx, RouterInput())
    assert out.document_name == "rec-9.txt"


def test_explicit_document_wins_over_the_template() -> None:
    """An explicit --document overrides the configured template."""
    assert resolve_reference("/x/y.pdf", "/data/{record_id}.pdf", "r1") == "/x/y.pdf"


def test_url_template_quotes_the_record_id() -> None:
    """The record id is percent-encoded in a URL template; other braces stay."""
    ref = resolve_reference("", "https://h/api/{record_id}/doc?f={x}", "a:b@c")
    assert ref == "https://h/api/a%3Ab%40c/doc?f={x}"


def test_no_document_and_no_template_names_the_setting() -> None:
    """Neither a document nor a template: invalid input naming SAGA_DOCUMENT_SOURCE."""
    with pytest.raises(InvalidInputError, match="SAGA_DOCUMENT_SOURCE"):
        resolve_reference("", "", "r1")


def test_template_without_placeholder_is_refused() -> None:
    """A template without {record_id} would give every saga the same document."""
    with pytest.raises(InvalidInputError, match="placeholder"):
        resolve_reference("", "/data/all.pdf", "r1")


@pytest.mark.anyio
async def test_document_over_the_byte_limit() -> None:
    """More bytes than max_document_bytes: PayloadTooLargeError naming value and limit."""
    ctx = _ctx(b"a" * 101, max_document_bytes=100)
    with pytest.raises(PayloadTooLargeError, match="is 101, over the limit of 100") as caught:
        await route(ctx, RouterInput(document="doc"))
    assert caught.value.what == "document size in bytes"
    assert ctx.stored_pages == []


@pytest.mark.anyio
async def test_pdf_over_the_page_limit() -> None:
    """More pages than max_pages: PayloadTooLargeError on the page count."""
    ctx = _ctx(make_pdf([["a"], ["b"], ["c"]]), max_pages=2)
    with pytest.raises(PayloadTooLargeError) as caught:
        await route(ctx, RouterInput(document="doc"))
    assert (caught.value.what, caught.value.value, caught.value.limit) == ("page count", 3, 2)


@pytest.mark.anyio
async def test_text_over_the_page_limit() -> None:
    """The page limit holds for form-feed pages too."""
    ctx = _ctx(b"a\fb\fc", max_pages=2)
    with pytest.raises(PayloadTooLargeError, match="page count is 3"):
        await route(ctx, RouterInput(document="doc"))


@pytest.mark.anyio
async def test_page_over_the_character_limit_never_quotes_the_text() -> None:
    """A page over max_chars_per_page is refused; the message names the page, not its text."""
    ctx = _ctx(f"short\f{SECRET * 10}".encode(), max_chars_per_page=50)
    with pytest.raises(PayloadTooLargeError) as caught:
        await route(ctx, RouterInput(document="doc"))
    assert caught.value.what == "character count of page 2"
    assert caught.value.value == len(SECRET) * 10
    assert SECRET not in str(caught.value)


@pytest.mark.anyio
async def test_empty_pdf_is_invalid() -> None:
    """A PDF with zero pages is invalid input."""
    with pytest.raises(InvalidInputError, match="no pages"):
        await route(_ctx(empty_pdf()), RouterInput(document="doc"))


@pytest.mark.anyio
async def test_pdf_without_text_is_invalid() -> None:
    """A PDF whose pages carry no text layer is invalid input (it needs OCR)."""
    from tests.steps.make_samples import scanned_page_pdf

    with pytest.raises(InvalidInputError, match="no extractable text"):
        await route(_ctx(scanned_page_pdf()), RouterInput(document="doc"))


@pytest.mark.anyio
async def test_corrupt_pdf_is_invalid() -> None:
    """A truncated PDF is invalid input naming the parser's error type only."""
    pdf = make_pdf([[SECRET]])
    with pytest.raises(InvalidInputError, match="not a readable PDF") as caught:
        await route(_ctx(pdf[: len(pdf) // 2]), RouterInput(document="doc"))
    assert SECRET not in str(caught.value)


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("content", "media_type"),
    [(b"<html>login</html>", "text/html"), (b"\x89PNG\r\n\x1a\n\x00\x00\xff", "image/png")],
)
async def test_html_and_binary_documents_are_invalid(content: bytes, media_type: str) -> None:
    """HTML (a login page) and binary files are neither PDF nor plain text."""
    with pytest.raises(InvalidInputError, match="unsupported media type"):
        await route(_ctx(content, media_type=media_type), RouterInput(document="doc"))


@pytest.mark.anyio
async def test_whitespace_only_text_is_invalid() -> None:
    """A text document with nothing but whitespace has no pages to parse."""
    with pytest.raises(InvalidInputError, match="no text"):
        await route(_ctx(b" \n\f \n"), RouterInput(document="doc"))


@pytest.mark.anyio
async def test_missing_document_is_not_found() -> None:
    """The document source's NotFoundError passes through the router."""
    with pytest.raises(NotFoundError):
        await route(make_context(), RouterInput(document="nowhere"))


@pytest.mark.anyio
async def test_router_over_http_404_and_5xx(http_server: LocalServer) -> None:
    """Through the real fetcher: a 404 is not-found, a 502 retryable."""
    http_server.add("/bad-gateway", Route(502))
    async with DocumentFetcher(max_bytes=1024, policy=local_policy()) as fetcher:
        ctx = make_context(documents=fetcher)
        with pytest.raises(NotFoundError):
            await route(ctx, RouterInput(document=http_server.url("/missing")))
        with pytest.raises(RetryableError):
            await route(ctx, RouterInput(document=http_server.url("/bad-gateway")))


@pytest.mark.anyio
async def test_router_logs_counts_not_text() -> None:
    """The routed event carries media type and counts; never page text, nor the document's
    file name (often a patient's name)."""
    with capture_logs() as logs:
        ctx = _ctx(SECRET.encode())
        await route(ctx, RouterInput(document="doc"))
    event = next(entry for entry in logs if entry["event"] == "document routed")
    assert event["page_count"] == 1 and "document_name" not in event
    assert "doc.bin" not in repr(logs)
    assert SECRET not in repr(logs)
