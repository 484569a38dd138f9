"""Turn a fetched document into one text per page.

PDFs go through pypdf's layout extraction, which keeps table columns apart by
runs of spaces (the rules extractor splits columns on them); runs are then
squeezed to two spaces so the pages blob stays small. Plain text is one page per
form feed, or one page. These functions are synchronous; ``pdf_text`` is
CPU-bound and runs in an extraction process (``pdf_process``) that a step
timeout kills.

Errors never quote page text: only counts, types and media types.
"""

from __future__ import annotations

import contextlib
import io
import logging
import re
from collections.abc import Iterator, Sequence
from typing import Any

import msgspec

from saga.steps.config import StepConfig
from saga.steps.context import Document
from saga.steps.errors import InvalidInputError, PayloadTooLargeError, StepError
from saga.steps.models import OcrPage
from saga.steps.ocr import OcrLimits
from saga.steps.page_columns import split_columns
from saga.steps.pdf_budget import PageCost, price_pages

PDF_MAGIC = b"%PDF-"
PDF_MEDIA_TYPE = "application/pdf"
_MARKUP = frozenset({"text/html", "application/xhtml+xml", "text/xml", "application/xml"})
_SPACE_RUN = re.compile(r" {2,}")


def is_pdf(document: Document) -> bool:
    """True when the bytes carry the PDF magic or the source said it is a PDF."""
    return document.content.startswith(PDF_MAGIC) or document.media_type == PDF_MEDIA_TYPE


def split_pages(document: Document, *, max_pages: int) -> list[str]:
    """Page texts of ``document``, in this process (tests, tools; the router isolates PDFs)."""
    if is_pdf(document):
        return pdf_pages(document.content, max_pages=max_pages)
    return text_pages(document, max_pages=max_pages)


def pdf_pages(content: bytes, *, max_pages: int) -> list[str]:
    """A PDF's page texts in this process, under the default content limits."""
    return pdf_text(content, PdfLimits.of(StepConfig(max_pages=max_pages))).pages


class PdfLimits(msgspec.Struct, frozen=True, kw_only=True):
    """What one PDF may cost before a page of it is read."""

    max_pages: int
    max_page_content_bytes: int
    max_content_bytes: int
    ocr: OcrLimits = OcrLimits(enabled=False)

    @classmethod
    def of(cls, config: StepConfig) -> PdfLimits:
        return cls(
            max_pages=config.max_pages,
            max_page_content_bytes=config.max_page_content_bytes,
            max_content_bytes=config.max_content_bytes,
            ocr=OcrLimits(
                enabled=config.ocr,
                languages=config.ocr_languages,
                concurrency=config.ocr_concurrency,
            ),
        )


class PdfText(msgspec.Struct, frozen=True, kw_only=True):
    """A PDF's page texts ("" for a page without text) and which pages are scans."""

    pages: list[str]
    textless: list[int] = []
    """1-based pages that draw something (an image, paths) but give no text."""
    ocr: list[OcrPage] = []
    """Pages whose text OCR read, with the confidence of every character."""


DRAWN_BYTES = 256
"""A page without text is a scan when it has an image or this much drawing; less
(fpdf2's blank page holds 11 bytes of graphics state) is a blank page."""


def pdf_text(content: bytes, limits: PdfLimits) -> PdfText:
    """Page texts of a PDF; refuses unreadable, over-limit and text-free documents.

    The page count and every page's decompressed content are checked before any text
    is extracted. Runs in an extraction process (see ``pdf_process``)."""
    from pypdf import PdfReader

    try:
        reader = PdfReader(io.BytesIO(content))
        if reader.is_encrypted:
            reader.decrypt("")  # many "protected" PDFs only carry an empty user password
        count = len(reader.pages)
    except MemoryError:
        raise
    except Exception as exc:  # pypdf raises many types on damaged files
        raise _unreadable(exc) from exc
    if count == 0:
        raise InvalidInputError("the PDF has no pages")
    if count > limits.max_pages:
        raise PayloadTooLargeError("page count", count, limits.max_pages)
    costs = _priced(reader, limits)
    pages = [
        page_text(page, index=i, has_forms=cost.has_forms)
        for i, (page, cost) in enumerate(zip(reader.pages, costs, strict=True))
    ]
    scans = [
        i + 1 for i, (text, cost) in enumerate(zip(pages, costs, strict=True)) if _scan(text, cost)
    ]
    read: list[OcrPage] = []
    if scans and limits.ocr.enabled:
        from saga.steps.ocr import ocr_pdf_pages

        pages, read = ocr_pdf_pages(content, pages, scans, limits.ocr)
    if not any(pages):
        raise InvalidInputError(_no_text(limits, scans))
    done = {page.page for page in read}
    textless = [n for n in scans if n not in done and not pages[n - 1]]
    return PdfText(pages=pages, textless=textless, ocr=read)


OCR_BELOW_CHARS = 80
"""A page with an image and fewer visible characters than this is read by OCR: a fax
machine's header line or a scanner's stamp is often the only text a scanned page has."""


def _scan(text: str, cost: PageCost) -> bool:
    if not text:
        return cost.has_images or cost.content_bytes >= DRAWN_BYTES
    return cost.has_images and _visible(text) < OCR_BELOW_CHARS


def _no_text(limits: PdfLimits, scans: Sequence[int]) -> str:
    if not scans:
        return "the PDF has no extractable text"
    if limits.ocr.enabled:
        return "OCR found no text on the PDF's pages (blank pages, or a picture of no document?)"
    return "the PDF has no extractable text (a scan without a text layer?); it needs OCR first"


def _priced(reader: Any, limits: PdfLimits) -> list[PageCost]:
    try:
        return price_pages(
            reader, per_page=limits.max_page_content_bytes, total=limits.max_content_bytes
        )
    except (StepError, MemoryError):
        raise
    except Exception as exc:  # a broken page tree or stream dictionary
        raise _unreadable(exc) from exc


def _unreadable(exc: Exception) -> InvalidInputError:
    return InvalidInputError(f"the document is not a readable PDF ({type(exc).__name__})")


def page_text(page: Any, *, index: int, has_forms: bool) -> str:
    """One tidied page text: layout mode, checked against plain mode where layout loses text.

    Layout mode skips form XObjects, rotated text and fonts it cannot interpret (pypdf
    warns about the last two), and returns "" for a page drawn that way without
    raising. Only then is plain mode run too (it costs as much again) and the text
    that keeps more is used (``choose_text``)."""
    layout = ""
    with _pypdf_warnings() as warned:
        try:
            layout = page.extract_text(extraction_mode="layout") or ""
        except MemoryError:
            raise
        except Exception:
            warned.append("layout mode failed")  # it trips on some fonts
    layout = split_columns(layout)
    if layout.strip() and not warned and not has_forms:
        return tidy(layout)
    try:
        plain = page.extract_text() or ""
    except MemoryError:
        raise
    except Exception as exc:
        if layout.strip():
            return tidy(layout)
        raise InvalidInputError(
            f"page {index + 1} of the PDF cannot be read ({type(exc).__name__})"
        ) from exc
    return tidy(choose_text(layout, plain))


LAYOUT_MIN_SHARE = 0.75
"""Layout text is kept when it has at least this share of plain mode's visible
characters; below, plain mode's text (which loses column spacing) is used."""


def choose_text(layout: str, plain: str) -> str:
    """Layout text unless it has much less visible text than plain text (then plain)."""
    kept, full = _visible(layout), _visible(plain)
    return plain if kept < full * LAYOUT_MIN_SHARE else layout


def _visible(text: str) -> int:
    return sum(1 for ch in text if not ch.isspace())


@contextlib.contextmanager
def _pypdf_warnings() -> Iterator[list[str]]:
    """Collects the warnings pypdf logs meanwhile (layout mode reports dropped text so)."""
    seen: list[str] = []

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            seen.append(record.getMessage()[:80])

    handler = Collect(logging.WARNING)
    logger = logging.getLogger("pypdf")
    logger.addHandler(handler)
    try:
        yield seen
    finally:
        logger.removeHandler(handler)


def text_pages(document: Document, *, max_pages: int) -> list[str]:
    """Plain text split on form feeds; a final form feed does not open an empty page."""
    text = _decode(document)
    parts = text.replace("\r\n", "\n").replace("\r", "\n").split("\f")
    if len(parts) > 1 and not parts[-1].strip():
        parts.pop()
    if len(parts) > max_pages:
        raise PayloadTooLargeError("page count", len(parts), max_pages)
    pages = [tidy(part) for part in parts]
    if not any(pages):
        raise InvalidInputError("the document has no text")
    return pages


def _decode(document: Document) -> str:
    media_type = document.media_type
    if media_type in _MARKUP:
        # an HTML answer is usually a login or error page, not the record's document
        raise InvalidInputError(
            f"unsupported media type {media_type!r}: expected a PDF or plain text"
        )
    try:
        text = document.content.decode("utf-8-sig")
    except UnicodeDecodeError:
        if not media_type.startswith("text/"):
            raise InvalidInputError(
                f"unsupported media type {media_type[:80]!r}: expected a PDF or plain text"
            ) from None
        # text/* that is not UTF-8 is almost always Windows-1252 from a lab system
        return document.content.decode("cp1252", errors="replace")
    if "\x00" in text and not media_type.startswith("text/"):
        raise InvalidInputError(
            f"unsupported media type {media_type[:80]!r}: expected a PDF or plain text"
        )
    return text


def tidy(text: str) -> str:
    """Trim lines, squeeze space runs to two (a column break) and blank-line runs to one."""
    lines: list[str] = []
    for raw in text.split("\n"):
        # a tab is a column break; a no-break space inside a name is just a space
        line = _SPACE_RUN.sub("  ", raw.replace("\t", "  ").replace("\u00a0", " ")).strip()
        if line or (lines and lines[-1]):
            lines.append(line)
    while lines and not lines[-1]:
        lines.pop()
    return "\n".join(lines)
