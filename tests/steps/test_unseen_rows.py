"""Issue 28: rows nobody wrote a rule for, as real PDFs read by router pages + rules parser.

Word ranges and word flags, lines no rule reads (counted, not dropped), reference
categories and comments under a result (a note, never a result), a trailing lab
code, glued flags, a cumulative report, and the synonym table in more languages.
"""

from __future__ import annotations

import pytest

from saga.steps.analytes import loinc_for
from saga.steps.models import Flag, PreviousValue
from saga.steps.synonyms import canonical_name
from tests.steps.test_unseen_checks import named, read, row

pytestmark = pytest.mark.anyio


async def test_word_ranges_and_word_flags_are_read() -> None:
    """``212  HIGH  mg/dL  Less than 200`` and friends: value, range and flag (before: no
    result, no rejection, and not even counted as result-like)."""
    out = await read(
        [[
            "Cholesterol, Total  212  HIGH  mg/dL  Less than 200",
            "HDL Cholesterol  36  LOW  mg/dL  Greater than 39",
            "Glucose  88  mg/dL  70 to 99",
            "PSA  2.2  ng/mL  Less than or equal to 4.0",
            "Potassium  6.9  CRITICAL  mmol/L  3.5-5.1",
        ]]
    )  # fmt: skip
    seen = {
        b.name: (b.value, b.reference_low, b.reference_high, b.flag)
        for b in out.extraction.biomarkers
    }
    assert seen == {
        "Cholesterol, Total": (212, None, 200, Flag.HIGH),
        "HDL Cholesterol": (36, 39, None, Flag.LOW),
        "Glucose": (88, 70, 99, Flag.NORMAL),
        "PSA": (2.2, None, 4.0, Flag.NORMAL),
        "Potassium": (6.9, 3.5, 5.1, Flag.HIGH),
    }
    assert out.review == ""


async def test_a_line_no_rule_reads_is_counted_and_flagged() -> None:
    """The counter does not ask the rules: ``212 HIGH`` or ``118L`` is a result-like line
    whether or not anything read it, and a document whose lines went unread is reviewed."""
    out = await read(
        [[
            "Sodium  140  mmol/L  135-145",
            "Osmolality  301H  see comment",
            "Zinc  64  LOW  (fasting sample)",
        ]]
    )  # fmt: skip
    coverage = out.extraction.coverage
    assert (coverage.candidate_lines, coverage.explained_lines) == (3, 1)
    assert [u.line for u in coverage.unexplained] == [
        "Osmolality  301H  see comment",
        "Zinc  64  LOW  (fasting sample)",
    ]
    assert out.review.startswith("coverage 33% (1 of 3 result-like lines)")


async def test_categories_and_comments_are_notes_never_results() -> None:
    """``High: >=240`` under a result, ``Deficiency: <20 ng/mL`` under vitamin D: attached to
    the result above as its note, never returned as biomarkers, and counted as explained."""
    out = await read(
        [[
            row("Total Cholesterol", "219", "mg/dL", "< 200", "H"),
            row("", "Desirable: < 200"),
            row("", "Borderline High: 200 - 239"),
            row("", "High: >= 240"),
            row("Vitamin D, 25-OH", "17", "ng/mL", "30 - 100", "L"),
            row("", "Deficiency: <20 ng/mL"),
            row("", "Optimal: > or = 30 ng/mL"),
            row("", "Toxicity: >100"),
        ]]
    )  # fmt: skip
    assert [b.name for b in out.extraction.biomarkers] == ["Total Cholesterol", "Vitamin D, 25-OH"]
    cholesterol, vitamin = out.extraction.biomarkers
    assert "Borderline High: 200 - 239" in cholesterol.note and "High: >= 240" in cholesterol.note
    assert "Deficiency: <20 ng/mL" in vitamin.note and "Toxicity: >100" in vitamin.note
    assert out.review == "" and out.extraction.coverage.ratio == 1.0


async def test_a_trailing_lab_code_and_glued_flags() -> None:
    """``... 30-100 ng/mL  EZ`` (a performing-lab code) and ``118L`` / ``11.8H`` (flags glued
    to values) are read; before, the code column stopped every row of the report."""
    out = await read(
        [[
            "Vitamin D, 25-Hydroxy  24  L  ng/mL  30-100 ng/mL  EZ",
            "Ferritin  88  ng/mL  16-232  EZ",
            "Sodium  118L  mmol/L  135-145",
            "Hemoglobin  17.8H  g/dL  13.2-17.1",
        ]]
    )  # fmt: skip
    seen = {b.name: (b.value, b.flag) for b in out.extraction.biomarkers}
    assert seen == {
        "Vitamin D, 25-Hydroxy": (24, Flag.LOW),
        "Ferritin": (88, Flag.NORMAL),
        "Sodium": (118, Flag.LOW),
        "Hemoglobin": (17.8, Flag.HIGH),
    }


async def test_a_cumulative_report_takes_the_latest_column() -> None:
    """Three dated columns, the newest first: the value is the current column's, the others
    are ``previous`` with their dates; a row whose empty cell cannot be placed is not read
    (before: ``Platelets 388`` was taken as the name and 341, last time's, as the value)."""
    out = await read(
        [[
            "Test  04/03/24  11/01/24  20/10/23  Units  Range",
            "Haemoglobin  109L  121  128  g/L  115-165",
            "Creatinine  96H  84  79  umol/L  45-90",
            "Platelets  388  341  x10^9/L  150-400",
        ]]
    )  # fmt: skip
    assert [b.name for b in out.extraction.biomarkers] == ["Haemoglobin", "Creatinine"]
    hb = named(out, "Haemoglobin")
    assert (hb.value, hb.flag) == (109, Flag.LOW)
    assert hb.previous == [
        PreviousValue(value_text="121", date="11/01/24"),
        PreviousValue(value_text="128", date="20/10/23"),
    ]
    assert "coverage" in out.review  # the unplaced Platelets row is counted, not guessed


SYNONYMS = [  # name as printed -> canonical name, a unit, the LOINC code ("" when none)
    ("Plaquetas", "Platelet count", "x10^3/uL", "777-3"),
    ("Leucocitos", "White blood cell count", "10^9/L", "6690-2"),
    ("Glucosa", "Glucose", "mg/dL", "2345-7"),
    ("Triglicéridos", "Triglycerides", "mg/dL", "2571-8"),
    ("Ferritina", "Ferritin", "ng/mL", "2276-4"),
    ("Hémoglobine", "Hemoglobin", "g/dL", "718-7"),
    ("Globules blancs", "White blood cell count", "G/L", "6690-2"),
    ("Emoglobina", "Hemoglobin", "g/dL", "718-7"),
    ("Piastrine", "Platelet count", "x10E3/uL", "777-3"),
    ("Colesterolo totale", "Total cholesterol", "mg/dL", "2093-3"),
    ("Hemácias", "Red blood cell count", "10^12/L", "789-8"),
    ("Glicose", "Glucose", "mg/dL", "2345-7"),
    ("Leukocyten", "White blood cell count", "10^9/L", "6690-2"),
    ("Trombocyten", "Platelet count", "10^9/L", "777-3"),
    ("Hemoglobine", "Hemoglobin", "mmol/L", ""),
    ("B-Hb", "Hemoglobin", "g/L", "718-7"),
    ("B-LPK", "White blood cell count", "x10⁹/L", "6690-2"),
    ("B-TPK", "Platelet count", "X 10³ / µL", "777-3"),
    ("fP-Glukos", "Glucose", "mmol/L", ""),
    ("S-TSH", "Thyroid stimulating hormone", "mIE/L", "3016-3"),
    ("P-Kreatinin", "Creatinine", "µmol/L", ""),
    ("Hæmoglobin", "Hemoglobin", "g/L", "718-7"),
    ("Trombocytter", "Platelet count", "10^9/L", "777-3"),
    ("Thrombozyten", "Platelet count", "/nl", "777-3"),
    ("Leukozyten", "White blood cell count", "Tsd/µl", "6690-2"),
    ("Proteína C reactiva", "C-reactive protein", "mg/L", "1988-5"),
    ("Vitamina D", "Vitamin D (25-hydroxy)", "ng/mL", "1989-3"),
    ("Ácido úrico", "Uric acid", "mg/dL", ""),
]


@pytest.mark.parametrize(("name", "canonical", "unit", "loinc"), SYNONYMS)
async def test_names_in_more_languages(name: str, canonical: str, unit: str, loinc: str) -> None:
    """Spanish, French, Italian, Portuguese, Dutch, Nordic (with B-/P-/S-/fP- prefixes) and
    German names, with their canonical name and the LOINC code where the unit fits it."""
    assert canonical_name(name) == canonical
    assert loinc_for(canonical, unit) == loinc


def test_a_urine_prefix_is_another_test() -> None:
    """``U-Albumin`` is urine albumin: the prefix is not stripped, the name stays unknown."""
    assert canonical_name("U-Albumin") is None and canonical_name("P-Albumin") == "Albumin"


async def test_a_previous_column_named_in_another_language_is_never_the_value() -> None:
    """``Análise | Anterior | Resultado | Unidade | Valores ref.``: the earlier result's column
    stands before the current one; the value is the ``Resultado`` cell, the other is kept
    as ``previous`` (before: the header was not recognised and the rows went by content)."""
    widths = (40, 22, 22, 26, 36)
    HEAD = ("Análise", "Anterior", "Resultado", "Unidade", "Valores ref.")
    out = await read(
        [[
            tuple(zip(widths, HEAD, strict=True)),
            tuple(zip(widths, ("Hemoglobina", "13,1", "12,8", "g/dL", "12,0 - 15,0"), strict=True)),
            tuple(zip(widths, ("Quuxase", "198", "210", "U/L", "150 - 400"), strict=True)),
        ]]
    )  # fmt: skip
    seen = {b.name: (b.value, b.reference_low, b.previous) for b in out.extraction.biomarkers}
    assert seen == {
        "Hemoglobina": (12.8, 12.0, [PreviousValue(value_text="13,1")]),
        "Quuxase": (210, 150, [PreviousValue(value_text="198")]),
    }
