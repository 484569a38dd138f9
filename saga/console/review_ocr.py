"""Where a value's line is on a page without a text layer (a scanned PDF page, or a
picture document: PNG, JPEG, TIFF): the page is read again by the OCR engine the
parser uses (Tesseract, prepared as the parser prepares it) and the line is looked
for among its lines of words, without regard to spacing, as on a text page. Boxes
come back in points (left, bottom, right, top), like PDFium's; a picture's points are
its pixels at its own resolution. A page the engine had to turn, or found tilted,
gets no box: its boxes would not sit on the picture shown."""

from __future__ import annotations

from typing import Any

from saga.console.review_source_types import Box, Where

OCR_DPI = 300
MAX_SKEW = 0.5
"""Degrees: a page straightened by more has boxes off the picture shown."""


def ocr_boxes(
    picture: Any, dpi: tuple[float, float], height_pt: float, where: Where, languages: str,
    *, despeckle: int = 3,
) -> list[Box]:  # fmt: skip
    """``picture`` at ``dpi`` (a PDF page rendered at OCR_DPI, or a picture document's
    page at its own), ``height_pt`` tall. [] when the line is not found."""
    from saga.steps.ocr_engine import read_page

    needle = "".join(where.line.split()).casefold()
    if not needle:
        return []
    read = read_page(picture, dpi, languages, despeckle=despeckle)
    if read.rotated or abs(read.skew) > MAX_SKEW:
        return []
    lines: dict[int, list[Any]] = {}
    for w in read.words:
        lines.setdefault(w.line, []).append(w)
    for words in lines.values():
        flat, owner = "", []
        for i, w in enumerate(words):
            text = "".join(w.text.split()).casefold()
            flat += text
            owner += [i] * len(text)
        at = flat.find(needle)
        if at < 0:
            continue
        found = [("line", _union(words[owner[at] : owner[at + len(needle) - 1] + 1], height_pt))]
        if 0 <= where.start < where.end <= len(where.line):
            before = len("".join(where.line[: where.start].split()))
            span = len("".join(where.line[where.start : where.end].split()))
            if span:
                a, b = owner[at + before], owner[at + before + span - 1]
                found.append(("value", _union(words[a : b + 1], height_pt)))
        return found
    return []


def _union(words: list[Any], height_pt: float) -> tuple[float, ...]:
    k = 72 / OCR_DPI
    left = min(w.left for w in words) * k
    right = max(w.left + w.width for w in words) * k
    top = min(w.top for w in words) * k
    bottom = max(w.top + w.height for w in words) * k
    return (left, height_pt - bottom, right, height_pt - top)
