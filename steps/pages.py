"""Turn a fetched document into one text per page.

PDFs go through pypdf's layout extraction, which keeps table columns apart by
runs of spaces (the rules extractor splits columns on them); runs are then
squeezed to two spaces so the pages blob stays small. Plain text is one page per
form feed, or one page. These functions are synchronous and CPU-bound: the
router runs them in a worker thread.

Errors never quote page text: only counts, types and media types.
"""

from __future__ import annotations

import io
import re
from typing import Any

from saga.steps.context import Document
from saga.steps.errors import InvalidInputError, PayloadTooLargeError

PDF_MAGIC = b"%PDF-"
PDF_MEDIA_TYPE = "application/pdf"
_MARKUP = frozenset({"text/html", "application/xhtml+xml", "text/xml", "application/xml"})
_SPACE_RUN = re.compile(r" {2,}")


def is_pdf(document: Document) -> bool:
    """True when the bytes carry the PDF magic or the source said it is a PDF."""
    return document.content.startswith(PDF_MAGIC) or document.media_type == PDF_MEDIA_TYPE


def split_pages(document: Document, *, max_pages: int) -> list[str]:
    """Page texts of ``document``; refuses unreadable, empty and over-long documents."""
    if is_pdf(document):
        return pdf_pages(document.content, max_pages=max_pages)
    return text_pages(document, max_pages=max_pages)


def pdf_pages(content: bytes, *, max_pages: int) -> list[str]:
    """One tidied text per PDF page; the page count is checked before any text is read."""
    from pypdf import PdfReader

    try:
        reader = PdfReader(io.BytesIO(content))
        if reader.is_encrypted:
            reader.decrypt("")  # many "protected" PDFs only carry an empty user password
        count = len(reader.pages)
    except Exception as exc:  # pypdf raises many types on damaged files
        raise InvalidInputError(
            f"the document is not a readable PDF ({type(exc).__name__})"
        ) from exc
    if count == 0:
        raise InvalidInputError("the PDF has no pages")
    if count > max_pages:
        raise PayloadTooLargeError("page count", count, max_pages)
    pages = [_page_text(reader, index) for index in range(count)]
    if not any(page.strip() for page in pages):
        raise InvalidInputError(
            "the PDF has no extractable text (a scan without a text layer?); it needs OCR first"
        )
    return pages


def _page_text(reader: Any, index: int) -> str:
    page = reader.pages[index]
    try:
        text = page.extract_text(extraction_mode="layout")
    except Exception:
        # layout mode trips on some fonts; plain mode loses columns but keeps the text
        try:
            text = page.extract_text()
        except Exception as exc:
            raise InvalidInputError(
                f"page {index + 1} of the PDF cannot be read ({type(exc).__name__})"
            ) from exc
    return tidy(text or "")


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
