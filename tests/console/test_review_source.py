"""The source page of a review, drawn without a server: a PDF page with the line found
whatever its spacing, a picture document as it is, a damaged one as None, and the
cache's bound."""

from __future__ import annotations

import io

from PIL import Image

from saga.console.review_source import PageCache, Where, draw, line_boxes
from saga.steps.models import Provenance
from tests.console.test_review_pages import yellow
from tests.steps.pdfgen import make_pdf

PDF = make_pdf([["Lab report", "Sodium 1450 mmol/L 135 - 145", "Glucose 95 mg/dL 70 - 99"]])


def _textpage() -> tuple[object, object, object]:
    import pypdfium2 as pdfium

    doc = pdfium.PdfDocument(PDF)
    page = doc[0]
    return doc, page, page.get_textpage()


def test_the_line_is_found_whatever_its_spacing_and_the_value_inside_it() -> None:
    """pypdf's columns ("Sodium   1450") match PDFium's single spaces; the value's span
    gets its own box inside the line's; a line not on the page gets none."""
    _, _, tp = _textpage()
    line = "Sodium   1450  mmol/L 135 - 145"
    boxes = line_boxes(tp, Where(Provenance(page=1, line=line, start=9, end=13)))
    kinds = [k for k, _ in boxes]
    assert kinds.count("line") >= 1 and kinds.count("value") == 1
    (value,) = [b for k, b in boxes if k == "value"]
    (whole,) = [b for k, b in boxes if k == "line"][:1]
    assert whole[0] < value[0] < value[2] < whole[2]  # inside the line, left to right
    assert line_boxes(tp, Where(Provenance(page=1, line="Potassium 4.1"))) == []


def test_a_pdf_page_is_highlighted_only_where_asked() -> None:
    """The line is painted when asked for; without a line, or past the last page, not."""
    where = Where(Provenance(page=1, line="Glucose 95 mg/dL 70 - 99", start=8, end=10))
    lit = draw(PDF, "application/pdf", 1, where)
    plain = draw(PDF, "application/pdf", 1, Where(None))
    assert lit is not None and plain is not None
    assert yellow(lit) > 300 and yellow(plain) == 0
    assert draw(PDF, "application/pdf", 2, where) is None


def test_a_picture_is_shown_as_it_is_and_damage_is_none() -> None:
    """A PNG document comes back as a PNG of the same picture; a truncated PDF and bytes
    of no known kind give None (the page then shows the text)."""
    buf = io.BytesIO()
    Image.new("RGB", (300, 200), (10, 120, 200)).save(buf, format="PNG")
    png = draw(buf.getvalue(), "image/png", 1, Where(None))
    assert png is not None
    assert Image.open(io.BytesIO(png)).size == (300, 200)
    assert draw(buf.getvalue(), "image/png", 2, Where(None)) is None
    assert draw(PDF[: len(PDF) // 3], "application/pdf", 1, Where(None)) is None
    assert draw(b"hello", "text/plain", 1, Where(None)) is None


def test_the_cache_keeps_the_most_recent_pages() -> None:
    """Least recently used out first; a miss says so (None is a cached answer too)."""
    cache = PageCache(entries=2)
    cache.put("a", b"1")
    cache.put("b", None)
    assert cache.get("a") == (True, b"1")  # a is now the most recent
    cache.put("c", b"3")
    assert cache.get("b") == (False, None)
    assert cache.get("a") == (True, b"1") and cache.get("c") == (True, b"3")


def _scanned(pdf: bytes) -> bytes:
    """The PDF's first page as a picture only (no text layer), as a scanner sends it."""
    import pypdfium2 as pdfium

    doc = pdfium.PdfDocument(pdf)
    picture = doc[0].render(scale=200 / 72).to_pil().convert("L")
    out = io.BytesIO()
    picture.save(out, format="PDF", resolution=200)
    return out.getvalue()


def test_on_a_scanned_page_the_line_is_found_by_ocr() -> None:
    """A page without text: with OCR on, Tesseract's words place the highlight; with OCR
    off the page is drawn unmarked."""
    import shutil

    import pytest

    if shutil.which("tesseract") is None:
        pytest.skip("no tesseract: apt-get install tesseract-ocr")
    scan = _scanned(PDF)
    where = Where(Provenance(page=1, line="Sodium 1450 mmol/L 135 - 145", start=7, end=11))
    lit = draw(scan, "application/pdf", 1, where, "eng")
    unmarked = draw(scan, "application/pdf", 1, where, "")
    assert lit is not None and unmarked is not None
    assert yellow(lit) > 300 and yellow(unmarked) == 0
