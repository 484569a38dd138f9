"""Coverage of result-like lines, page furniture, decimal commas, and the review sentence."""

from __future__ import annotations

import pytest

from saga.steps.checks import NO_UNIT_WARNING
from saga.steps.coverage import is_result_like, measure, review_reason
from saga.steps.models import Biomarker, Coverage, Diagnosis, Extraction, Provenance, Rejected
from saga.steps.page_layout import document_lines, is_page_furniture, uses_decimal_comma


@pytest.mark.parametrize(
    ("line", "like"),
    [
        ("Glucose  92  mg/dL  70-99", True),
        ("Sodium 140 mmol/L", True),
        ("HbA1c 6.1%", True),
        ("eGFR  > 60", True),
        ("Collected: 2024-03-04 08:30", False),
        ("Specimen ID: 061-477-3391-0", False),
        ("Reported : 04/Mar/2024 06:18 PM", False),
        ("Phone 555-1234", False),
        ("Follow up in 2 weeks.", False),
        ("Reference: 0-99 mg/dL", False),
        ("Interpretation: HbA1c 6.5% and above is diagnostic", False),
        ("HbA1c of 48 mmol/mol or above is consistent with diabetes", False),
    ],
)
def test_result_like_lines(line: str, like: bool) -> None:
    """A number with a unit or a range is result-like; dates, ids, references, commentary not."""
    assert is_result_like(line) is like


def test_coverage_counts_lines_that_results_cite() -> None:
    """Accepted and rejected results explain their lines; the rest are sampled with pages."""
    pages = ["Glucose  92  mg/dL  70-99\nSodium  140  mmol/L  135-145\nUrea  5.4  mmol/L  2.5-7.8"]
    cite = Provenance(page=1, line="Glucose  92  mg/dL  70-99", start=9, end=11)
    extraction = Extraction(
        biomarkers=[Biomarker(name="Glucose", provenance=cite)],
        rejected=[
            Rejected(
                name="Sodium",
                reason="r",
                provenance=Provenance(page=1, line="Sodium  140  mmol/L  135-145"),
            )
        ],
    )
    coverage = measure(pages, extraction)
    assert (coverage.candidate_lines, coverage.explained_lines) == (3, 2)
    assert coverage.unexplained == [Provenance(page=1, line="Urea  5.4  mmol/L  2.5-7.8")]


@pytest.mark.parametrize(
    ("extraction", "textless", "reason"),
    [
        (Extraction(diagnoses=[Diagnosis(name="x")]), [], ""),
        (Extraction(), [], "nothing was extracted"),
        (Extraction(), [2, 3], "nothing was extracted; pages 2, 3 had no text"),
        (
            Extraction(
                diagnoses=[Diagnosis(name="x")],
                coverage=Coverage(candidate_lines=12, explained_lines=5),
            ),
            [],
            "coverage 42% (5 of 12 result-like lines) under 80%",
        ),
        (
            Extraction(diagnoses=[Diagnosis(name="x")], rejected=[Rejected(name="Hb", reason="r")]),
            [4],
            "1 value rejected by the checks; page 4 had no text",
        ),
        (
            Extraction(
                biomarkers=[
                    Biomarker(name="Cr", value=2.1, warnings=[NO_UNIT_WARNING]),
                    Biomarker(name="K", value=3.4, warnings=[NO_UNIT_WARNING]),
                ]
            ),
            [],
            "2 values without a unit",
        ),
    ],
)
def test_review_reason_is_one_sentence(
    extraction: Extraction, textless: list[int], reason: str
) -> None:
    """Nothing found, low coverage, rejected or unit-less values, textless pages: each a reason."""
    assert review_reason(extraction, textless, 0.8) == reason


@pytest.mark.parametrize(
    ("pages", "comma"),
    [
        (["Hämoglobin 13,2 g/dl", "Leukozyten 7,500 /nl"], True),
        (["Platelets 1,250 K/uL", "Glucose 5.4 mmol/L"], False),
        (["Datum 05.03.2024 Kalium 4,3 mmol/l"], True),  # a date is not a decimal point
        (["no numbers here"], False),
    ],
)
def test_decimal_comma_is_decided_per_document(pages: list[str], comma: bool) -> None:
    """A document that writes more ``13,2`` than ``13.2`` uses commas as decimals."""
    assert uses_decimal_comma(pages) is comma


def test_furniture_and_repeated_edges_are_dropped_but_table_headers_kept() -> None:
    """``Page 2 of 3`` anywhere and lines repeated at page edges go; a kept header stays."""
    page = "Acme Lab letterhead line\nTest  Result  Units\nGlucose  92  mg/dL\nPrinted Page {} of 2"
    pages = [page.format(1), page.format(2).replace("92", "95")]
    kept = document_lines(pages, keep=lambda line: line.startswith("Test"))
    assert [[line.raw for line in lines] for lines in kept] == [
        ["Test  Result  Units", "Glucose  92  mg/dL"],
        ["Test  Result  Units", "Glucose  95  mg/dL"],
    ]
    assert is_page_furniture("Seite 2 von 3") and not is_page_furniture("Sodium 140")
