"""Where a value's line is on a page without a text layer (a scan the parser read by
OCR): the page is read again by the OCR engine the parser uses (Tesseract) and the
line is looked for among its lines of words, without regard to spacing, as on a text
page. Boxes come back in PDF points (left, bottom, right, top), like PDFium's. A page
the engine had to turn, or found tilted, gets no box: its boxes would not sit on the
picture shown."""

from __future__ import annotations

from typing import Any

from saga.console.review_source_types import Box, Where

OCR_DPI = 300
MAX_SKEW = 0.5
"""Degrees: a page straightened by more has boxes off the picture shown."""


def ocr_boxes(picture: Any, height_pt: float, where: Where, languages: str) -> list[Box]:
    """``picture``: the page rendered at OCR_DPI. [] when the line is not found."""
    from saga.steps.ocr_engine import read_page

    needle = "".join(where.line.split()).casefold()
    if not needle:
        return []
    read = read_page(picture, (OCR_DPI, OCR_DPI), languages)
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
