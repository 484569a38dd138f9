"""OCR: words laid out as text, the confidence gate, and Tesseract end to end (skipped
with the reason when it is not installed)."""

from __future__ import annotations

import pytest

from saga.steps.models import Biomarker, Extraction, OcrPage, Provenance
from saga.steps.ocr_engine import Word
from saga.steps.ocr_gate import gate
from saga.steps.ocr_layout import page_text
from tests.ocr_marks import needs_tesseract


def _word(text: str, left: int, conf: int, line: int = 1, top: int = 0) -> Word:
    return Word(text, left, top, 10 * len(text), 20, conf, line)


def test_words_become_cells_two_spaces_apart_with_a_confidence_map() -> None:
    words = [
        _word("Sodium", 0, 95),
        _word("139", 200, 62),
        _word("mmol/L", 240, 91),
        _word("Glucose", 0, 90, line=2, top=40),
    ]
    laid = page_text(words)
    assert laid.text == "Sodium  139 mmol/L\nGlucose"
    assert laid.confidence == "999999  666 999999\n9999999"


def test_a_speck_ending_a_unit_cell_is_dropped_never_one_after_a_digit_or_in_a_name() -> None:
    words = [_word("Sodium", 0, 95), _word("139", 200, 90), _word("mmol/L.", 240, 91)]
    words += [_word("4.", 400, 90), _word("mg/dl,", 440, 90)]
    words += [_word("AG/AB,", 0, 90, line=2, top=40), _word("4TH", 70, 90, line=2, top=40)]
    laid = page_text(words)
    assert laid.text == "Sodium  139 mmol/L  4.  mg/dl\nAG/AB, 4TH"  # a name's comma stays
    assert len(laid.confidence) == len(laid.text)


def test_columns_little_more_than_a_character_apart_are_two_cells() -> None:
    # a previous result and its date, 1.5 characters apart; the words of a name, half of one
    words = [_word("Hemoglobin", 0, 95), _word("12.9", 200, 90), _word("09/14/2023", 255, 90)]
    words += [_word("Vitamin", 0, 90, line=2, top=40), _word("D", 75, 90, line=2, top=40)]
    assert page_text(words).text == "Hemoglobin  12.9  09/14/2023\nVitamin D"


def _one(line: str, start: int, end: int, value_text: str) -> Extraction:
    found = Biomarker(
        name="Sodium",
        value=float(value_text.replace(",", ".")) if value_text[0].isdigit() else None,
        value_text=value_text,
        unit="mmol/L",
        provenance=Provenance(page=1, line=line, start=start, end=end),
    )
    return Extraction(biomarkers=[found])


def test_a_value_read_under_the_floor_is_rejected_and_the_page_named() -> None:
    page = "Sodium  139  mmol/L"
    ocr = [OcrPage(page=1, confidence="999999  555  999999", mean_confidence=80)]
    out, reasons = gate(_one(page, 8, 11, "139"), [page], ocr, threshold=80)
    assert not out.biomarkers
    assert out.rejected[0].reason == "read by OCR at confidence 50 (under 60)"
    assert out.rejected[0].provenance is not None
    assert out.rejected[0].provenance.ocr_confidence == 50
    assert reasons == ["1 value on page 1 not trusted as read by OCR"]


def test_a_value_read_between_floor_and_threshold_is_kept_unverified_for_review() -> None:
    page = "Sodium  139  mmol/L"
    ocr = [OcrPage(page=1, confidence="999999  666  999999", mean_confidence=80)]
    out, reasons = gate(_one(page, 8, 11, "139"), [page], ocr, threshold=80)
    assert not out.rejected
    prov = out.biomarkers[0].provenance
    assert prov is not None and prov.unverified and prov.ocr_confidence == 60
    assert reasons == ["1 value on page 1 read by OCR at confidence under 80, kept unverified"]
    # a threshold at or under the floor keeps such a value as trusted
    out, reasons = gate(_one(page, 8, 11, "139"), [page], ocr, threshold=60)
    prov = out.biomarkers[0].provenance
    assert prov is not None and not prov.unverified and reasons == []


def test_a_confident_value_keeps_its_ocr_confidence() -> None:
    page = "Sodium  139  mmol/L"
    ocr = [OcrPage(page=1, confidence="999999  999  999999", mean_confidence=95)]
    out, reasons = gate(_one(page, 8, 11, "139"), [page], ocr, threshold=80)
    assert out.biomarkers[0].provenance is not None
    assert out.biomarkers[0].provenance.ocr_confidence == 90
    assert reasons == []


@pytest.mark.parametrize(
    ("page", "start", "end", "value_text"),
    [
        ("Sodium  1O9  mmol/L", 9, 10, "9"),  # an O glued to the digits
        ("Sodium  l39  mmol/L", 9, 11, "39"),  # an l for a 1
        ("Potassium  4,6  mmol/L", 11, 14, "4,6"),  # a comma in a document of points
    ],
)
def test_confusable_characters_are_never_read_into_a_value(
    page: str, start: int, end: int, value_text: str
) -> None:
    ocr = [OcrPage(page=1, confidence="".join(" " if c == " " else "9" for c in page))]
    out, _ = gate(_one(page, start, end, value_text), [page, "Chloride 103.5 mmol/L"], ocr, 80)
    assert not out.biomarkers
    assert "read by OCR with" in out.rejected[0].reason


def test_a_word_value_made_of_letters_is_not_taken_for_a_confused_number() -> None:
    page = "HIV 1/2 AG/AB  NON-REACTIVE  NON-REACTIVE"
    confidence = "".join(" " if c == " " else "9" for c in page)
    ocr = [OcrPage(page=1, confidence=confidence, mean_confidence=95)]
    out, reasons = gate(_one(page, 14, 26, "NON-REACTIVE"), [page], ocr, 80)
    assert [b.value_text for b in out.biomarkers] == ["NON-REACTIVE"] and reasons == []


def test_pages_not_read_by_ocr_are_left_alone() -> None:
    page = "Sodium  139  mmol/L"
    extraction = _one(page, 8, 11, "139")
    out, reasons = gate(extraction, [page], [], threshold=80)
    assert out == extraction and reasons == []


@needs_tesseract("eng")
def test_tesseract_reads_a_rendered_table_row() -> None:
    from PIL import Image, ImageDraw, ImageFont

    from saga.steps.ocr import OcrLimits, image_text
    from tests.corpus.fonts import font_path
    from tests.corpus.scanner import still

    image = Image.new("L", (1700, 400), 255)
    font = ImageFont.truetype(str(font_path("sans")), size=40)
    ImageDraw.Draw(image).text((60, 100), "Sodium      139      mmol/L      135-145", font=font)
    ImageDraw.Draw(image).text((60, 200), "Potassium   4.4      mmol/L      3.5-5.1", font=font)
    pages, read = image_text(
        still(image, fmt="PNG", dpi=(300, 300)), max_pages=5, limits=OcrLimits(languages="eng")
    )
    assert "139" in pages[0] and "4.4" in pages[0]
    assert read[0].page == 1 and len(read[0].confidence) == len(pages[0])


def test_quote_marks_at_a_words_ends_are_dropped_never_a_comparator_or_a_lone_mark() -> None:
    """A left quote before 103, a low quote before mmol/l (specks read as quotes) go; a
    quote before ``<<`` and a lone ``'`` stay."""
    words = [_word("\u2018103", 0, 90), _word("\u201ammol/l", 200, 90)]
    words.append(_word("\u201c<<", 400, 90))
    words.append(_word("'", 600, 90))
    laid = page_text(words)
    assert laid.text == "103  mmol/l  \u201c<<  '"
    assert len(laid.confidence) == len(laid.text)


def test_a_lone_letter_read_at_a_very_low_confidence_is_a_speck() -> None:
    """A ``u`` read at 1 between two numbers is dropped; an ``H`` flag read at 90 stays."""
    from saga.steps.ocr_engine import drop_specks

    words = [_word("7.9", 0, 99), _word("u", 100, 1), _word("H", 140, 90), _word("8.2", 200, 99)]
    assert [w.text for w in drop_specks(words)] == ["7.9", "H", "8.2"]


def test_a_dash_as_tall_as_the_letters_and_a_lone_quote_mark_are_specks() -> None:
    """A fax's blot read as ``=`` (as tall as the type, read at 30) between a name and its
    value, and a quote mark standing alone, are dropped; a real ``=`` (flat) and a real
    ``-`` flag stay, however sure Tesseract is of them."""
    from saga.steps.ocr_engine import drop_specks

    def box(text: str, left: int, width: int, height: int, conf: int) -> Word:
        return Word(text, left, 0, width, height, conf, 1)

    words = [box("AST", 0, 70, 31, 95), box("=", 100, 77, 23, 30), box("22", 400, 38, 28, 96)]
    words += [box("\u2018", 450, 3, 9, 92), box("ALT", 500, 68, 30, 96)]
    words += [box("=", 600, 18, 14, 40), box("-", 650, 15, 5, 20), box("60", 700, 40, 31, 95)]
    assert [w.text for w in drop_specks(words)] == ["AST", "22", "ALT", "=", "-", "60"]


def test_a_faxs_units_are_read_again_from_the_picture_before_its_median_filter() -> None:
    """The 5-pixel median filter that takes a fax's specks takes a one-pixel ``/`` too; the
    unfiltered picture, the same size and turned by the same tilt, still has it."""
    from PIL import Image, ImageDraw

    from saga.steps.ocr_engine import prepare_both

    page = Image.new("L", (600, 400), 255)
    ImageDraw.Draw(page).line([(300, 100), (300, 300)], fill=0, width=1)
    grey, unfiltered, _ = prepare_both(page, (300, 300), despeckle=5, light=0)
    assert unfiltered is not None and unfiltered.size == grey.size
    assert min(grey.crop((290, 150, 310, 250)).getdata()) > 128  # gone
    assert min(unfiltered.crop((290, 150, 310, 250)).getdata()) < 128  # kept
    _, none, _ = prepare_both(page, (300, 300), despeckle=5, light=5)
    assert none is None  # a grey scan keeps one picture


def test_two_segmentations_of_a_fax_are_merged_line_by_line_the_surer_winning() -> None:
    """Row 1 read surer as rows (psm 4), row 2 as a block (psm 6): one of each, each line
    once; a line of the second reading inside no row of the first is not added."""
    from saga.steps.ocr_engine import OTHER_LINES, merge_lines

    rows = [_word("Sodium", 0, 95, 1, 0), _word("139", 200, 93, 1, 0)]
    rows += [_word("Urea", 0, 40, 2, 40), _word("5.A", 200, 30, 2, 40)]
    block = [_word("Sodium", 0, 90, 7, 2), _word("189", 200, 40, 7, 2)]
    block += [_word("Urea", 0, 92, 8, 41), _word("5.4", 200, 91, 8, 41)]
    block += [_word("speck", 0, 99, 9, 400)]
    merged = merge_lines(rows, block)
    assert [w.text for w in merged] == ["Sodium", "139", "Urea", "5.4"]
    assert {w.line for w in merged} == {1, 8 + OTHER_LINES}
    assert merge_lines(rows, []) == rows
