"""OCR words back into page text the way a text PDF's layout extraction gives it.

The parser splits columns on runs of two spaces and reads one table row per line
(``steps/pages.py``). So the words of one Tesseract line are joined left to
right with one space inside a cell and two where the gap is wider than a couple
of characters (a column break), and lines are ordered top to bottom. The text
is already what ``pages.tidy`` would make of it.

Beside the text goes a confidence map of the same shape: one character per
character of the text, ``0``-``9`` for the confidence decile of the word it
belongs to (``9``: 90-100), ``!`` for a number a second reading disputes
(``ocr_reread``), and a space for a space. Tesseract (through
pytesseract) gives confidence per word, so every character of a word has its
word's confidence. Nothing in a number is changed: an ``O`` read inside a number
stays an ``O`` (``steps/ocr_gate.py`` decides what that means); what is dropped is
a ``.`` or ``,`` read after the last letter of a cell (``mmol/L.``) and quote marks
at a word's ends (a speck read as a quote: ``\u2018103``), never a digit, a decimal
separator or a comparator.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from itertools import pairwise
from statistics import median

import msgspec

from saga.steps.ocr_engine import Word
from saga.steps.ocr_reread import Check

COLUMN_GAP = 1.2
"""A gap wider than this many median character widths is a column break. A space
between words is about half a character; a table's columns can sit little more
than one character apart (``12.9  09/14/2023``, a header's ``Flag  Previous``), and
at 2.0 they were joined into one cell, which lost every row with a previous result."""


DISPUTED = "!"
"""The confidence map's mark for a number two readings disagree on (``ocr_reread``)."""


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
    gaps = [
        " " if later.left - (word.left + word.width) <= COLUMN_GAP * char else "  "
        for word, later in pairwise(words)
    ] + ["  "]  # the line's end closes its last cell
    text: list[str] = []
    conf: list[str] = []
    for index, (word, gap) in enumerate(zip(words, gaps, strict=True)):
        if index:
            previous = gaps[index - 1]
            text.append(previous)
            conf.append(" " * len(previous))
        piece = _unquoted(" ".join(word.text.split()))
        if gap == "  ":  # a cell's last word: ``AG/AB, 4TH`` keeps its comma
            piece = _unit_end(piece)
        text.append(piece)
        mark = DISPUTED if word.check == Check.DISPUTED else decile(word.confidence)
        conf.append("".join(" " if ch == " " else mark for ch in piece))
    return "".join(text), "".join(conf)


QUOTES = "\u2018\u2019\u201a\u201c\u201d\u201e'`\""
"""Quote marks: at the edge of a word of a lab report they are specks read as marks
(``\u2018103``, ``\u201ammol/l``); no value, unit or name starts or ends with one."""


def _unquoted(text: str) -> str:
    """The word without quote marks at its ends, if anything else is left of it."""
    stripped = text.strip(QUOTES)
    return stripped if any(ch.isalnum() for ch in stripped) else text


def _unit_end(text: str) -> str:
    """A cell's last word without the speck read as a ``.`` or ``,`` after its last
    letter (``mmol/L.``, ``mg/dl,``): at a cell's end that is dirt on the paper, and it
    hides a unit from the parser. Only after a letter: after a digit (``4.``) it may be
    the value's own separator, and nothing next to a digit is touched."""
    if len(text) > 2 and text[-1] in ".," and text[-2].isalpha():
        return text[:-1]
    return text


def decile(confidence: int) -> str:
    return str(min(max(confidence, 0), 99) // 10)


def _char_width(words: Sequence[Word]) -> float:
    widths = [w.width / len(w.text) for w in words if len(w.text) >= 2]
    return median(widths) if widths else 10.0


def span_confidence(confidence_line: str, start: int, end: int) -> int | None:
    """The lowest decile under ``[start:end)`` as a percentage floor (``7`` -> 70)."""
    digits = [int(ch) for ch in confidence_line[start:end] if ch.isdigit()]
    return min(digits) * 10 if digits else None


def span_disputed(confidence_line: str, start: int, end: int) -> bool:
    """Whether a second reading disputes any character under ``[start:end)``."""
    return DISPUTED in confidence_line[start:end]
