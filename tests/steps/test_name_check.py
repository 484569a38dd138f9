"""Issue 29: a value whose analyte name the table does not know is kept, unverified, reviewed.

``near_known`` (a weighted edit distance, OCR-confusable characters cheap) is tested on
misreads no corpus layout prints; the parser is tested end to end: a text PDF's own
analyte, an OCR page's misread name (never corrected), and a model that "fixed" one.
"""

from __future__ import annotations

import json

import pytest

from saga.steps.config import ExtractorKind, StepConfig
from saga.steps.models import OcrPage, ParserOutput, RouterOutput
from saga.steps.name_check import (
    MISREAD_PREFIX,
    UNKNOWN_NAME_WARNING,
    distance,
    near_known,
)
from saga.steps.parser import parse
from saga.steps.testing import make_context
from tests.steps.test_unseen_checks import MockResponseLLM, lab, named, read, row


@pytest.mark.parametrize(
    ("read_as", "known"),
    [
        ("Hemoglobin Alc", "Hemoglobin A1c"),  # 1 read as l
        ("HbAIc", "Hemoglobin A1c"),  # 1 read as I
        ("Alburnin", "Albumin"),  # m read as rn
        ("C0rtisol", "Cortisol"),  # o read as 0
        ("Potassiurn", "Potassium"),
        ("Creatinlne", "Creatinine"),  # i read as l
        ("Trig1ycerides", "Triglycerides"),
        ("Natr\u0131um", "Sodium"),  # a dotless i folds away: one letter lost in a long name
    ],
)
def test_a_name_a_few_confusable_characters_from_a_known_one_is_near_it(
    read_as: str, known: str
) -> None:
    assert near_known(read_as) == known


@pytest.mark.parametrize(
    "name",
    [
        "Zonulin",  # a lab's own analyte: near nothing
        "Quuxase",
        "GLOB",  # a short code: only confusable characters may differ, and none do
        "Atc",  # t is no 1: too short for a plain edit
        "Sodium",  # known names are not "near": they are known
        "Hemoglobin Ac",  # one letter from HbA1c and one from Hemoglobina: which? no answer
    ],
)
def test_names_that_are_no_misread_of_one_known_analyte_are_near_nothing(name: str) -> None:
    assert near_known(name) is None


def test_confusable_edits_cost_less_than_any_other() -> None:
    assert distance("alc", "a1c") == distance("rn", "m") == 0.25
    assert distance("atc", "a1c") == 1.0
    assert distance("hdl", "ldl") == 1.0  # HDL is never a misread of LDL: h and l differ
    assert distance("abcdef", "uvwxyz", limit=2) == 3.0  # past the limit: limit + 1


@pytest.mark.anyio
async def test_a_text_reports_own_analyte_is_kept_unverified_and_reviewed() -> None:
    """A name no table knows, whose range vouches for its magnitude: kept as printed,
    not renamed, but unverified with the reason, and the page named in the review."""
    out = await read(
        [[row("Sodium", "139", "mmol/L", "136-145"), row("Zonulin", "42", "ng/mL", "20-60")]]
    )
    zonulin, sodium = named(out, "Zonulin"), named(out, "Sodium")
    assert zonulin.value == 42 and zonulin.canonical_name == ""
    assert zonulin.provenance is not None and zonulin.provenance.unverified
    assert zonulin.provenance.vouched_by == ["range"]
    assert zonulin.warnings == [UNKNOWN_NAME_WARNING]
    assert sodium.provenance is not None and not sodium.provenance.unverified
    assert sodium.warnings == []
    assert out.review == (
        "1 value on page 1 with a name the analyte table does not know, kept unverified"
    )


def _ocr_input(lines: list[str]) -> tuple[list[str], RouterOutput]:
    page = "\n".join(lines)
    confidence = "\n".join("".join(" " if ch == " " else "9" for ch in line) for line in lines)
    routed = RouterOutput(
        document_name="fax.tiff",
        media_type="image/tiff",
        page_count=1,
        ocr_pages=[OcrPage(page=1, confidence=confidence, mean_confidence=92, words=20)],
    )
    return [page], routed


async def _parse_ocr(lines: list[str], answer: dict[str, object] | None = None) -> ParserOutput:
    pages, routed = _ocr_input(lines)
    llm = MockResponseLLM(json.dumps(answer)) if answer else None
    config = StepConfig(extractor=ExtractorKind.LLM if llm else ExtractorKind.RULES)
    ctx = make_context(step="parser", pages=pages, config=config, llm=llm)
    return await parse(ctx, routed)


OCR_LINES = [
    "Test  Result  Units  Reference",
    "Glucose  98  mg/dL  70-99",
    "Hemoglobin Alc  6.1  %  4.0-5.6",
]


@pytest.mark.anyio
async def test_an_ocr_misread_name_is_kept_as_read_unverified_and_its_page_reviewed() -> None:
    out = await _parse_ocr(OCR_LINES)
    misread = named(out, "Hemoglobin Alc")
    assert misread.value == 6.1 and misread.canonical_name == ""  # never "corrected"
    assert misread.provenance is not None and misread.provenance.unverified
    assert UNKNOWN_NAME_WARNING in misread.warnings
    assert f"{MISREAD_PREFIX}Hemoglobin A1c (not corrected; a person confirms)" in misread.warnings
    glucose = named(out, "Glucose")
    assert glucose.provenance is not None and not glucose.provenance.unverified
    assert "1 value on page 1 with a name the analyte table does not know" in out.review
    assert "1 name on page 1 read by OCR close to a known analyte's" in out.review


@pytest.mark.anyio
async def test_a_model_that_renamed_a_misread_name_is_not_trusted_for_it() -> None:
    """The model answers the table's name for ``Hemoglobin Alc``: its claim is kept, but the
    name as read is no analyte the table knows, so the value stays unverified."""
    answer = {
        "biomarkers": [
            lab("Hemoglobin Alc", 6.1, "6.1", OCR_LINES[2], unit="%",
                canonical_name="Hemoglobin A1c", reference_low=4.0, reference_high=5.6,
                reference_text="4.0-5.6"),
        ]
    }  # fmt: skip
    out = await _parse_ocr(OCR_LINES[2:], answer)
    (found,) = out.extraction.biomarkers
    assert found.name == "Hemoglobin Alc"
    assert found.provenance is not None and found.provenance.unverified
    assert "close to a known analyte's" in out.review
