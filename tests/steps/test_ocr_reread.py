"""The second reading of numbers: agreement raises confidence, a confident different
reading disputes the value (rejected by the gate), an unsure one changes nothing; and
Tesseract's second reading of a real crop (skipped, with the reason, without it)."""

from __future__ import annotations

from msgspec.structs import replace
from PIL import Image, ImageDraw, ImageFont

from saga.steps.models import Biomarker, Extraction, OcrPage, Provenance
from saga.steps.ocr_engine import Word
from saga.steps.ocr_gate import gate
from saga.steps.ocr_layout import page_text
from saga.steps.ocr_reread import Check, judged, reread
from tests.ocr_marks import needs_tesseract


def _word(text: str, conf: int, left: int = 0) -> Word:
    return Word(text, left, 100, 20 * len(text), 40, conf, 1)


def test_two_readings_that_agree_take_the_better_confidence() -> None:
    """``179`` read at 77 and again at 95: agreed, at 95 (a flag glued on is not a digit)."""
    assert judged(_word("179", 77), "179", 95) == replace(_word("179", 95), check=Check.AGREED)
    assert judged(_word("41H", 70), "41H", 88).check == Check.AGREED
    assert judged(_word("41H", 70), "41", 88).check == Check.AGREED


def test_a_confident_different_reading_disputes_an_unsure_one_changes_nothing() -> None:
    """``43`` read again as ``4.3`` at 90: disputed (text kept); at 30, or empty: unchanged."""
    disputed = judged(_word("43", 96), "4.3", 90)
    assert disputed.check == Check.DISPUTED and disputed.text == "43"
    assert judged(_word("43", 96), "4.3", 30) == _word("43", 96)
    assert judged(_word("43", 96), "", 0) == _word("43", 96)


def test_a_disputed_value_is_rejected_by_the_gate_with_its_reason() -> None:
    """The value's characters are ``!`` in the map; the gate rejects it and flags the page."""
    words = [_word("Albumin", 99), replace(_word("43", 96, left=400), check=Check.DISPUTED)]
    laid = page_text(words)
    assert laid.text == "Albumin  43" and laid.confidence == "9999999  !!"
    found = Biomarker(
        name="Albumin",
        value=43.0,
        value_text="43",
        unit="g/dL",
        provenance=Provenance(page=1, line=laid.text, start=9, end=11),
    )
    ocr = [OcrPage(page=1, confidence=laid.confidence, mean_confidence=97)]
    out, reasons = gate(Extraction(biomarkers=[found]), [laid.text], ocr, threshold=80)
    assert not out.biomarkers
    assert out.rejected[0].reason == "read by OCR twice, and the two readings of the value differ"
    assert reasons == ["1 value on page 1 not trusted as read by OCR"]


@needs_tesseract("eng")
def test_tesseract_reads_each_number_again_and_judges_it() -> None:
    """On a drawn ``4.3``: a first reading of ``4.3`` is agreed, one of ``43`` disputed,
    and a word without a digit is not read again."""
    from tests.corpus.fonts import font_path

    picture = Image.new("L", (600, 200), 255)
    font = ImageFont.truetype(str(font_path("sans")), size=40)
    ImageDraw.Draw(picture).text((300, 60), "4.3", font=font, fill=0)
    box = dict(left=295, top=55, width=70, height=50, line=1)
    words = [
        Word("4.3", confidence=70, **box),  # type: ignore[arg-type]
        Word("43", confidence=96, **box),  # type: ignore[arg-type]
        Word("Albumin", 20, 60, 200, 50, 95, 1),
    ]
    checked = reread(picture, words)
    assert [w.check for w in checked] == [Check.AGREED, Check.DISPUTED, Check.UNCHECKED]
    assert checked[0].confidence > 70 and [w.text for w in checked] == ["4.3", "43", "Albumin"]
