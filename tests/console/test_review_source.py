"""The source page of a review, drawn without a server: a PDF page with the line found
whatever its spacing, a scanned page and a picture document (PNG, a TIFF's frames)
with the line found by OCR or said not to be, a damaged one as None, and the cache's
bound."""

from __future__ import annotations

import io
import shutil

import pytest
from PIL import Image

from saga.console.review_source import Drawn, PageCache, Where, draw, line_boxes
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
    assert yellow(lit.png) > 300 and yellow(plain.png) == 0
    assert lit.located and plain.located  # nothing asked for is nothing missing
    assert draw(PDF, "application/pdf", 2, where) is None
    missing = draw(PDF, "application/pdf", 1, Where(Provenance(page=1, line="Potassium 4.1")))
    assert missing is not None and not missing.located and yellow(missing.png) == 0


def test_a_picture_is_shown_as_it_is_and_damage_is_none() -> None:
    """A PNG document comes back as a PNG of the same picture (told by its bytes, not
    its declared type); a truncated PDF and bytes of no known kind give None (the page
    then shows the text)."""
    buf = io.BytesIO()
    Image.new("RGB", (300, 200), (10, 120, 200)).save(buf, format="PNG")
    png = draw(buf.getvalue(), "application/octet-stream", 1, Where(None))
    assert png is not None and png.located
    assert Image.open(io.BytesIO(png.png)).size == (300, 200)
    assert draw(buf.getvalue(), "image/png", 2, Where(None)) is None
    assert draw(PDF[: len(PDF) // 3], "application/pdf", 1, Where(None)) is None
    assert draw(b"hello", "text/plain", 1, Where(None)) is None


def test_the_cache_keeps_the_most_recent_pages() -> None:
    """Least recently used out first; a miss says so (None is a cached answer too)."""
    cache = PageCache(entries=2)
    one, three = Drawn(b"1", True), Drawn(b"3", False)
    cache.put("a", one)
    cache.put("b", None)
    assert cache.get("a") == (True, one)  # a is now the most recent
    cache.put("c", three)
    assert cache.get("b") == (False, None)
    assert cache.get("a") == (True, one) and cache.get("c") == (True, three)


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
    needs_tesseract()
    scan = _scanned(PDF)
    where = Where(Provenance(page=1, line="Sodium 1450 mmol/L 135 - 145", start=7, end=11))
    lit = draw(scan, "application/pdf", 1, where, "eng")
    unmarked = draw(scan, "application/pdf", 1, where, "")
    assert lit is not None and unmarked is not None
    assert yellow(lit.png) > 300 and yellow(unmarked.png) == 0
    assert lit.located and not unmarked.located


def needs_tesseract() -> None:
    if shutil.which("tesseract") is None:
        pytest.skip("no tesseract: apt-get install tesseract-ocr")


SODIUM = Where(Provenance(page=1, line="Sodium 1450 mmol/L 135 - 145", start=7, end=11))
LOW = make_pdf([["Lab report", *[""] * 28, SODIUM.line, "Glucose 95 mg/dL 70 - 99"]])
"""The value's line three quarters down the page: a misscaled box misses it by far."""
OTHER = make_pdf([["Discharge letter", "The patient went home on Tuesday."]])


def _photo(pdf: bytes, dpi: int) -> Image.Image:
    """The PDF's first page as a scanner's picture at ``dpi`` (grey, no text layer)."""
    import pypdfium2 as pdfium

    picture: Image.Image = pdfium.PdfDocument(pdf)[0].render(scale=dpi / 72).to_pil()
    return picture.convert("L")


def _where_on_pdf(where: Where) -> tuple[float, float]:
    """The middle of the line on LOW's page, as shares of its width and height (PDFium)."""
    import pypdfium2 as pdfium

    page = pdfium.PdfDocument(LOW)[0]
    (left, bottom, right, top) = next(b for k, b in line_boxes(page.get_textpage(), where))
    return (left + right) / 2 / page.get_width(), 1 - (top + bottom) / 2 / page.get_height()


def _yellow_middle(png: bytes) -> tuple[float, float]:
    """The middle of the highlight, as shares of the picture's width and height."""
    image = Image.open(io.BytesIO(png)).convert("RGB")
    w, px = image.width, image.tobytes()
    hits = [(i // 3 % w, i // 3 // w) for i in range(0, len(px), 3)
            if px[i] > 240 and 200 < px[i + 1] < 245 and px[i + 2] < 190]  # fmt: skip
    xs, ys = [x for x, _ in hits], [y for _, y in hits]
    return (min(xs) + max(xs)) / 2 / image.width, (min(ys) + max(ys)) / 2 / image.height


def test_on_a_png_document_the_line_is_found_by_ocr_where_it_is() -> None:
    """A PNG scan at 200 dpi (shrunk to fit when shown): the highlight sits on the line,
    where PDFium puts it on the PDF the scan was made of; a line not in the picture,
    or OCR off, leaves it unmarked and says so."""
    needs_tesseract()
    buf = io.BytesIO()
    _photo(LOW, 200).save(buf, format="PNG", dpi=(200, 200))
    lit = draw(buf.getvalue(), "image/png", 1, SODIUM, "eng")
    assert lit is not None and lit.located and yellow(lit.png) > 300
    shown = Image.open(io.BytesIO(lit.png)).size
    assert shown[1] == 1800  # an A4 page at 200 dpi is 2339 pixels tall: shrunk to fit
    (x, y), (want_x, want_y) = _yellow_middle(lit.png), _where_on_pdf(SODIUM)
    assert abs(x - want_x) < 0.01 and abs(y - want_y) < 0.004, ((x, y), (want_x, want_y))
    missing = Where(Provenance(page=1, line="Potassium 4.1 mmol/L", start=10, end=13))
    for unmarked in (draw(buf.getvalue(), "image/png", 1, missing, "eng"),
                     draw(buf.getvalue(), "image/png", 1, SODIUM, "")):  # fmt: skip
        assert unmarked is not None and not unmarked.located and yellow(unmarked.png) == 0


def test_on_a_multi_page_tiff_the_line_is_found_on_its_own_frame() -> None:
    """A two-page TIFF at 150 dpi: page 2 holds the line and gets the highlight, where it
    is; page 1 (another document) does not have it and says so; page 3 is none."""
    needs_tesseract()
    first, second = _photo(OTHER, 150), _photo(LOW, 150)
    buf = io.BytesIO()
    first.save(buf, format="TIFF", save_all=True, append_images=[second], dpi=(150, 150),
               compression="tiff_deflate")  # fmt: skip
    tiff = buf.getvalue()
    lit = draw(tiff, "image/tiff", 2, SODIUM, "eng")
    assert lit is not None and lit.located and yellow(lit.png) > 300
    assert Image.open(io.BytesIO(lit.png)).size == second.size  # fits: shown as it is
    (x, y), (want_x, want_y) = _yellow_middle(lit.png), _where_on_pdf(SODIUM)
    assert abs(x - want_x) < 0.01 and abs(y - want_y) < 0.004, ((x, y), (want_x, want_y))
    elsewhere = draw(tiff, "image/tiff", 1, SODIUM, "eng")
    assert elsewhere is not None and not elsewhere.located and yellow(elsewhere.png) == 0
    assert draw(tiff, "image/tiff", 3, SODIUM, "eng") is None
