"""Read pictures of pages: scanned PDF pages, and TIFF, PNG and JPEG documents.

Runs inside the extraction process (``pdf_process``), so the step's timeout,
the process's memory cap (``RLIMIT_AS``, inherited by each ``tesseract``) and
the page limit bound it as they bound text extraction. Pages are read in
parallel, ``OcrLimits.concurrency`` at once: each reading is a ``tesseract``
child, so threads here only wait on them.

A page is rendered at ``OCR_DPI`` from a PDF (pypdfium2, which draws whatever
the page holds: one scan image, several strips, a rotated image), or taken
as it is from an image file, with its own resolution so a 200x100 dpi fax
comes out at its true height. What it reads is returned as page text (the
layout the parser already reads, ``ocr_layout``) with a confidence map, page by
page. A page where OCR finds no confident word is left without text (blank,
or a photo of no document): the router reports it.

Errors name no file and quote no text.
"""

from __future__ import annotations

import io
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, NamedTuple

import msgspec
from PIL import Image, UnidentifiedImageError

from saga.steps.errors import InvalidInputError, OcrUnavailableError, PayloadTooLargeError
from saga.steps.models import OcrPage
from saga.steps.ocr_engine import (
    OCR_DPI,
    available,
    despeckle_window,
    read_page,
)
from saga.steps.ocr_layout import page_text

IMAGE_TYPES = {
    "image/tiff": "TIFF",
    "image/png": "PNG",
    "image/jpeg": "JPEG",
}
_MAGIC = (
    (b"II*\x00", "image/tiff"),
    (b"MM\x00*", "image/tiff"),
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"\xff\xd8\xff", "image/jpeg"),
)
MIN_WORDS = 3
"""A page with fewer words read at ``MIN_WORD_CONFIDENCE`` has no text (blank, a photo)."""
MIN_WORD_CONFIDENCE = 60
MAX_PIXELS = 60_000_000
"""An image page larger than this (A4 at ~1000 dpi) is refused before it is decoded."""


class OcrLimits(msgspec.Struct, frozen=True, kw_only=True):
    enabled: bool = True
    languages: str = "eng+deu+fra"
    concurrency: int = 2


class OcrResult(msgspec.Struct, frozen=True, kw_only=True):
    texts: list[str]
    pages: list[OcrPage]
    """The pages that gave text (a page without is "" in ``texts`` and absent here)."""


def image_media_type(content: bytes, declared: str) -> str:
    """``image/tiff``, ``image/png`` or ``image/jpeg`` by magic bytes or by what the source said."""
    for magic, media_type in _MAGIC:
        if content.startswith(magic):
            return media_type
    return declared if declared in IMAGE_TYPES else ""


def image_pages(content: bytes, *, max_pages: int) -> list[Picture]:
    """The frames of a TIFF (or the one picture of a PNG/JPEG), each with its resolution."""
    Image.MAX_IMAGE_PIXELS = MAX_PIXELS  # a decompression bomb raises, not allocates
    try:
        image = Image.open(io.BytesIO(content))
        count = getattr(image, "n_frames", 1)
        if count > max_pages:
            raise PayloadTooLargeError("page count", count, max_pages)
        frames = []
        for index in range(count):
            image.seek(index)
            dpi = image.info.get("dpi") or (200.0, 200.0)
            frame, x_dpi, y_dpi = image.copy(), float(dpi[0]), float(dpi[1])
            frames.append(Picture(frame, (x_dpi, y_dpi), frame.mode == "1", min(x_dpi, y_dpi)))
        return frames
    except (UnidentifiedImageError, OSError, Image.DecompressionBombError, SyntaxError) as exc:
        raise InvalidInputError(f"the image cannot be read ({type(exc).__name__})") from None


class Picture(NamedTuple):
    image: Image.Image
    dpi: tuple[float, float]
    bilevel: bool
    """Black and white only (a fax)."""
    source_dpi: float
    """The resolution the page was scanned at (its coarser axis), whatever it is drawn at."""


MakePicture = Callable[[], Picture]
"""Makes one page's picture when a reader is free for it."""


def ocr_pdf_pages(
    content: bytes, pages: Sequence[str], scans: Sequence[int], limits: OcrLimits
) -> tuple[list[str], list[OcrPage]]:
    """``pages`` with the scanned pages ``scans`` (1-based) read by OCR.

    A page keeps its text layer when OCR reads no more than it holds."""
    import pypdfium2 as pdfium

    document = pdfium.PdfDocument(content)
    lock = threading.Lock()  # PDFium is not thread-safe: one render at a time

    def picture(number: int) -> MakePicture:
        def make() -> Picture:
            with lock:
                page = document[number - 1]
                try:
                    bilevel, source = _source(page)
                    bitmap = page.render(scale=OCR_DPI / 72, grayscale=True)
                    image = bitmap.to_pil().convert("L")
                    return Picture(image, (OCR_DPI, OCR_DPI), bilevel, source)
                finally:
                    page.close()

        return make

    try:
        result = read_pictures([picture(n) for n in scans], scans, limits)
    finally:
        document.close()
    merged = list(pages)
    kept = []
    for number, text in zip(scans, result.texts, strict=True):
        if _visible(text) > _visible(merged[number - 1]):
            merged[number - 1] = text
    for page in result.pages:
        if merged[page.page - 1] == result.texts[scans.index(page.page)]:
            kept.append(page)
    return merged, kept


def image_text(
    content: bytes, *, max_pages: int, limits: OcrLimits
) -> tuple[list[str], list[OcrPage]]:
    """The pages of a TIFF, PNG or JPEG document, read by OCR."""
    if not limits.enabled:
        raise InvalidInputError("an image document needs OCR, and OCR is off (SAGA_OCR)")
    frames = image_pages(content, max_pages=max_pages)
    numbers = list(range(1, len(frames) + 1))
    pictures: list[MakePicture] = [lambda frame=frame: frame for frame in frames]  # type: ignore[misc]
    result = read_pictures(pictures, numbers, limits)
    if not result.pages:
        raise InvalidInputError(
            "OCR found no text in the image (a blank page, or a picture of no document?)"
        )
    return result.texts, result.pages


def _source(page: Any) -> tuple[bool, float]:
    """Whether every picture the page draws is 1-bit (a fax), and the coarsest resolution
    at which one is drawn (pixels per inch of page on its coarser axis: a 200x100 fax
    gives 100), from the PDF's image objects; (False, OCR_DPI) for a page of none."""
    import pypdfium2.raw as pdfium_c

    images = list(page.get_objects(filter=[pdfium_c.FPDF_PAGEOBJ_IMAGE], max_depth=2))
    if not images:
        return False, float(OCR_DPI)
    coarsest = float(OCR_DPI)
    for image in images:
        meta = image.get_metadata()
        left, bottom, right, top = image.get_bounds()
        if right - left > 1 and top - bottom > 1:
            x_dpi = meta.width / (right - left) * 72
            y_dpi = meta.height / (top - bottom) * 72
            coarsest = min(coarsest, x_dpi, y_dpi)
    return all(image.get_metadata().bits_per_pixel == 1 for image in images), coarsest


def _visible(text: str) -> int:
    return sum(1 for ch in text if not ch.isspace())


def read_pictures(
    pictures: Sequence[MakePicture],
    numbers: Sequence[int],
    limits: OcrLimits,
) -> OcrResult:
    """OCR each picture (made lazily, so at most ``concurrency`` are in memory at once)."""
    problem = available(limits.languages)
    if problem:
        raise OcrUnavailableError(f"OCR is not available on this worker: {problem}")
    started = _cpu()
    with ThreadPoolExecutor(max_workers=max(1, limits.concurrency)) as pool:
        tasks = zip(numbers, pictures, strict=True)
        done = list(pool.map(lambda task: _read_one(task[0], task[1], limits), tasks))
    # pages run side by side, so their children's CPU cannot be told apart: share it out
    per_page = round((_cpu() - started) / max(len(done), 1), 3)
    texts = [text for _, text in done]
    pages = [msgspec.structs.replace(page, cpu_s=per_page) for page, text in done if text]
    return OcrResult(texts=texts, pages=pages)


def _read_one(
    number: int,
    make: MakePicture,
    limits: OcrLimits,
) -> tuple[OcrPage, str]:
    picture = make()
    words = read_page(
        picture.image,
        picture.dpi,
        limits.languages,
        despeckle=despeckle_window(picture.source_dpi, bilevel=picture.bilevel),
        bilevel=picture.bilevel,
    )
    del picture
    confident = [w for w in words.words if w.confidence >= MIN_WORD_CONFIDENCE]
    if len(confident) < MIN_WORDS:
        return OcrPage(page=number, confidence="", words=len(words.words)), ""
    laid = page_text(words.words)
    mean = sum(w.confidence for w in words.words) / len(words.words)
    page = OcrPage(
        page=number,
        confidence=laid.confidence,
        mean_confidence=round(mean),
        words=len(words.words),
        rotated=words.rotated,
    )
    return page, laid.text


def _cpu() -> float:
    """CPU seconds of this process and its finished children (the tesseract runs)."""
    import resource

    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime
