"""Tesseract behind one function: a page picture in, words with boxes and confidence out.

Tesseract 5 from Debian's ``tesseract-ocr`` packages, driven by ``pytesseract``
(which runs the ``tesseract`` program: the OCR's memory and CPU are a child of
the extraction process, capped by the same ``RLIMIT_AS`` it inherits, and killed
with it). Nothing is downloaded: the language data are Debian's files. Why
Tesseract and not an ONNX engine is in docs/extraction.md.

Before reading, a picture is made what Tesseract reads best: grey, square pixels
at ``OCR_DPI`` (a 200x100 dpi fax is stretched back to its true height), specks
removed with a median filter, and the tilt of a scan straightened (the angle
whose row profile is sharpest). A page whose first reading finds few confident
words is asked for its orientation (Tesseract's OSD) and read again turned.

Errors name no file and quote no text: only the engine's state.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

import msgspec
from PIL import Image, ImageFilter, ImageOps

from saga.steps.errors import OcrUnavailableError, PermanentError
from saga.steps.ocr_reread import reread
from saga.steps.ocr_units import reread_units

OCR_DPI = 300
"""Tesseract is trained on text of ~20-30 px x-height, which 9-10 pt type reaches here."""
DESKEW_LIMIT = 4.0
"""Degrees either way a scan's tilt is looked for (feeders tilt by up to ~3)."""
DESKEW_STEP = 0.25
MIN_CONFIDENT_WORDS = 12
"""Fewer words of three or more letters or digits read at confidence >= 60 asks Tesseract
for the page's orientation (a page on its side still yields confident one- and
two-character fragments: the rows seen end on)."""
LANGUAGES = ("eng", "deu", "fra", "spa", "ita", "nld", "swe", "por")
DEFAULT_LANGUAGES = "eng+deu+fra"


class Word(msgspec.Struct, frozen=True, array_like=True):
    """One word as read: text, box in pixels of the prepared picture, confidence 0-100."""

    text: str
    left: int
    top: int
    width: int
    height: int
    confidence: int
    line: int
    """Tesseract's line key (block, paragraph, line packed in one int)."""
    check: int = 0
    """A numeric word's second reading: ``ocr_reread.Check`` (0 unchecked, 1 agreed,
    2 disputed)."""


class PageWords(msgspec.Struct, frozen=True, kw_only=True):
    words: list[Word]
    rotated: int = 0
    """Degrees the page was turned before reading (0, 90, 180, 270)."""
    skew: float = 0.0


def available(languages: str = DEFAULT_LANGUAGES) -> str:
    """ "" when Tesseract and ``languages`` are installed, else why not (one sentence)."""
    try:
        import pytesseract

        installed = set(pytesseract.get_languages(config=""))
    except ImportError:
        return "the pytesseract package is not installed"
    except Exception as exc:  # TesseractNotFoundError, a broken install
        return f"the tesseract program cannot be run ({type(exc).__name__})"
    missing = [lang for lang in languages.split("+") if lang not in installed]
    if missing:
        return f"Tesseract has no language data for {', '.join(missing)}"
    return ""


def despeckle_window(source_dpi: float, *, bilevel: bool) -> int:
    """The median filter's size at ``OCR_DPI`` that removes a scanner's specks (1-3 pixels
    at the scan's own resolution) without eating strokes.

    A 200 dpi scan or fine fax is enlarged 1.5 times, its specks with it, so they need a
    5-pixel window; at 300 dpi a 3-pixel one suffices, and a larger one rounds the small
    type away. A standard fax (100 dpi down the page) is stretched three times in height:
    its horizontal strokes are as thin as its specks, so only the 3-pixel window is safe."""
    if source_dpi >= 250 or (bilevel and source_dpi < 150):
        return 3
    return 5


def prepare(
    image: Image.Image, dpi: tuple[float, float], *, despeckle: int = 3
) -> tuple[Image.Image, float]:
    """Grey, square pixels at ``OCR_DPI``, despeckled and straightened; and the tilt found."""
    grey = ImageOps.exif_transpose(image).convert("L")
    x_dpi, y_dpi = (d if d and d > 20 else 200.0 for d in dpi)
    size = (round(grey.width * OCR_DPI / x_dpi), round(grey.height * OCR_DPI / y_dpi))
    if size != grey.size:
        grey = grey.resize(size, Image.Resampling.BICUBIC)
    if despeckle:
        grey = grey.filter(ImageFilter.MedianFilter(despeckle))
    angle = skew_angle(grey)
    if angle:
        grey = grey.rotate(angle, resample=Image.Resampling.BICUBIC, fillcolor=255, expand=False)
    return grey, angle


def skew_angle(grey: Image.Image) -> float:
    """The rotation that makes text rows sharpest: rows of ink and rows of paper alternate.

    Scored on a small thumbnail by the variance of its row means (Pillow only)."""
    thumb = grey.copy()
    thumb.thumbnail((600, 900))
    thumb = thumb.point(lambda v: 0 if v < 160 else 255)
    best, best_score = 0.0, -1.0
    steps = round(DESKEW_LIMIT / DESKEW_STEP)
    for i in range(-steps, steps + 1):
        angle = i * DESKEW_STEP
        turned = thumb.rotate(angle, resample=Image.Resampling.NEAREST, fillcolor=255)
        score = _row_variance(turned)
        if score > best_score + 1e-9:
            best, best_score = angle, score
    return best


def _row_variance(image: Image.Image) -> float:
    rows = list(image.resize((1, image.height), Image.Resampling.BOX).getdata())
    mean = sum(rows) / len(rows)
    return float(sum((v - mean) ** 2 for v in rows)) / len(rows)


def read_page(
    image: Image.Image,
    dpi: tuple[float, float],
    languages: str,
    *,
    despeckle: int = 3,
    second_reading: bool = True,
) -> PageWords:
    """The words of one page picture, turned upright first when it lies on its side, each
    number checked by a second reading of its box (``ocr_reread``) unless told not to."""
    grey, skew = prepare(image, dpi, despeckle=despeckle)
    page = PageWords(words=read_words(grey, languages), skew=skew)
    if _confident(page.words) < MIN_CONFIDENT_WORDS:
        turn = orientation(grey)
        if turn:
            upright, skew = prepare(grey.rotate(turn, expand=True), (OCR_DPI, OCR_DPI), despeckle=0)
            turned = read_words(upright, languages)
            if _confident(turned) > _confident(page.words):
                grey, page = upright, PageWords(words=turned, rotated=turn, skew=skew)
    if second_reading:
        words = reread(grey, page.words)
        words = reread_units(grey, words)
        page = msgspec.structs.replace(page, words=words)
    return page


def _confident(words: Sequence[Word]) -> int:
    return sum(1 for w in words if w.confidence >= 60 and sum(ch.isalnum() for ch in w.text) >= 3)


def read_words(grey: Image.Image, languages: str) -> list[Word]:
    """Tesseract's words, with their boxes and confidences (page segmentation 4: a
    column of rows of varying size, which keeps a table's row on one line)."""
    import pytesseract

    try:
        data = pytesseract.image_to_data(
            grey,
            lang=languages,
            config="--psm 4 -c preserve_interword_spaces=1",
            output_type=pytesseract.Output.DICT,
        )
    except pytesseract.TesseractNotFoundError:
        raise OcrUnavailableError("the tesseract program is not installed") from None
    except pytesseract.TesseractError as exc:
        raise PermanentError(f"OCR failed (tesseract exit status {exc.status})") from None
    words: list[Word] = []
    for i, text in enumerate(data["text"]):
        conf = float(data["conf"][i])
        if conf < 0 or not text.strip() or is_speck(text.strip(), conf):
            continue
        key = (data["block_num"][i] * 1000 + data["par_num"][i]) * 1000 + data["line_num"][i]
        words.append(
            Word(
                text.strip(),
                data["left"][i],
                data["top"][i],
                data["width"][i],
                data["height"][i],
                round(conf),
                key,
            )
        )
    return drop_specks(words)


SPECK_SIZE = 0.25
"""A word whose box is under this share of the page's median word height both ways is a speck."""
LOW_WORD_SIZE = 0.45
DASHES = frozenset("-=_~")
LONE_LETTER = 25
"""A word of one letter read under this confidence is a speck Tesseract guessed a letter
for (``u`` between two numbers); a real flag letter is read far above it."""


def drop_specks(words: list[Word]) -> list[Word]:
    """The words without the specks Tesseract read as words, judged by the size of their box.

    The median filter leaves the larger specks; Tesseract reads them as ``|``, ``-``,
    ``u`` or ``.`` cells, which the parser takes for a value column and so loses the
    row. A dot a few pixels square is dirt whatever it was read as; a word under half
    the height of the page's type that Tesseract doubts (under 60) is too, unless it is
    a dash (a real ``-`` or ``=`` is flat, and kept: a German low flag, ``> OR =``)."""
    heights = sorted(w.height for w in words if any(ch.isalnum() for ch in w.text))
    if not heights:
        return words
    tall = heights[len(heights) // 2]
    kept = []
    for word in words:
        if max(word.width, word.height) < SPECK_SIZE * tall:
            continue
        flat = set(word.text) <= DASHES
        if word.height < LOW_WORD_SIZE * tall and word.confidence < 60 and not flat:
            continue
        if len(word.text) == 1 and word.text.isalpha() and word.confidence < LONE_LETTER:
            continue
        kept.append(word)
    return kept


SPECK_CONFIDENCE = 90
"""A word of punctuation alone read under this confidence is taken for dirt."""


def is_speck(text: str, confidence: float) -> bool:
    """Dust, a staple's shadow or a fax line's dropout read as ``.``, ``|``, ``_``, ``©``.

    Only marks without a letter or digit are dropped, and only when Tesseract doubts
    them: a ``<`` or ``-`` it is sure of stays (a comparator, a German low flag)."""
    if any(ch.isalnum() or ch in "<>=\u2264\u2265+-\u2212*" for ch in text):
        return False
    return confidence < SPECK_CONFIDENCE


def orientation(grey: Image.Image) -> int:
    """Degrees (counter-clockwise, for ``Image.rotate``) that put the page upright; 0 if unsure."""
    import pytesseract

    try:
        osd = pytesseract.image_to_osd(grey, output_type=pytesseract.Output.DICT)
    except pytesseract.TesseractError:  # too little text to tell
        return 0
    if float(osd.get("orientation_conf", 0)) < 1.0:
        return 0
    # OSD's "rotate" is clockwise degrees to upright; Image.rotate turns counter-clockwise
    return (360 - int(osd.get("rotate", 0))) % 360


def single_threaded() -> None:
    """One core per Tesseract: pages run in parallel processes instead (OpenMP would
    otherwise start a thread per core in every one of them)."""
    os.environ.setdefault("OMP_THREAD_LIMIT", "1")
