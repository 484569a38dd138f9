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
words is asked for its orientation (Tesseract's OSD) and read again turned. A fax
is read with two page segmentations, line by line the surer (``read_page``).

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
    grey, _, angle = prepare_both(image, dpi, despeckle=despeckle, light=0)
    return grey, angle


def prepare_both(
    image: Image.Image, dpi: tuple[float, float], *, despeckle: int, light: int
) -> tuple[Image.Image, Image.Image | None, float]:
    """``prepare``'s picture, and the same picture despeckled by only a ``light`` window
    (None when ``light`` is not smaller than ``despeckle``)."""
    grey = ImageOps.exif_transpose(image).convert("L")
    x_dpi, y_dpi = (d if d and d > 20 else 200.0 for d in dpi)
    size = (round(grey.width * OCR_DPI / x_dpi), round(grey.height * OCR_DPI / y_dpi))
    if size != grey.size:
        grey = grey.resize(size, Image.Resampling.BICUBIC)
    light_picture = None
    if despeckle and light < despeckle:
        light_picture = grey.filter(ImageFilter.MedianFilter(light)) if light > 1 else grey.copy()
    if despeckle:
        grey = grey.filter(ImageFilter.MedianFilter(despeckle))
    angle = skew_angle(grey)
    if angle:
        grey = grey.rotate(angle, resample=Image.Resampling.BICUBIC, fillcolor=255, expand=False)
        if light_picture is not None:
            light_picture = light_picture.rotate(
                angle, resample=Image.Resampling.BICUBIC, fillcolor=255, expand=False
            )
    return grey, light_picture, angle


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
    bilevel: bool = False,
) -> PageWords:
    """The words of one page picture, turned upright first when it lies on its side, each
    number checked by a second reading of its box (``ocr_reread``) unless told not to.

    A ``bilevel`` page (a fax) is read with two page segmentations, as rows of varying
    size (psm 4) and as one uniform block (psm 6), and each line taken from the one
    that read it more surely (``merge_lines``): at fax resolution each loses rows the
    other reads, on no pattern of layout. Its unit words are read again (``ocr_units``)
    from the picture before its median filter: the filter that removes a fax's specks
    also removes the one-pixel ``/`` of ``mg/dL`` and ``/nl``. The page reading and the
    numbers' second reading keep the filtered picture, where the specks are gone.
    (Fax recall 65.4% -> 74.4%, with the speck rules below: docs/extraction.md.)"""
    # a fax's units are read again from its pixels before the median filter (see docstring)
    grey, unfiltered, skew = prepare_both(
        image, dpi, despeckle=despeckle, light=0 if bilevel else despeckle
    )
    page = PageWords(words=read_words(grey, languages), skew=skew)
    if bilevel:
        # a fax's rows: the page's segmentation as rows (psm 4) or as one block (psm 6),
        # line by line, whichever read the line more surely (see docstring)
        merged = merge_lines(page.words, read_words(grey, languages, psm=6))
        page = PageWords(words=merged, skew=skew)
    if _confident(page.words) < MIN_CONFIDENT_WORDS:
        turn = orientation(grey)
        if turn:
            upright, skew = prepare(grey.rotate(turn, expand=True), (OCR_DPI, OCR_DPI), despeckle=0)
            turned = read_words(upright, languages)
            if _confident(turned) > _confident(page.words):
                grey, page = upright, PageWords(words=turned, rotated=turn, skew=skew)
                unfiltered = None
    if second_reading:
        words = reread(grey, page.words)
        words = reread_units(unfiltered if unfiltered is not None else grey, words)
        page = msgspec.structs.replace(page, words=words)
    return page


OTHER_LINES = 1 << 40
"""Added to the line keys of the second segmentation, so the two never share one."""


def merge_lines(first: Sequence[Word], second: Sequence[Word]) -> list[Word]:
    """Line by line, whichever of two segmentations of one page read it more surely.

    Each line of ``first`` is set against the lines of ``second`` whose words are
    centred inside its band; the lines with the higher sum of confidences of their
    words of two or more letters or digits win (``first`` on a tie). A line of
    ``second`` is taken at most once, and one inside no band of ``first`` is left out
    (``first`` decides what lines the page has)."""
    mine, theirs = _by_line(first), _by_line(second)
    used: set[int] = set()
    out: list[Word] = []
    for words in mine.values():
        top = min(w.top for w in words)
        bottom = max(w.top + w.height for w in words)
        inside = [
            key
            for key, rival in theirs.items()
            if key not in used and top <= _centre(rival) <= bottom
        ]
        used.update(inside)
        rival = [w for key in inside for w in theirs[key]]
        if rival and _sure(rival) > _sure(words):
            out += [msgspec.structs.replace(w, line=w.line + OTHER_LINES) for w in rival]
        else:
            out += words
    return out


def _by_line(words: Sequence[Word]) -> dict[int, list[Word]]:
    lines: dict[int, list[Word]] = {}
    for word in words:
        lines.setdefault(word.line, []).append(word)
    return lines


def _centre(words: Sequence[Word]) -> float:
    return sum(w.top + w.height / 2 for w in words) / len(words)


def _sure(words: Sequence[Word]) -> int:
    return sum(w.confidence for w in words if sum(ch.isalnum() for ch in w.text) >= 2)


def _confident(words: Sequence[Word]) -> int:
    return sum(1 for w in words if w.confidence >= 60 and sum(ch.isalnum() for ch in w.text) >= 3)


def read_words(grey: Image.Image, languages: str, psm: int = 4) -> list[Word]:
    """Tesseract's words, with their boxes and confidences (page segmentation 4 unless
    told otherwise: a column of rows of varying size, which keeps a table's row on one
    line; 6, one uniform block, is a fax's second reading)."""
    import pytesseract

    try:
        data = pytesseract.image_to_data(
            grey,
            lang=languages,
            config=f"--psm {psm} -c preserve_interword_spaces=1",
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
BLOT_SIZE = 0.6
"""A word of dashes this share of the type's height or taller, read under 60, is a blot
(a real ``=`` is under half the height of the letters, a ``-`` a fifth)."""
QUOTE_MARKS = frozenset("\u2018\u2019\u201a\u201c\u201d\u201e'`\"")
"""A word of quote marks alone is a speck read as one (no cell of a lab report is one)."""
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
        if flat and word.height >= BLOT_SIZE * tall and word.confidence < 60:
            continue  # a dash nearly as tall as the letters is a blot, not a dash
        if set(word.text) <= QUOTE_MARKS:
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
