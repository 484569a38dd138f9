"""PDF text extraction: layout→plain fallback, the content budget, scans inside text PDFs."""

from __future__ import annotations

import io
import time
import tracemalloc
import zlib

import pytest
from fpdf import FPDF
from pypdf import PdfReader

from saga.steps.config import StepConfig
from saga.steps.context import Document
from saga.steps.errors import InvalidInputError, PayloadTooLargeError
from saga.steps.models import RouterInput
from saga.steps.pages import PdfLimits, choose_text, pdf_text
from saga.steps.pdf_budget import inflated_size, price_pages
from saga.steps.router import route
from saga.steps.testing import ManualContext, MemoryDocuments, make_context
from tests.steps.odd_pdfs import ROW, fax_pdf, form_pdf, rotated_pdf, shared_stream_pdf
from tests.steps.pdfgen import make_pdf

DEFAULTS = PdfLimits.of(StepConfig())
ROWS = "\n".join(
    ["Sodium  140  mmol/L  135-145", "Potassium  4.1  mmol/L  3.5-5.1", "Chloride  101  mmol/L"]
)


def _ctx(pdf: bytes, **config: int) -> ManualContext:
    documents = MemoryDocuments({"doc": Document("doc.pdf", "application/pdf", pdf)})
    return make_context(documents=documents, config=StepConfig(**config))


# -- layout mode that returns nothing -----------------------------------------------
@pytest.mark.anyio
async def test_rotated_text_pdf_is_read_in_plain_mode() -> None:
    """A 15-page text PDF for which layout mode returns "" without raising is read (plain
    mode), not dead-lettered as needing OCR."""
    pdf = rotated_pdf(15)
    assert not _layout(pdf, 0).strip()  # the trap is real: layout mode gives nothing
    ctx = _ctx(pdf)
    out = await route(ctx, RouterInput(document="doc"))
    pages = ctx.stored_pages[-1]
    assert out.page_count == 15 and out.textless_pages == []
    assert all(f"Analyte {n}-11" in page for n, page in enumerate(pages))


def test_text_drawn_through_a_form_is_read() -> None:
    """Rows inside a form XObject (skipped by layout mode) are read; the page's own line too."""
    pdf = form_pdf([ROW, "Sodium  140  mmol/L  135 - 145"], header="City Lab report")
    assert _layout(pdf, 0).strip() == "City Lab report"  # layout loses the rows
    text = pdf_text(pdf, DEFAULTS).pages[0]
    assert "City Lab report" in text and "Hemoglobin" in text and "Sodium" in text


def test_plain_tables_keep_layout_columns() -> None:
    """An ordinary table page keeps layout mode's column spacing (no fallback)."""
    pdf = make_pdf([["Glucose  105  mg/dL  70 - 99"]])
    assert pdf_text(pdf, DEFAULTS).pages == ["Glucose  105  mg/dL  70 - 99"]


@pytest.mark.parametrize(
    ("layout", "plain", "chosen"),
    [
        ("", "Sodium 140", "plain"),
        ("  \n ", "Sodium 140", "plain"),
        ("Header", "Header Sodium 140 mmol/L Potassium 4.1 mmol/L", "plain"),
        ("Sodium  140  mmol/L", "Sodium 140 mmol/L", "layout"),
        (ROWS, ROWS.replace("  ", " ") + " CONFIDENTIAL", "layout"),
        ("", "", "layout"),
    ],
)
def test_choose_text(layout: str, plain: str, chosen: str) -> None:
    """Layout text wins unless it has much less visible text than plain text."""
    assert choose_text(layout, plain) == (plain if chosen == "plain" else layout)


# -- scans inside a text PDF ---------------------------------------------------------
@pytest.mark.anyio
async def test_fax_cover_then_scans_lists_the_textless_pages() -> None:
    """A text cover page followed by scanned pages is routed, the scans listed 1-based."""
    ctx = _ctx(fax_pdf(scanned_pages=2))
    out = await route(ctx, RouterInput(document="doc"))
    assert (out.page_count, out.textless_pages) == (3, [2, 3])
    assert ctx.stored_pages[-1][0].startswith("FAX COVER") and ctx.stored_pages[-1][1:] == ["", ""]


def test_a_blank_page_is_not_a_scan() -> None:
    """A page that draws nothing is blank, not a scan needing review."""
    pdf = FPDF()
    pdf.set_font("Helvetica", size=10)
    pdf.add_page()
    pdf.text(20, 20, "Ferritin  80  ng/mL  15 - 150")
    pdf.add_page()
    assert pdf_text(bytes(pdf.output()), DEFAULTS).textless == []


def test_only_scans_still_needs_ocr() -> None:
    """When no page has text the PDF is refused as needing OCR, as before."""
    with pytest.raises(InvalidInputError, match="needs OCR first"):
        pdf_text(fax_pdf(scanned_pages=2, cover=False), DEFAULTS)


# -- the content budget: decompression bombs ------------------------------------------
@pytest.mark.anyio
async def test_pages_sharing_one_big_stream_are_refused_before_extraction() -> None:
    """A ~17 KB PDF whose pages share one deflated 4.6 MB stream is refused at once, naming
    page 1 and the limit (extracting it pinned a core for minutes)."""
    pdf = shared_stream_pdf(pages=3, stream_bytes=4_600_000)
    assert len(pdf) < 20_000
    started = time.monotonic()
    with pytest.raises(PayloadTooLargeError) as caught:
        await route(_ctx(pdf), RouterInput(document="doc"))
    assert time.monotonic() - started < 5  # the start of an extraction process included
    assert caught.value.what == "decompressed content of page 1 in bytes"
    assert caught.value.limit == StepConfig().max_page_content_bytes
    assert 4_500_000 < caught.value.value <= 4_600_000 and not caught.value.more_than


def test_many_pages_of_one_stream_are_refused_on_the_sum() -> None:
    """200 pages sharing one 1 MB stream stay under the page limit; the sum refuses them."""
    reader = _reader(shared_stream_pdf(pages=200, stream_bytes=1_000_000))
    with pytest.raises(PayloadTooLargeError) as caught:
        price_pages(reader, per_page=2_000_000, total=32_000_000)
    assert caught.value.what == "decompressed content of pages 1-33 in bytes"


def test_forms_are_priced_on_every_page_that_draws_them() -> None:
    """A page's price includes the forms it draws; images are noted, not priced."""
    costs = price_pages(_reader(form_pdf([ROW] * 40)), per_page=10**6, total=10**7)
    assert costs[0].has_forms and costs[0].content_bytes > 40 * len(ROW)
    fax = price_pages(_reader(fax_pdf(1)), per_page=10**6, total=10**7)
    assert [c.has_images for c in fax] == [False, True]


def test_inflation_is_counted_in_bounded_memory() -> None:
    """Counting a 200 MB deflate bomb stops past the cap without holding its output."""
    bomb = zlib.compress(b"\0" * 200_000_000, 9)
    tracemalloc.start()
    try:
        size = inflated_size(bomb, cap=1_000_000)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert 1_000_000 < size <= 1_000_000 + 64 * 1024
    assert peak < 1_000_000
    assert inflated_size(zlib.compress(b"x" * 5000), cap=10**6) == 5000


def test_a_stream_past_the_ceiling_is_reported_as_more_than() -> None:
    """A stream over 16x the page limit is not counted to its end: the error says "more than"."""
    reader = _reader(shared_stream_pdf(pages=1, stream_bytes=3_000_000))
    with pytest.raises(PayloadTooLargeError, match="is more than 16000") as caught:
        price_pages(reader, per_page=1000, total=10**9)
    assert caught.value.more_than


def _layout(pdf: bytes, index: int) -> str:
    return str(_reader(pdf).pages[index].extract_text(extraction_mode="layout"))


def _reader(pdf: bytes) -> PdfReader:
    return PdfReader(io.BytesIO(pdf))
