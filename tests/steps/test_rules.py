"""The offline rules extractor: line layouts, ranges, flags, sections, whole documents."""

from __future__ import annotations

import pytest

from saga.steps.context import Document
from saga.steps.extract_rules import extract_rules
from saga.steps.lab_rows import parse_row
from saga.steps.lab_values import parse_range
from saga.steps.models import Biomarker, Diagnosis, Extraction, Flag, GeneticFinding, Procedure
from saga.steps.pages import split_pages
from saga.steps.sections import Section, diagnosis, genetic, heading, procedure
from tests.steps.compare import core
from tests.steps.pdfgen import make_pdf

H, L, N, U = Flag.HIGH, Flag.LOW, Flag.NORMAL, Flag.UNKNOWN


def bm(
    name: str,
    value: float | None,
    text: str,
    unit: str = "",
    low: float | None = None,
    high: float | None = None,
    ref: str = "",
    flag: Flag = U,
    comparator: str = "",
) -> Biomarker:
    return Biomarker(
        name=name,
        value=value,
        value_text=text,
        comparator=comparator,
        unit=unit,
        reference_low=low,
        reference_high=high,
        reference_text=ref,
        flag=flag,
    )


ROWS = [
    # (a) aligned columns
    (
        "Hemoglobin A1c  6.1  %  4.0-5.6  H",
        bm("Hemoglobin A1c", 6.1, "6.1", "%", 4.0, 5.6, "4.0-5.6", H),
    ),
    (
        "Glucose, Fasting  105  mg/dL  70 - 99",
        bm("Glucose, Fasting", 105, "105", "mg/dL", 70, 99, "70 - 99", H),
    ),
    (
        "WBC  11.2  x10^3/uL  4.0-11.0  *",
        bm("WBC", 11.2, "11.2", "x10^3/uL", 4.0, 11.0, "4.0-11.0", H),
    ),
    (
        "Urine Protein  Negative  Negative",
        bm("Urine Protein", None, "Negative", ref="Negative", flag=N),
    ),
    ("Nitrite  Positive  Negative  A", bm("Nitrite", None, "Positive", ref="Negative", flag=U)),
    # (b) colon style
    (
        "Hemoglobin A1c: 6.1 % (ref 4.0-5.6)",
        bm("Hemoglobin A1c", 6.1, "6.1", "%", 4.0, 5.6, "4.0-5.6", H),
    ),
    ("HbA1c: 6.1% (< 5.7)", bm("HbA1c", 6.1, "6.1", "%", None, 5.7, "< 5.7", H)),
    ("CRP: <0.5 mg/L [0.0-5.0]", bm("CRP", 0.5, "<0.5", "mg/L", 0.0, 5.0, "0.0-5.0", U, "<")),
    (
        "Ferritin: 9 ng/mL Reference range: 15 - 150 L",
        bm("Ferritin", 9, "9", "ng/mL", 15, 150, "15 - 150", L),
    ),
    # single spaces, flag right after the value, units after the range
    ("Glucose 105 H mg/dL 70-99", bm("Glucose", 105, "105", "mg/dL", 70, 99, "70-99", H)),
    (
        "25-OH Vitamin D 18 ng/mL 30-100",
        bm("25-OH Vitamin D", 18, "18", "ng/mL", 30, 100, "30-100", L),
    ),
    ("Omega 3 Index 5.2 >8.0 %", bm("Omega 3 Index", 5.2, "5.2", "%", 8.0, None, ">8.0", L)),
    (
        "Platelets 1,250 K/uL 150-450",
        bm("Platelets", 1250, "1,250", "K/uL", 150, 450, "150-450", H),
    ),
    (
        "LDL Cholesterol 99 mg/dL <=100",
        bm("LDL Cholesterol", 99, "99", "mg/dL", None, 100, "<=100", N),
    ),
    (
        "Base excess -1.5 mmol/L -2.0 - 2.0",
        bm("Base excess", -1.5, "-1.5", "mmol/L", -2.0, 2.0, "-2.0 - 2.0", N),
    ),
    # (d) explicit flags win over the range; ranges at the strict edge
    ("TSH 2.1 mIU/L 0.4-4.0 High", bm("TSH", 2.1, "2.1", "mIU/L", 0.4, 4.0, "0.4-4.0", H)),
    (
        "Triglycerides 150 mg/dL < 150",
        bm("Triglycerides", 150, "150", "mg/dL", None, 150, "< 150", H),
    ),
    ("HDL 40 mg/dL > 40", bm("HDL", 40, "40", "mg/dL", 40, None, "> 40", L)),
    ("HDL 40 mg/dL >= 40", bm("HDL", 40, "40", "mg/dL", 40, None, ">= 40", N)),
    ("Sodium 140 mmol/L", bm("Sodium", 140, "140", "mmol/L")),
]


@pytest.mark.parametrize(("line", "expected"), ROWS, ids=[row[0] for row in ROWS])
def test_lab_row_layouts(line: str, expected: Biomarker) -> None:
    """Aligned, colon and single-space rows read to the exact Biomarker and its value's span."""
    row = parse_row(line)
    assert row is not None and row.biomarker == expected
    assert line[row.start : row.end] == expected.value_text


@pytest.mark.parametrize(
    "line",
    [
        "Patient ID 12345 ab",
        "Age: 45 years",
        "DOB: 01/15/1970",
        "Repeat in 3 months",
        "Page 1 of 3",
        "Collected: 2024-03-04 08:30",
        "Glucose 105",  # a bare "name number" is too often prose
        "Fasting 12 hours before the draw",
        "Test  Result  Unit  Reference  Flag",
    ],
)
def test_lines_that_are_not_lab_rows(line: str) -> None:
    """Administrative lines, prose and headers are not read as results."""
    assert parse_row(line) is None


@pytest.mark.parametrize(
    ("text", "low", "high"),
    [
        ("4.0-5.6", 4.0, 5.6),
        ("4.0 - 5.6", 4.0, 5.6),
        ("1 to 3", 1, 3),
        ("< 5.7", None, 5.7),
        ("> 40", 40, None),
        ("(ref 70-99)", 70, 99),
        ("[<=200]", None, 200),
    ],
)
def test_reference_ranges(text: str, low: float | None, high: float | None) -> None:
    """Range forms give their numeric bounds."""
    found = parse_range(text)
    assert found is not None and (found.low, found.high) == (low, high)


def test_non_ranges_are_not_ranges() -> None:
    """Words and lone numbers are not ranges."""
    assert parse_range("Negative") is None and parse_range("5.6") is None


@pytest.mark.parametrize(
    ("line", "section", "rest"),
    [
        ("Diagnoses", Section.DIAGNOSES, ""),
        ("ASSESSMENT:", Section.DIAGNOSES, ""),
        ("Diagnoses: E11.9 Type 2 diabetes", Section.DIAGNOSES, "E11.9 Type 2 diabetes"),
        ("Problem List", Section.DIAGNOSES, ""),
        ("Surgical History:", Section.PROCEDURES, ""),
        ("Genomic findings", Section.GENETICS, ""),
        ("Comments:", Section.NOTES, ""),
        ("Complete Blood Count (CBC)", Section.LABS, ""),
        ("Lipid Panel", Section.LABS, ""),
        ("Anything else:", Section.LABS, ""),
    ],
)
def test_headings(line: str, section: Section, rest: str) -> None:
    """Known names open their section; any other bare "Label:" opens a lab section."""
    assert heading(line) == (section, rest)


@pytest.mark.parametrize(
    "line", ["Low platelet count", "Vitamin D deficiency", "Glucose: 105 mg/dL", "Iron deficiency"]
)
def test_not_headings(line: str) -> None:
    """Diagnosis-like lines and colon rows do not end a section."""
    assert heading(line) is None


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        (
            "E11.9 Type 2 diabetes mellitus",
            Diagnosis(name="Type 2 diabetes mellitus", code="E11.9"),
        ),
        ("I10 Essential hypertension", Diagnosis(name="Essential hypertension", code="I10")),
        ("Hypertension - I10", Diagnosis(name="Hypertension", code="I10")),
        ("- Hyperlipidemia E78.5", Diagnosis(name="Hyperlipidemia", code="E78.5")),
        ("1. Obesity (ICD-10: E66.9)", Diagnosis(name="Obesity", code="E66.9")),
        ("B12 deficiency", Diagnosis(name="B12 deficiency")),
        ("Vitamin B12 deficiency anemia", Diagnosis(name="Vitamin B12 deficiency anemia")),
    ],
)
def test_diagnosis_lines(line: str, expected: Diagnosis) -> None:
    """ICD-10 codes before or after the name; B12 is not mistaken for a code."""
    assert diagnosis(line) == expected


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("Colonoscopy - 2023-04-12", Procedure(name="Colonoscopy", date="2023-04-12")),
        ("2022-11-03 Echocardiogram", Procedure(name="Echocardiogram", date="2022-11-03")),
        ("Colonoscopy on 12/04/2023", Procedure(name="Colonoscopy", date="12/04/2023")),
        ("Echo  Jan 5, 2024", Procedure(name="Echo", date="Jan 5, 2024")),
        ("Knee arthroscopy", Procedure(name="Knee arthroscopy")),
    ],
)
def test_procedure_lines(line: str, expected: Procedure) -> None:
    """A date in common forms before or after the name, or none."""
    assert procedure(line) == expected


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        (
            "MTHFR c.677C>T - heterozygous",
            GeneticFinding(gene="MTHFR", variant="c.677C>T", interpretation="heterozygous"),
        ),
        (
            "HFE C282Y: not detected",
            GeneticFinding(gene="HFE", variant="C282Y", interpretation="not detected"),
        ),
        ("BRCA1 c.68_69delAG", GeneticFinding(gene="BRCA1", variant="c.68_69delAG")),
        (
            "HLA-B *57:01  negative",
            GeneticFinding(gene="HLA-B", variant="*57:01", interpretation="negative"),
        ),
    ],
)
def test_genetic_lines(line: str, expected: GeneticFinding) -> None:
    """``GENE variant - interpretation`` and its colon / column-gap forms."""
    assert genetic(line) == expected


def test_genetic_prose_is_ignored() -> None:
    """A sentence in a genetics section is not a finding."""
    assert genetic("No pathogenic variants were detected") is None


TAB_REPORT = """Chemistry
Analyte\tValue\tUnits\tReference Interval\tFlag
Creatinine\t1.4\tmg/dL\t0.6-1.2\tH
Albumin\t4.1\tg/dL\t3.5-5.0\t

Diagnoses
None

Procedures
- Cataract surgery (2021-06-30)
"""


def test_tab_separated_text_report() -> None:
    """A plain-text export with a tab table and sections reads whole."""
    pages = split_pages(Document("r.txt", "text/plain", TAB_REPORT.encode()), max_pages=5)
    assert core(extract_rules(pages)) == Extraction(
        biomarkers=[
            bm("Creatinine", 1.4, "1.4", "mg/dL", 0.6, 1.2, "0.6-1.2", H),
            bm("Albumin", 4.1, "4.1", "g/dL", 3.5, 5.0, "3.5-5.0", N),
        ],
        procedures=[Procedure(name="Cataract surgery", date="2021-06-30")],
    )


def test_pipe_table_with_reordered_columns_in_a_pdf() -> None:
    """A pipe table is read through its header, whatever the column order."""
    pdf = make_pdf(
        [
            [
                "Flag | Component | Units | Result | Ref Range",
                "H | Ferritin | ng/mL | 410 | 15-150",
                " | Folate | ng/mL | 12.0 | > 5.9",
                "| | Vitamin B12 | pg/mL | 150 | 200-900 |",
            ]
        ]
    )
    pages = split_pages(Document("t.pdf", "application/pdf", pdf), max_pages=5)
    assert core(extract_rules(pages)).biomarkers == [
        bm("Ferritin", 410, "410", "ng/mL", 15, 150, "15-150", H),
        bm("Folate", 12.0, "12.0", "ng/mL", 5.9, None, "> 5.9", N),
        bm("Vitamin B12", 150, "150", "pg/mL", 200, 900, "200-900", L),
    ]


def test_sections_end_at_the_page_break_and_at_headings() -> None:
    """A diagnosis list stops at the next heading and at the end of its page."""
    pages = [
        "Diagnoses\nE11.9 Type 2 diabetes\nLipid Panel\nLDL 130 mg/dL <100",
        "Acme Labs letterhead\nTSH 2.0 mIU/L 0.4-4.0",
    ]
    found = extract_rules(pages)
    assert found.diagnoses == [Diagnosis(name="Type 2 diabetes", code="E11.9")]
    assert [b.name for b in found.biomarkers] == ["LDL", "TSH"]


def test_notes_sections_yield_nothing() -> None:
    """Free text under Comments/Notes never becomes a result."""
    found = extract_rules(["Comments:\nGlucose 300 mg/dL was seen last year H"])
    assert found == Extraction()
