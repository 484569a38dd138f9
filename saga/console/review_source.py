"""A review's source: the page a value was read from, drawn as a PNG with the value's
line highlighted, for reviewers only.

The document is fetched again through the deployment's fetch policy (the parser
deleted the pages blob when it committed); a PDF page is drawn by pypdfium2, and the
line's boxes come from PDFium's own text of the page, matched to the line the parser
read without regard to spacing (pypdf and PDFium space columns differently). A page
without text (a scanned PDF page, or a picture document: PNG, JPEG, a TIFF's frame)
has its line found by OCR (``review_ocr``). The highlight is drawn into the picture
itself, so the page needs no inline style under the strict CSP; a line that cannot be
found leaves the picture unmarked and ``Drawn.located`` False, and the page says so.
Drawn pages are kept in a small in-process cache (never on disk: they are patient
data). ``None`` means no picture can be made: the page shows the line's text instead.
"""

from __future__ import annotations

import hashlib
import io
import threading
from collections import OrderedDict
from typing import Any

import anyio.to_thread
import structlog

from saga.console.review_source_types import Box, Drawn, Where

__all__ = ["Drawn", "PageCache", "Where", "cache_key", "draw", "line_boxes", "page_png"]

log = structlog.get_logger("saga.console")
SCALE = 1.5
"""Pixels per PDF point (108 dpi): legible beside the table, a few hundred KiB."""
CACHE_ENTRIES = 32
LINE_FILL = (255, 214, 0, 90)
VALUE_EDGE = (214, 40, 40, 255)
_PDFIUM = threading.Lock()  # PDFium is not thread-safe: one document at a time


class PageCache:
    """Drawn pages by (document, page, line, span): least recently used out first."""

    def __init__(self, entries: int = CACHE_ENTRIES) -> None:
        self.entries = entries
        self._items: OrderedDict[str, Drawn | None] = OrderedDict()

    def get(self, key: str) -> tuple[bool, Drawn | None]:
        if key not in self._items:
            return False, None
        self._items.move_to_end(key)
        return True, self._items[key]

    def put(self, key: str, png: Drawn | None) -> None:
        self._items[key] = png
        self._items.move_to_end(key)
        while len(self._items) > self.entries:
            self._items.popitem(last=False)


def cache_key(document: str, epoch: int, page: int, where: Where) -> str:
    raw = f"{document}\0{epoch}\0{page}\0{where.line}\0{where.start}\0{where.end}"
    return hashlib.sha256(raw.encode()).hexdigest()


async def page_png(settings: Any, document: str, page: int, where: Where) -> Drawn | None:
    """The page drawn with the line highlighted; None when the document cannot be read
    (gone, refused by the policy, not a PDF or picture) or has no such page."""
    from saga.adapters.documents import DocumentFetcher
    from saga.steps.errors import StepError

    if not document or page < 1:
        return None
    fetcher = DocumentFetcher(
        max_bytes=settings.step_config.max_document_bytes, policy=settings.document_policy
    )
    try:
        async with fetcher:
            doc = await fetcher.fetch(document)
    except StepError as exc:  # its message names no path (adapters.documents)
        log.info("review_source_unavailable", error=type(exc).__name__)
        return None
    languages = settings.step_config.ocr_languages if settings.step_config.ocr else ""
    return await anyio.to_thread.run_sync(draw, doc.content, doc.media_type, page, where, languages)


def draw(
    content: bytes, media_type: str, page: int, where: Where, ocr_languages: str = ""
) -> Drawn | None:
    """``ocr_languages``: on a page without text, find the line by OCR in these
    languages ("" leaves such a page unmarked)."""
    try:
        if content.startswith(b"%PDF-"):
            with _PDFIUM:
                found = _pdf_page(content, page, where, bool(ocr_languages))
            if found is None:
                return None
            image, height, boxes, scan = found
            if scan is not None:  # outside PDFium's lock: OCR takes a second or more
                from saga.console.review_ocr import OCR_DPI

                boxes = _ocr(scan, (OCR_DPI, OCR_DPI), height, where, ocr_languages, 3)
            return _marked(image, height, boxes, (SCALE, SCALE), where)
        from saga.steps.ocr import image_media_type

        if image_media_type(content, media_type):  # by magic bytes, as the router tells
            return _picture(content, page, where, ocr_languages)
    except Exception as exc:  # a damaged document: the page shows the text instead
        log.info("review_source_undrawable", error=type(exc).__name__)
    return None


def _ocr(
    picture: Any, dpi: tuple[float, float], height: float, where: Where, languages: str,
    despeckle: int,
) -> list[Box]:  # fmt: skip
    """The line's boxes by OCR; [] when OCR is off or fails here (Tesseract missing,
    a broken install): the picture is still worth showing, unmarked."""
    from saga.console.review_ocr import ocr_boxes

    if not (where.line and languages):
        return []
    try:
        return ocr_boxes(picture, dpi, height, where, languages, despeckle=despeckle)
    except Exception as exc:
        log.info("review_source_ocr_failed", error=type(exc).__name__)
        return []


def _pdf_page(
    content: bytes, page: int, where: Where, ocr: bool
) -> tuple[Any, float, list[Box], Any] | None:
    """The page's picture, its height (points), the line's boxes from its text, and
    (a page without text, OCR allowed) its picture at OCR_DPI to find them in."""
    import pypdfium2 as pdfium

    from saga.console.review_ocr import OCR_DPI

    pdf = pdfium.PdfDocument(content)
    try:
        if page > len(pdf):
            return None
        p = pdf[page - 1]
        image = p.render(scale=SCALE).to_pil().convert("RGBA")
        height = p.get_height()
        textpage = p.get_textpage()
        boxes = line_boxes(textpage, where)
        bare = not textpage.get_text_range().strip()
        textpage.close()
        scan = p.render(scale=OCR_DPI / 72).to_pil() if bare and ocr and where.line else None
        p.close()
    finally:
        pdf.close()
    return image, height, boxes, scan


def _marked(
    image: Any, height: float, boxes: list[Box], scale: tuple[float, float], where: Where
) -> Drawn:
    """``image`` (RGBA) with ``boxes`` (points on a page ``height`` tall) drawn at
    ``scale`` pixels per point across and down."""
    from PIL import Image, ImageDraw

    sx, sy = scale
    overlay = Image.new("RGBA", image.size, (0, 0, 0, 0))
    pen = ImageDraw.Draw(overlay)
    for kind, (left, bottom, right, top) in boxes:
        box = (left * sx - 3, (height - top) * sy - 3,
               right * sx + 3, (height - bottom) * sy + 3)  # fmt: skip
        if kind == "line":
            pen.rectangle(box, fill=LINE_FILL)
        else:
            pen.rectangle(box, outline=VALUE_EDGE, width=3)
    png = _png(Image.alpha_composite(image, overlay))
    return Drawn(png, located=bool(boxes) or not where.line)


def line_boxes(textpage: Any, where: Where) -> list[Box]:
    """PDFium's boxes of the line (``line``) and of the value's span in it (``value``),
    found by comparing the text without whitespace; [] when the line is not there."""
    needle = "".join(where.line.split()).casefold()
    if not needle:
        return []
    text = textpage.get_text_range()
    kept = [(i, c) for i, c in enumerate(text) if not c.isspace()]
    flat = "".join(c for _, c in kept).casefold()
    at = flat.find(needle)
    if at < 0:
        return []
    found: list[Box] = []
    first, last = kept[at][0], kept[at + len(needle) - 1][0]
    found += [("line", r) for r in _rects(textpage, first, last)]
    if 0 <= where.start < where.end <= len(where.line):
        before = len("".join(where.line[: where.start].split()))
        span = len("".join(where.line[where.start : where.end].split()))
        if span:
            a, b = kept[at + before][0], kept[at + before + span - 1][0]
            found += [("value", r) for r in _rects(textpage, a, b)]
    return found


def _rects(textpage: Any, first: int, last: int) -> list[tuple[float, ...]]:
    n = textpage.count_rects(first, last - first + 1)
    return [tuple(textpage.get_rect(i)) for i in range(min(n, 16))]


def _picture(content: bytes, page: int, where: Where, languages: str) -> Drawn | None:
    """A picture document's page (a multi-page TIFF's frames are its pages), its line
    found by OCR of the frame as the parser read it (its own resolution, 200 dpi when
    it states none, the same despeckling), the boxes scaled to the picture shown."""
    from PIL import Image, ImageOps

    from saga.steps.ocr import MAX_PIXELS
    from saga.steps.ocr_engine import despeckle_window

    Image.MAX_IMAGE_PIXELS = MAX_PIXELS  # as the parser: a decompression bomb raises
    image = Image.open(io.BytesIO(content))
    try:
        image.seek(page - 1)
    except EOFError:
        return None
    stated = image.info.get("dpi") or (200.0, 200.0)  # as steps.ocr.image_pages
    x_dpi, y_dpi = (float(d) if d and d > 20 else 200.0 for d in stated)  # as prepare()
    frame = image.copy()
    shown = ImageOps.exif_transpose(frame).convert("RGBA")  # as prepare() turns it
    width_pt, height_pt = shown.width * 72 / x_dpi, shown.height * 72 / y_dpi
    despeckle = despeckle_window(min(x_dpi, y_dpi), bilevel=frame.mode == "1")
    boxes = _ocr(frame, (x_dpi, y_dpi), height_pt, where, languages, despeckle)
    shown.thumbnail((1400, 1800))
    scale = (shown.width / width_pt, shown.height / height_pt)
    return _marked(shown, height_pt, boxes, scale, where)


def _png(image: Any) -> bytes:
    out = io.BytesIO()
    image.save(out, format="PNG", compress_level=3)  # fast: drawn on request, then cached
    return out.getvalue()
