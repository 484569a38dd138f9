"""Issue 15's "What was seen": each layout as a real PDF, read by router pages + rules parser.

Every test here failed on the parser before issue 15 (a wrong value, a lost
row, page furniture read as a result, or a silent success with nothing found).
"""

from __future__ import annotations

import pytest

from saga.steps.context import Document
from saga.steps.models import Biomarker, Diagnosis, Flag, ParserOutput, RouterOutput
from saga.steps.pages import split_pages
from saga.steps.parser import parse
from saga.steps.testing import make_context
from tests.steps.pdfgen import Row, layout_pdf

H, L, N, U = Flag.HIGH, Flag.LOW, Flag.NORMAL, Flag.UNKNOWN
Seen = tuple[str, float | None, str, str, float | None, float | None, Flag]


async def read(pages: list[list[Row]], textless: list[int] | None = None) -> ParserOutput:
    """Render ``pages`` to a PDF, split it as the router does, and run the parser step."""
    document = Document("report.pdf", "application/pdf", layout_pdf(pages))
    texts = split_pages(document, max_pages=20)
    routed = RouterOutput(
        document_name="report.pdf",
        media_type="application/pdf",
        page_count=len(texts),
        textless_pages=textless or [],
    )
    return await parse(make_context(step="parser", pages=texts), routed)


def seen(found: Biomarker) -> Seen:
    """What a reader checks: name, value, value as written, unit, range bounds, flag."""
    value_text = f"{found.comparator}|{found.value_text}" if found.comparator else found.value_text
    return (
        found.name,
        found.value,
        value_text,
        found.unit,
        found.reference_low,
        found.reference_high,
        found.flag,
    )


def assert_spans(output: ParserOutput) -> None:
    """Every accepted value points at itself: ``line[start:end]`` is the value as written."""
    for found in output.extraction.biomarkers:
        where = found.provenance
        assert where is not None, found.name
        assert where.line[where.start : where.end] == found.value_text, found.name


@pytest.mark.anyio
async def test_unit_repeated_after_a_spaced_range() -> None:
    """``11.2 g/dL  12.0 - 15.5 g/dL  L`` gives 11.2, never the range's 15.5."""
    rows = [
        ((50, "Hemoglobin"), (25, "11.2 g/dL"), (40, "12.0 - 15.5 g/dL"), (10, "L")),
        ((50, "Albumin"), (25, "3.1 g/dL"), (40, "3.5 - 5.0 g/dL"), (10, "L")),
        ((50, "Sodium"), (25, "133 mmol/L"), (40, "136 - 145 mmol/L"), (10, "L")),
    ]
    out = await read([rows])
    assert [seen(b) for b in out.extraction.biomarkers] == [
        ("Hemoglobin", 11.2, "11.2", "g/dL", 12.0, 15.5, L),
        ("Albumin", 3.1, "3.1", "g/dL", 3.5, 5.0, L),
        ("Sodium", 133, "133", "mmol/L", 136, 145, L),
    ]
    assert_spans(out)
    assert out.review == ""


@pytest.mark.anyio
async def test_flags_in_words_brackets_and_arrows() -> None:
    """``(High) (Normal: 70 - 100)`` and ``13.3 ▼ (L) g/dL`` keep value, unit, range and flag."""
    out = await read(
        [
            [
                ((45, "Glucose"), (80, "155 mg/dL (High) (Normal: 70 - 100)")),
                "Hemoglobin 13.3 \u25bc (L) g/dL 13.5-17.5",
            ]
        ]
    )
    assert [seen(b) for b in out.extraction.biomarkers] == [
        ("Glucose", 155, "155", "mg/dL", 70, 100, H),
        ("Hemoglobin", 13.3, "13.3", "g/dL", 13.5, 17.5, L),
    ]
    assert_spans(out)


@pytest.mark.anyio
async def test_or_equal_references_and_censored_values() -> None:
    """``> OR = 60`` is a range; ``<0.3`` is value 0.3 with comparator ``<``."""
    out = await read(
        [
            [
                ((45, "eGFR"), (20, "72"), (35, "mL/min/1.73m2"), (30, "> OR = 60")),
                ((45, "CRP"), (20, "<0.3"), (35, "mg/L"), (30, "<5.0")),
            ]
        ]
    )
    assert [seen(b) for b in out.extraction.biomarkers] == [
        ("eGFR", 72, "72", "mL/min/1.73m2", 60, None, N),
        ("CRP", 0.3, "<|<0.3", "mg/L", None, 5.0, N),
    ]
    assert out.extraction.biomarkers[0].reference_text == "> OR = 60"
    assert_spans(out)


@pytest.mark.anyio
async def test_qualitative_results() -> None:
    """``NON-REACTIVE``, ``Negative`` and ``Positive`` results are kept as written."""
    out = await read(
        [
            [
                "HCV Antibody: NON-REACTIVE",
                "Hepatitis B surface antigen: Negative",
                ((50, "HIV 1/2 Antibody"), (35, "NON-REACTIVE"), (35, "NON-REACTIVE")),
                ((50, "Urine nitrite"), (35, "Positive"), (35, "Negative")),
            ]
        ]
    )
    assert [seen(b)[:3] for b in out.extraction.biomarkers] == [
        ("HCV Antibody", None, "NON-REACTIVE"),
        ("Hepatitis B surface antigen", None, "Negative"),
        ("HIV 1/2 Antibody", None, "NON-REACTIVE"),
        ("Urine nitrite", None, "Positive"),
    ]
    assert_spans(out)


GERMAN = [
    "Befund Blutbild und klinische Chemie",
    ((45, "Leukozyten"), (20, "7,500"), (20, "/nl"), (30, "4,0 - 10,0"), (10, "")),
    ((45, "Erythrozyten"), (20, "4,1"), (20, "/pl"), (30, "4,2 - 5,4"), (10, "\u2212")),
    ((45, "H\u00e4moglobin"), (20, "13,2"), (20, "g/dl"), (30, "12,0 - 16,0"), (10, "")),
    ((45, "H\u00e4matokrit"), (20, "38,5"), (20, "%"), (30, "37 - 47"), (10, "")),
    ((45, "MCV"), (20, "88"), (20, "fl"), (30, "80 - 96"), (10, "")),
    ((45, "Thrombozyten"), (20, "455"), (20, "/nl"), (30, "150 - 400"), (10, "+")),
    ((45, "Kalium"), (20, "4,3"), (20, "mmol/l"), (30, "3,5 - 5,1"), (10, "")),
    ((45, "Natrium"), (20, "139"), (20, "mmol/l"), (30, "135 - 145"), (10, "")),
    ((45, "Kreatinin"), (20, "0,9"), (20, "mg/dl"), (30, "0,5 - 1,0"), (10, "")),
]


@pytest.mark.anyio
async def test_german_report_with_decimal_commas() -> None:
    """Nine of nine: decimal commas (``7,500 /nl`` is 7.5), plus/minus flags, German names."""
    out = await read([GERMAN])
    found = out.extraction.biomarkers
    assert [(b.canonical_name, b.value, b.value_text, b.unit, b.flag) for b in found] == [
        ("White blood cell count", 7.5, "7,500", "/nl", N),
        ("Red blood cell count", 4.1, "4,1", "/pl", L),
        ("Hemoglobin", 13.2, "13,2", "g/dl", N),
        ("Hematocrit", 38.5, "38,5", "%", N),
        ("Mean corpuscular volume", 88, "88", "fl", N),
        ("Platelet count", 455, "455", "/nl", H),
        ("Potassium", 4.3, "4,3", "mmol/l", N),
        ("Sodium", 139, "139", "mmol/l", N),
        ("Creatinine", 0.9, "0,9", "mg/dl", N),
    ]
    assert [b.name for b in found[:3]] == ["Leukozyten", "Erythrozyten", "H\u00e4moglobin"]
    assert (found[0].reference_low, found[0].reference_high) == (4.0, 10.0)
    assert found[0].reference_text == "4,0 - 10,0"
    assert (found[2].loinc, found[0].loinc) == ("718-7", "6690-2")
    assert_spans(out)


@pytest.mark.anyio
async def test_side_by_side_results() -> None:
    """A two-column block gives both results of each line."""
    sodium = ((35, "Sodium"), (15, "140"), (20, "mmol/L"), (20, "135-145"))
    potassium = ((35, "Potassium"), (15, "4.1"), (20, "mmol/L"), (20, "3.5-5.1"))
    chloride = ((35, "Chloride"), (15, "101"), (20, "mmol/L"), (20, "98-107"))
    calcium = ((35, "Calcium"), (15, "9.4"), (20, "mg/dL"), (20, "8.6-10.3"))
    left_right: list[Row] = [sodium + potassium, chloride + calcium]
    out = await read([left_right])
    assert [seen(b)[:4] for b in out.extraction.biomarkers] == [
        ("Sodium", 140, "140", "mmol/L"),
        ("Potassium", 4.1, "4.1", "mmol/L"),
        ("Chloride", 101, "101", "mmol/L"),
        ("Calcium", 9.4, "9.4", "mg/dL"),
    ]
    assert_spans(out)
    assert out.extraction.coverage.ratio == 1.0


@pytest.mark.anyio
async def test_names_wrapped_dot_leaders_and_trailing_colons() -> None:
    """A name over three lines is one name; dot leaders and colons are not part of names."""
    out = await read(
        [
            [
                ((55, "Anti-cyclic citrullinated"), (20, ""), (20, "")),
                ((55, "peptide (high"), (20, ""), (20, "")),
                ((55, "sensitivity)"), (20, "12"), (20, "U/mL"), (20, "<20")),
                "Sodium ........................ 140 mmol/L 135-145",
                ((55, "Chloride:"), (20, "101"), (20, "mmol/L"), (20, "98-107")),
            ]
        ]
    )
    assert [seen(b)[:4] for b in out.extraction.biomarkers] == [
        ("Anti-cyclic citrullinated peptide (high sensitivity)", 12, "12", "U/mL"),
        ("Sodium", 140, "140", "mmol/L"),
        ("Chloride", 101, "101", "mmol/L"),
    ]
    assert_spans(out)


# a justified disclaimer whose words a layout extraction spreads into "cells"
DISCLAIMER: list[Row] = [
    ((8, "in"), (30, "investigations"), (30, "the"), (40, "results should be read")),
    "by a physician together with the clinical findings.",
]


def _page(number: int, rows: list[Row]) -> list[Row]:
    footer = f"Acme Reference Laboratory   Printed 05.03.2024 10:22   Page {number} of 3"
    return [
        "Acme Reference Laboratory",
        "Test  Result  Units  Reference",
        *rows,
        footer,
        *DISCLAIMER,
    ]


@pytest.mark.anyio
async def test_repeating_headers_and_footers_are_not_results() -> None:
    """``Printed … Page 1 of 3`` after diagnoses, disclaimers, ``Follow up in 2 weeks.``: none."""
    out = await read(
        [
            _page(1, ["Glucose  92  mg/dL  70-99", "Diagnoses", "Type 2 diabetes mellitus"]),
            _page(2, ["Sodium  140  mmol/L  135-145"]),
            _page(
                3, ["Comments", "Follow up in 2 weeks.", "Lipid results", "Follow up in 2 weeks."]
            ),
        ]
    )
    extraction = out.extraction
    assert [b.name for b in extraction.biomarkers] == ["Glucose", "Sodium"]
    assert extraction.diagnoses == [Diagnosis(name="Type 2 diabetes mellitus")]
    assert extraction.rejected == [] and out.review == ""


@pytest.mark.anyio
async def test_disclaimer_words_under_a_table_are_not_results() -> None:
    """On a single page (nothing repeats), a disclaimer's ``in  investigations`` is no result."""
    table = ["Test  Result  Units  Reference", "Glucose  92  mg/dL  70-99"]
    out = await read([[*table, *DISCLAIMER]])
    assert [b.name for b in out.extraction.biomarkers] == ["Glucose"]


@pytest.mark.anyio
async def test_narrative_report() -> None:
    """A value, unit and reference in a sentence, and ``Diagnosis:`` inside prose, are read."""
    out = await read(
        [
            [
                "Discharge summary",
                "Admitted with fever. C-reactive protein 48 mg/L (ref <5) on day one;",
                "she improved on antibiotics. Diagnosis: community-acquired pneumonia. See",
                "2 weeks with the GP.",
            ]
        ]
    )
    assert [seen(b) for b in out.extraction.biomarkers] == [
        ("C-reactive protein", 48, "48", "mg/L", None, 5, H)
    ]
    assert out.extraction.diagnoses == [Diagnosis(name="community-acquired pneumonia")]
    assert_spans(out)
    assert out.review == ""


@pytest.mark.anyio
async def test_nothing_extracted_is_marked_for_review() -> None:
    """A fax cover page with scanned pages behind it does not end as a plain success."""
    cover = ["FAX COVER SHEET", "To: Dr. Example", "Pages: 3 including this cover"]
    out = await read([cover], textless=[2, 3])
    assert out.extraction.biomarkers == []
    assert out.review == "nothing was extracted; pages 2, 3 had no text"


@pytest.mark.anyio
async def test_unread_result_lines_lower_coverage_and_ask_for_review() -> None:
    """Result-like lines no result explains bring coverage under 80%: review, with the figures."""
    rows: list[Row] = [
        "Glucose  92  mg/dL  70-99",
        "Ammonia level 45 umol/L was checked 11-35 twice",
        "Pyruvate 0.08 mmol/L see comment 0.03-0.10 (venous)",
        "Osmolality 290 mOsm/kg taken 275-295 at noon",
    ]
    out = await read([rows])
    assert out.extraction.coverage.candidate_lines == 4
    assert out.extraction.coverage.explained_lines == 1
    assert out.review == "coverage 25% (1 of 4 result-like lines) under 90%"
