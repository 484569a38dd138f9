"""The second reading of a unit: which words are read again, when a reading replaces
the page's (two agree on a known unit like the page's, or the same glyphs I/l), and
Tesseract's reading of a real drawn unit (skipped, with the reason, without it)."""

from __future__ import annotations

from msgspec.structs import replace
from PIL import Image, ImageDraw, ImageFont

from saga.steps.models import Biomarker, Extraction, OcrPage, Provenance
from saga.steps.ocr_engine import Word
from saga.steps.ocr_gate import gate
from saga.steps.ocr_units import agreed_unit, candidates, glyph_unit, reread_units
from tests.ocr_marks import needs_tesseract


def _line(*texts: str, line: int = 1) -> list[Word]:
    words, left = [], 0
    for text in texts:
        words.append(Word(text, left, 100, 20 * len(text), 40, 90, line))
        left += 20 * len(text) + 30
    return words


def test_i_and_l_are_one_glyph_but_never_a_digit() -> None:
    assert glyph_unit("ulU/mL") == "uIU/mL"
    assert glyph_unit("U/I") == "U/l"
    assert glyph_unit("mmol/L") == "mmol/L"  # already a unit: as read
    assert glyph_unit("nl") == ""  # no swap makes a unit of it
    assert glyph_unit("mg/d1") == ""  # a 1 is a digit: never swapped for an l
    assert glyph_unit("") == ""


def test_only_words_after_a_number_that_are_no_unit_are_read_again() -> None:
    words = _line("ALT", "41", "UL", "6-29") + _line("eGFR", "47", "mL/min/1.73m2", line=2)
    words += _line("Referred", "by", "Dr", "Smith", line=3) + _line("HbA1c", "48", "or", line=4)
    picked = [words[i].text for i in candidates(words)]
    # "mL/min/1.73m2" is a unit already; "Smith" follows no number; "or" does, and is read
    assert picked == ["UL", "or"]


def test_two_second_readings_must_agree_on_a_known_unit_like_the_page_reading() -> None:
    assert agreed_unit("UL", [("U/L", 90), ("U/L", 70), ("UL", 95)]) == ("U/L", 70)
    assert agreed_unit("UL", [("U/L", 90), ("UL", 70), ("U", 95)]) == ("", 0)  # one alone
    assert agreed_unit("or", [("g/L", 90), ("g/L", 90)]) == ("", 0)  # nothing like "or"
    # two units with two votes each: no agreement
    assert agreed_unit("mgdl", [("mg/dl", 80), ("mg/l", 80), ("mg/dl", 80), ("mg/l", 80)]) == (
        "",
        0,
    )
    assert agreed_unit("ulU/mL", [("ulU/mL", 60), ("uIU/mL", 80)]) == ("uIU/mL", 60)


@needs_tesseract("eng")
def test_tesseract_reads_a_misread_unit_again_and_leaves_the_number_alone() -> None:
    """``U/L`` drawn beside ``41``: a page reading ``UL`` becomes ``U/L``; the number and
    a word that is not after a number keep their text."""
    from tests.corpus.fonts import font_path

    font = ImageFont.truetype(str(font_path("sans")), size=40)
    picture = Image.new("L", (900, 200), 255)
    draw = ImageDraw.Draw(picture)
    boxes = []
    for x, text in ((40, "ALT"), (300, "41"), (450, "U/L")):
        draw.text((x, 60), text, font=font, fill=0)
        left, top, right, bottom = draw.textbbox((x, 60), text, font=font)
        boxes.append((left, top, right - left, bottom - top))
    page = [
        Word("ALT", *boxes[0], 95, 1),
        Word("41", *boxes[1], 95, 1),
        Word("UL", *boxes[2], 88, 1),
    ]
    read = reread_units(picture, page)
    assert [w.text for w in read] == ["ALT", "41", "U/L"]
    assert read[:2] == page[:2]


def test_a_row_with_a_unit_but_no_value_read_asks_for_review() -> None:
    """``Hemoglobin  ELSE  L  g/dL`` (11.1 misread past recognition) has no number, so
    coverage does not count it; the gate names it. A row whose value was read does not."""
    page = "WBC  9.7  x10^3/uL  4.0-11.0\nHemoglobin  ELSE  L  g/dL  12.8-15.5\nNote: fasting"
    conf = "\n".join("".join(" " if ch == " " else "9" for ch in line) for line in page.split("\n"))
    found = Biomarker(
        name="WBC",
        value=9.7,
        value_text="9.7",
        unit="x10^3/uL",
        provenance=Provenance(page=1, line="WBC  9.7  x10^3/uL  4.0-11.0", start=5, end=8),
    )
    ocr = [OcrPage(page=1, confidence=conf, mean_confidence=95)]
    out, reasons = gate(Extraction(biomarkers=[found]), [page], ocr, threshold=80)
    assert [b.name for b in out.biomarkers] == ["WBC"]
    assert reasons == ["1 line on page 1 with a unit but no value OCR could read"]
    read = page.split("\n", maxsplit=1)[0]
    _, none = gate(Extraction(biomarkers=[found]), [read], [_all_nines(ocr[0], read)], 80)
    assert none == []


def _all_nines(page: OcrPage, text: str) -> OcrPage:
    return replace(page, confidence="".join(" " if ch == " " else "9" for ch in text))
