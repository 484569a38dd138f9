"""A second reading of the unit beside a number, when the page reading is no unit.

Tesseract's page reading loses most results of a scan not on their digits but on
their unit: the thin ``/`` of ``U/L`` or ``mg/dL`` vanishes (``UL``, ``mg/d``), a
caret becomes a degree sign (``10°9/L``), ``µ`` becomes ``H``. The parser then
cannot read the row, or rejects it for a unit the analyte is not reported in.

Here a word that stands just after a number and is no unit the analyte table knows
(``analytes.KNOWN_UNITS``) is read again from its box, as one line with only the
characters of a unit allowed (no language model to make a word of it), at four
scales (``SCALES``). It is replaced only when

* two of those readings give the same known unit, and no other unit has two;
* and it looks like what the page reading saw (``SIMILAR`` share of characters in
  common), so a stray word is never turned into a unit.

In the sans-serif type of most reports a capital ``I`` and a small ``l`` are the same
glyph, so OCR reads ``uIU/mL`` as ``ulU/mL`` whatever the scan. A reading that is no
unit but becomes exactly one unit when its ``I`` and ``l`` are swapped
(``glyph_unit``) is that unit: the same pixels, not a guess. Only those two letters
are ever swapped, never a letter for a digit (``1``, ``0``, ``5`` stay as read).

A word that is already a unit is never read again, and no digit of a value is
touched: only the unit word changes, and its confidence becomes the lowest of the
readings that agreed. All the crops of a page go to one ``tesseract`` run.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from difflib import SequenceMatcher
from typing import TYPE_CHECKING

from msgspec.structs import replace
from PIL import Image

from saga.steps.analytes import KNOWN_UNITS, unit_key
from saga.steps.ocr_reread import crop, numeric, read_crops

if TYPE_CHECKING:  # ocr_engine imports this module
    from saga.steps.ocr_engine import Word

UNIT_CHARS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789/%^*.\u00b5\u00b3-"
"""What a unit is written with (``mL/min/1.73m2``, ``x10^9/L``, ``µmol/L``, ``/mm³``)."""
SIMILAR = 0.5
"""Least share of characters (``difflib`` ratio, case folded) the page reading and the
second reading have in common: ``UL``/``U/L`` 0.8, ``mg/d``/``mg/dL`` 0.89."""
SCALES = (1, 2, 3, 4)
"""The crop is read at these enlargements, all in one ``tesseract`` run (on the scanned
corpus 1-2 read 86.7% of scan values, 1-4 87.8%, fax 62.8% and 65.4%)."""
AGREE = 2
"""Readings that must give the same known unit."""
MAX_LENGTH = 16
MAX_WORDS = 200
"""A page with more unit words than this is not re-read past them (a lab page has ~30)."""
EDGES = "\u2018\u2019\u201a\u201c\u201d\u201e'`\".,:;"


def known(text: str) -> bool:
    return bool(text) and unit_key(text) in KNOWN_UNITS


SAME_GLYPH = str.maketrans("Il", "lI")
MAX_SWAPS = 4


def glyph_unit(text: str) -> str:
    """``text`` if it is a known unit; else the one known unit it becomes with some of
    its ``I`` and ``l`` swapped (they are one glyph in sans-serif type); else ""."""
    if known(text):
        return text
    places = [i for i, ch in enumerate(text) if ch in "Il"]
    if not places or len(places) > MAX_SWAPS:
        return ""
    found: dict[str, str] = {}
    for mask in range(1, 1 << len(places)):
        chars = list(text)
        for bit, place in enumerate(places):
            if mask >> bit & 1:
                chars[place] = chars[place].translate(SAME_GLYPH)
        variant = "".join(chars)
        if known(variant):
            found.setdefault(unit_key(variant), variant)
    return next(iter(found.values())) if len(found) == 1 else ""


def candidates(words: Sequence[Word]) -> list[int]:
    """Indexes of the words that stand one or two words after a number on their line,
    look like a unit (a ``/`` or two letters) and are not one the table knows."""
    lines: dict[int, list[int]] = defaultdict(list)
    for index, word in enumerate(words):
        lines[word.line].append(index)
    out = []
    for members in lines.values():
        ordered = sorted(members, key=lambda i: words[i].left)
        for place, index in enumerate(ordered):
            text = words[index].text.strip(EDGES)
            if not text or len(text) > MAX_LENGTH or known(text):
                continue
            if "/" not in text and sum(ch.isalpha() for ch in text) < 2:
                continue
            before = ordered[max(place - 2, 0) : place]
            if any(numeric(words[i].text) for i in before):
                out.append(index)
    return sorted(out)[:MAX_WORDS]


def reread_units(picture: Image.Image, words: Sequence[Word]) -> list[Word]:
    """``words`` with each misread unit after a number replaced by the known unit it is
    in the same glyphs, or that two second readings of its box agree on."""
    out = list(words)
    targets = []
    for index in candidates(words):
        same = glyph_unit(words[index].text.strip(EDGES))
        if same:
            out[index] = replace(words[index], text=same)
        else:
            targets.append(index)
    if not targets:
        return out
    crops = [crop(picture, words[i]) for i in targets]
    pieces = [
        c if scale == 1 else c.resize((c.width * scale, c.height * scale), Image.Resampling.BICUBIC)
        for scale in SCALES
        for c in crops
    ]
    readings = read_crops(pieces, allowed=UNIT_CHARS)
    for n, index in enumerate(targets):
        mine = [readings[n + k * len(targets)] for k in range(len(SCALES))]
        chosen, confidence = agreed_unit(words[index].text, mine)
        if chosen:
            out[index] = replace(words[index], text=chosen, confidence=confidence)
    return out


def agreed_unit(page_reading: str, readings: Sequence[tuple[str, int]]) -> tuple[str, int]:
    """The known unit at least two second readings agree on, if it looks like the page's
    reading, with the lowest confidence of those readings; else ("", 0)."""
    votes: dict[str, list[int]] = defaultdict(list)
    for text, confidence in readings:
        unit = glyph_unit(text)
        if unit:
            votes[unit].append(confidence)
    agreed = [(unit, min(c)) for unit, c in votes.items() if len(c) >= AGREE]
    if len(agreed) != 1:
        return "", 0
    unit, confidence = agreed[0]
    seen = page_reading.strip(EDGES).casefold()
    if SequenceMatcher(None, seen, unit.casefold()).ratio() < SIMILAR:
        return "", 0
    return unit, confidence
