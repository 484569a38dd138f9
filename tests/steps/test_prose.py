"""Narrative sentences, result lists, result cards, side-by-side rows and wrapped names."""

from __future__ import annotations

import pytest

from saga.steps.cards import card_rows
from saga.steps.extract_rules import extract_rules
from saga.steps.lab_cells import cells_of
from saga.steps.lab_rows import clean_cells, parse_rows
from saga.steps.models import Flag
from saga.steps.narrative import narrative_rows


def values(text: str) -> list[tuple[str, float | None, str]]:
    """(name, value, unit) of the results narrative_rows reads in ``text``."""
    return [(r.biomarker.name, r.biomarker.value, r.biomarker.unit) for r in narrative_rows(text)]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Her CRP was 48 mg/L (ref <5) today.", [("CRP", 48, "mg/L")]),
        ("glucose level of 105 mg/dL", [("glucose", 105, "mg/dL")]),
        ("Labs: Na 134, K 3.4, Cr 2.1.", [("Na", 134, ""), ("K", 3.4, ""), ("Cr", 2.1, "")]),
        ("Potassium 4.1.", []),  # a lone unit-less number is not a list
        ("HbA1c of 48 mmol/mol or above is diabetes", []),  # a threshold
        ("keep LDL below 100 mg/dL", []),
        ("Follow up in 2 weeks.", []),
        ("Metformin 500 mg twice daily", []),  # not an analyte
        ("Sodium 140 weeks", []),  # not a unit sodium is reported in
    ],
)
def test_narrative_results(text: str, expected: list[tuple[str, float, str]]) -> None:
    """Known analyte, number and fitting unit (or a list), never thresholds or dosing."""
    assert values(text) == expected


def test_narrative_wraps_between_name_and_unit() -> None:
    """A sentence broken after the value still gives the unit and the value's own line."""
    found = extract_rules(
        ["Seen today. Her white cell count 13.2\nx10^9/L (ref 4.0-11.0) on arrival."]
    )
    [wbc] = found.biomarkers
    assert (wbc.value, wbc.unit, wbc.reference_text) == (13.2, "x10^9/L", "4.0-11.0")
    assert wbc.provenance is not None and wbc.provenance.line.endswith("13.2")


def test_cards_pair_names_values_ranges_and_status() -> None:
    """Names over values, then ``Reference:`` and status cells, column by column."""
    rows, used = card_rows(
        "LDL Cholesterol  Vitamin D, 25-OH",
        "162 mg/dL  18 ng/mL",
        ["Reference: 0-99 mg/dL  Reference: 30-100 ng/mL", "Above range  Below range"],
    )
    assert used == 2
    assert [(r.biomarker.name, r.biomarker.value, r.biomarker.reference_high, r.biomarker.flag)
            for r in rows] == [("LDL Cholesterol", 162, 99, Flag.HIGH),
                               ("Vitamin D, 25-OH", 18, 100, Flag.LOW)]  # fmt: skip
    assert card_rows("Ferritin  Iron", "96 ng/mL", []) == ([], 0)  # columns must pair up


def test_side_by_side_rows_split_at_names_not_units() -> None:
    """``MCV 89.8 fL 80-100  ALT 19 U/L 7-52``: the unit fL stays with MCV."""
    rows = parse_rows("MCV  89.8  fL  80-100  ALT  19  U/L  7-52")
    assert [(r.biomarker.name, r.biomarker.unit) for r in rows] == [("MCV", "fL"), ("ALT", "U/L")]


def test_previous_results_and_lab_codes_are_not_this_result() -> None:
    """A previous result with its date, and a trailing performing-lab code, are dropped."""
    cells = cells_of("WBC  7.9  8.2  09/14/2023  x10E3/uL  3.4-10.8  01")
    assert [c.text for c in clean_cells(cells)] == ["WBC", "7.9", "x10E3/uL", "3.4-10.8"]


def test_names_wrapped_below_their_row() -> None:
    """A qualifier or the rest of a name printed under the value joins that name."""
    page = "\n".join(
        [
            "Gamma-Glutamyl  31  U/L  8-61",
            "Transferase",
            "Thyroid Stimulating Hormone  2.31  mIU/L  0.45-4.50",
            "(3rd generation)",
            "Free T3  3.1  pg/mL  2.3-4.2",
            "Iron Studies",
            "Iron  92  ug/dL  60-170",
        ]
    )
    assert [b.name for b in extract_rules([page]).biomarkers] == [
        "Gamma-Glutamyl Transferase",
        "Thyroid Stimulating Hormone (3rd generation)",
        "Free T3",
        "Iron",
    ]
