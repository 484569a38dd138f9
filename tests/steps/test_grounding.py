"""Grounding: a model's value is accepted only where the cited page writes it (tables)."""

from __future__ import annotations

from typing import Any

import pytest

from saga.steps.grounding import crossed, ground, read_number
from saga.steps.llm_prompt import LabResult
from saga.steps.models import Biomarker, Rejected
from saga.steps.page_layout import uses_decimal_comma

US_TABLE = [
    "Complete Blood Count",
    "Hemoglobin  11.2 g/dL  12.0 - 15.5 g/dL  L",
    "Albumin  3.1 g/dL  3.5 - 5.0 g/dL  L",
    "Platelets  250,000 /uL  150,000 - 400,000",
    "Glucose  100 mg/dL  70-100",
    "Hepatitis B surface Ag  <0.3  IU/mL",
    "HIV 1/2 Ab  NON-REACTIVE",
    "Base excess  -2.1 mmol/L",
    "WBC  7.5 x10^9/L",
    "Collected 12.03.2024 08:15",
]
GERMAN = [
    "Blutbild",
    "Hämoglobin  13,2 g/dl  12,0 - 16,0",
    "Leukozyten  7,500 /nl  4,0 - 10,0",
    "Thrombozyten  1.250 /nl",
]
STACKED = ["Hemoglobin A1c", "6.1 %  4.0 - 5.6  H", "Glucose", "95 mg/dL"]
SIDE_BY_SIDE = ["Sodium  140 mmol/L    Potassium  4.2 mmol/L"]


def result(name: str, value: float | None, line: str = "", page: int = 1, **more: Any) -> LabResult:
    return LabResult(name=name, value=value, line=line, page=page, **more)


def grounded(outcome: Biomarker | Rejected) -> Biomarker:
    assert isinstance(outcome, Biomarker), outcome
    assert outcome.provenance is not None
    return outcome


def quoted(outcome: Biomarker | Rejected) -> str:
    """The value as the provenance span shows it in the source line."""
    b = grounded(outcome)
    assert b.provenance is not None
    return b.provenance.line[b.provenance.start : b.provenance.end]


@pytest.mark.parametrize(
    ("lines", "claim", "span", "line_no"),
    [
        (US_TABLE, result("Hemoglobin", 11.2, US_TABLE[1]), "11.2", 1),
        (US_TABLE, result("Platelets", 250000, "Platelets 250,000 /uL"), "250,000", 3),
        (US_TABLE, result("Glucose", 100, US_TABLE[4]), "100", 4),
        (US_TABLE, result("HBsAg", 0.3, US_TABLE[5], comparator="<"), "<0.3", 5),
        (US_TABLE, result("HBsAg", None, US_TABLE[5], value_text="<0.3"), "<0.3", 5),
        (US_TABLE, result("HIV 1/2 Ab", None, "", value_text="Non Reactive"), "NON-REACTIVE", 6),
        (US_TABLE, result("Base excess", -2.1, US_TABLE[7]), "-2.1", 7),
        (GERMAN, result("Hämoglobin", 13.2, GERMAN[1]), "13,2", 1),
        (GERMAN, result("Leukozyten", 7.5, GERMAN[2]), "7,500", 2),
        (GERMAN, result("Thrombozyten", 1250, GERMAN[3]), "1.250", 3),
        (STACKED, result("Hemoglobin A1c", 6.1, "6.1 % 4.0-5.6 H"), "6.1", 1),
        (STACKED, result("Glucose", 95, ""), "95", 3),
    ],
)
def test_values_written_on_the_page_are_grounded(
    lines: list[str], claim: LabResult, span: str, line_no: int
) -> None:
    """The value is found as written (commas, censoring, words, signs) with its line and span."""
    decimal_comma = uses_decimal_comma(lines)
    outcome = ground(claim, {1: lines}, decimal_comma=decimal_comma)
    assert quoted(outcome) == span
    b = grounded(outcome)
    assert b.provenance is not None and b.provenance.line == lines[line_no]
    assert b.provenance.page == 1 and b.value_text == span


@pytest.mark.parametrize(
    ("lines", "claim", "why"),
    [
        (US_TABLE, result("Hemoglobin", 13.2, US_TABLE[1]), "13.2 does not occur on page 1"),
        (US_TABLE, result("Platelets", 250, US_TABLE[3]), "250 does not occur"),
        (US_TABLE, result("HBsAg", 0.3, US_TABLE[5]), "0.3 does not occur"),
        (US_TABLE, result("Albumin", 7.5, "Albumin 7.5 g/dL"), "not on a line with Albumin"),
        (US_TABLE, result("Base excess", 2.1, US_TABLE[7]), "2.1 does not occur"),
        (US_TABLE, result("WBC", 9, US_TABLE[8]), "9 does not occur"),
        (US_TABLE, result("Date", 12.03, US_TABLE[9]), "12.03 does not occur"),
        (US_TABLE, result("HIV", None, US_TABLE[6], value_text="Positive"), "Positive does not"),
        (US_TABLE, result("Hemoglobin", 11.2, US_TABLE[1], page=2), "cites page 2, which it"),
        (US_TABLE, result("Hemoglobin", None, US_TABLE[1]), "gives no value"),
        (GERMAN, result("Leukozyten", 7500, GERMAN[2]), "7500 does not occur"),
        (SIDE_BY_SIDE, result("Potassium", 140, SIDE_BY_SIDE[0]), "140 stands before Potassium"),
    ],
)
def test_values_not_on_the_cited_page_are_rejected_as_ungrounded(
    lines: list[str], claim: LabResult, why: str
) -> None:
    """A value the page does not state (or not for that analyte) is rejected, with a reason."""
    outcome = ground(claim, {1: lines}, decimal_comma=uses_decimal_comma(lines))
    assert isinstance(outcome, Rejected), outcome
    assert outcome.reason.startswith("ungrounded: ") and why in outcome.reason
    assert outcome.name == claim.name


def test_the_quoted_line_wins_among_lines_holding_the_value() -> None:
    """Two lines hold 95: the one naming the analyte is the provenance, not the first."""
    lines = ["Sodium  95 (low?)", "Glucose  95 mg/dL  70 - 99"]
    outcome = ground(result("Glucose", 95, lines[1]), {1: lines}, decimal_comma=False)
    b = grounded(outcome)
    assert b.provenance is not None and b.provenance.line == lines[1]


def test_a_value_equal_to_its_upper_bound_spans_the_result_not_the_bound() -> None:
    """``Glucose 100 mg/dL 70-100``: the span is the result column, the first 100."""
    outcome = ground(result("Glucose", 100, US_TABLE[4]), {1: US_TABLE}, decimal_comma=False)
    b = grounded(outcome)
    assert b.provenance is not None and b.provenance.start == US_TABLE[4].index("100")


def test_only_the_lines_the_model_was_given_count() -> None:
    """A value on a part of the page the request did not carry is ungrounded."""
    outcome = ground(result("Hemoglobin", 11.2), {1: US_TABLE[3:]}, decimal_comma=False)
    assert isinstance(outcome, Rejected) and "does not occur on page 1" in outcome.reason


@pytest.mark.parametrize(
    ("numeral", "decimal_comma", "number"),
    [
        ("13.2", False, 13.2),
        ("13,2", False, 13.2),
        ("13,2", True, 13.2),
        ("7,500", False, 7500.0),
        ("7,500", True, 7.5),
        ("0,500", False, 0.5),
        ("1.250", True, 1250.0),
        ("1.250", False, 1.25),
        ("1,250.5", False, 1250.5),
        ("1.250,5", True, 1250.5),
        ("1,250,000", False, 1250000.0),
        ("12.03.2024", False, None),
        ("1,25,000", False, None),
        ("42", True, 42.0),
    ],
)
def test_numerals_read_as_the_document_writes_them(
    numeral: str, decimal_comma: bool, number: float | None
) -> None:
    """Decimal and thousands marks follow the document's convention; dates read as nothing."""
    assert read_number(numeral, decimal_comma=decimal_comma) == number


def test_a_value_past_another_analytes_name_is_crossed() -> None:
    """Side-by-side columns: Sodium's claimed 4.2 stands past Potassium's name, so it is
    Potassium's; Sodium 140 and Potassium 4.2 stand."""
    line = SIDE_BY_SIDE
    claims = [result("Sodium", 140, line[0]), result("Sodium", 4.2, line[0]),
              result("Potassium", 4.2, line[0])]  # fmt: skip
    grounded_all = [grounded(ground(c, {1: line}, decimal_comma=False)) for c in claims]
    assert crossed(grounded_all) == {1}
