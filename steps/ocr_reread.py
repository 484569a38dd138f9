"""A second reading of every number on an OCR page, and agreement as the confidence signal.

Tesseract's page reading (``ocr_engine.read_words``) reads a number with the page's
language model, its dictionary and its guesses at the layout; its confidence per word
is the only evidence. Here each word holding a digit is read once more on its own:
its box is cut from the prepared page (a little paper around it, a white border) and
read as one line (``--psm 7``) with only the characters of a number, a flag letter or
a ``%`` allowed. All the crops of a page go to one ``tesseract`` run (a list of
images, one page each), so the second reading costs one process, not one per number.

The two readings are compared on the characters of a number (``NUMBER_CHARS``):

* equal: the word is ``AGREED`` and takes the higher of the two confidences (two
  readings seeing the same digits is stronger evidence than either confidence);
* different, the second read at ``DISPUTE_CONFIDENCE`` or more: the word is
  ``DISPUTED``; its characters are ``!`` in the page's confidence map, and the
  parser's gate rejects a value read from them (``43`` for 4.3, ``-90`` for >90);
* the second reading unsure or empty: the word stays ``UNCHECKED`` (the first
  reading's own confidence decides, as without a second reading).

The word's text is always the first reading's: the second only confirms or disputes
it and never replaces a character, though it is often right where the first is wrong
(``A9``/7.1, ``185``/155): forced into number characters, it agrees with itself too
easily to be trusted alone. Measured on the scanned corpus, crops at the page's own
300 dpi disputed fewer good values than crops enlarged 2 or 3 times or binarised
(enlarged crops read ``3,5`` as ``3,2`` and ``1`` as ``4`` at confidences over 60).
Nothing is downloaded; errors are the engine's.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Sequence
from enum import IntEnum
from typing import TYPE_CHECKING

from msgspec.structs import replace
from PIL import Image, ImageOps

from saga.steps.errors import OcrUnavailableError, PermanentError

if TYPE_CHECKING:  # ocr_engine imports this module
    from saga.steps.ocr_engine import Word

NUMBER_CHARS = "0123456789.,<>-"
"""What a numeric value is written with; the second reading may read nothing else."""
READ_CHARS = NUMBER_CHARS + "HL*%"
"""The second reading may also read a flag or a mark glued to a number (``41H``, ``6.1%``):
forced into digits, it would read ``414`` and dispute a good value."""
PAD_X = 0.1
PAD_Y = 0.2
"""Paper kept around a word's box, in shares of its height: little sideways (the next
cell is about a character away), more up and down (a tight box clips a decimal point)."""
BORDER = 20
"""White pixels added around a crop: Tesseract misreads ink that touches the edge."""
DISPUTE_CONFIDENCE = 50
"""A second reading under this confidence neither confirms nor disputes."""
MAX_WORDS = 400
"""A page with more numbers than this is not re-read past them (a table of thousands of
digits would cost a reading of its own; none of the corpus pages has a fifth of it)."""


class Check(IntEnum):
    UNCHECKED = 0
    AGREED = 1
    DISPUTED = 2


def numeric(text: str) -> bool:
    return any(ch.isdigit() for ch in text)


def number_part(text: str) -> str:
    """The characters of ``text`` a number is written with, in order (``41H`` -> ``41``)."""
    return "".join(ch for ch in text if ch in NUMBER_CHARS)


def reread(picture: Image.Image, words: Sequence[Word]) -> list[Word]:
    """``words`` (read from ``picture``) with every numeric one checked against a second
    reading of its box."""
    targets = [i for i, w in enumerate(words) if numeric(w.text)][:MAX_WORDS]
    if not targets:
        return list(words)
    seconds = read_crops([crop(picture, words[i]) for i in targets])
    out = list(words)
    for index, (text, confidence) in zip(targets, seconds, strict=True):
        out[index] = judged(words[index], text, confidence)
    return out


def judged(word: Word, second: str, second_confidence: int) -> Word:
    """The word marked agreed (with the better confidence) or disputed by a second reading."""
    if not second:
        return word
    if number_part(word.text) == number_part(second):
        best = max(word.confidence, second_confidence)
        return replace(word, confidence=best, check=Check.AGREED)
    if second_confidence >= DISPUTE_CONFIDENCE:
        return replace(word, check=Check.DISPUTED)
    return word


def crop(picture: Image.Image, word: Word) -> Image.Image:
    """The word's box with some paper and a white border around it."""
    pad_x, pad_y = max(2, round(word.height * PAD_X)), max(2, round(word.height * PAD_Y))
    box = (
        max(word.left - pad_x, 0),
        max(word.top - pad_y, 0),
        min(word.left + word.width + pad_x, picture.width),
        min(word.top + word.height + pad_y, picture.height),
    )
    return ImageOps.expand(picture.crop(box), border=BORDER, fill=255)


def read_crops(crops: Sequence[Image.Image], allowed: str = "") -> list[tuple[str, int]]:
    """Each crop read as one line of number characters: (text, lowest word confidence);
    ("", 0) where Tesseract read nothing."""
    import pytesseract

    with tempfile.TemporaryDirectory(prefix="saga-ocr-") as folder:
        paths = []
        for n, piece in enumerate(crops):
            path = os.path.join(folder, f"{n:04d}.png")
            piece.save(path)
            paths.append(path)
        listing = os.path.join(folder, "crops.txt")
        with open(listing, "w") as out:
            out.write("\n".join(paths) + "\n")
        try:
            data = pytesseract.image_to_data(
                listing,
                lang="eng",
                config=f"--psm 7 -c tessedit_char_whitelist={allowed or READ_CHARS}",
                output_type=pytesseract.Output.DICT,
            )
        except pytesseract.TesseractNotFoundError:
            raise OcrUnavailableError("the tesseract program is not installed") from None
        except pytesseract.TesseractError as exc:
            raise PermanentError(f"OCR failed (tesseract exit status {exc.status})") from None
    texts: list[list[str]] = [[] for _ in crops]
    confidences: list[list[float]] = [[] for _ in crops]
    for i, text in enumerate(data["text"]):
        conf = float(data["conf"][i])
        page = int(data["page_num"][i]) - 1
        if conf < 0 or not text.strip() or not 0 <= page < len(crops):
            continue
        texts[page].append(text.strip())
        confidences[page].append(conf)
    return [
        ("".join(t), round(min(c)) if c else 0) for t, c in zip(texts, confidences, strict=True)
    ]
