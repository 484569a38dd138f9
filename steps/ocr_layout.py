"""OCR words back into page text the way a text PDF's layout extraction gives it.

The parser splits columns on runs of two spaces and reads one table row per line
(``steps/pages.py``). So the words of one Tesseract line are joined left to
right with one space inside a cell and two where the gap is wider than a couple
of characters (a column break), and lines are ordered top to bottom. The text
is already what ``pages.tidy`` would make of it.

Beside the text goes a confidence map of the same shape: one character per
character of the text, ``0``-``9`` for the confidence decile of the word it
belongs to (``9``: 90-100) and a space for a space. Tesseract (through
pytesseract) gives confidence per word, so every character of a word has its
word's confidence. Nothing in a word is changed: an ``O`` read inside a number
stays an ``O`` (``steps/ocr_gate.py`` decides what that means).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from statistics import median

import msgspec

from saga.steps.ocr_engine import Word

COLUMN_GAP = 2.0
"""A gap wider than this many median character widths is a column break."""


class OcrText(msgspec.Struct, frozen=True, kw_only=True):
    text: str
    confidence: str
    """Same length as ``text``: a decile digit per character, a space for a space."""


def page_text(words: Sequence[Word]) -> OcrText:
    """The page's lines (top to bottom), cells two spaces apart, with the confidence map."""
    lines: dict[int, list[Word]] = defaultdict(list)
    for word in words:
        lines[word.line].append(word)
    char = _char_width(words)
    ordered = sorted(lines.values(), key=lambda ws: median(w.top + w.height / 2 for w in ws))
    texts, maps = [], []
    for line in ordered:
        text, conf = _line(sorted(line, key=lambda w: w.left), char)
        if text:
            texts.append(text)
            maps.append(conf)
    return OcrText(text="\n".join(texts), confidence="\n".join(maps))


def _line(words: Sequence[Word], char: float) -> tuple[str, str]:
    text: list[str] = []
    conf: list[str] = []
    right = None
    for word in words:
        if right is not None:
            gap = " " if word.left - right <= COLUMN_GAP * char else "  "
            text.append(gap)
            conf.append(" " * len(gap))
        piece = " ".join(word.text.split())
        text.append(piece)
        conf.append("".join(" " if ch == " " else decile(word.confidence) for ch in piece))
        right = word.left + word.width
    return "".join(text), "".join(conf)


def decile(confidence: int) -> str:
    return str(min(max(confidence, 0), 99) // 10)


def _char_width(words: Sequence[Word]) -> float:
    widths = [w.width / len(w.text) for w in words if len(w.text) >= 2]
    return median(widths) if widths else 10.0


def span_confidence(confidence_line: str, start: int, end: int) -> int | None:
    """The lowest decile under ``[start:end)`` as a percentage floor (``7`` -> 70)."""
    digits = [int(ch) for ch in confidence_line[start:end] if ch.isdigit()]
    return min(digits) * 10 if digits else None
