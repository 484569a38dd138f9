"""Layouts where the page is the difficulty: columns side by side, wrapped names, cards."""

from __future__ import annotations

from saga.evaluation.truth import ExpectedDocument
from tests.corpus.sheet import R, Sheet, rows

Built = tuple[bytes, ExpectedDocument]

HEMATOLOGY = rows("""
WBC | White blood cell count | 6.8 | 6.8 | K/uL | 4.0-10.5 | | normal
RBC | Red blood cell count | 4.62 | 4.62 | M/uL | 4.20-5.40 | | normal
Hemoglobin | = | 13.9 | 13.9 | g/dL | 12.0-16.0 | | normal
Hematocrit | = | 41.5 | 41.5 | % | 37.0-47.0 | | normal
MCV | Mean corpuscular volume | 89.8 | 89.8 | fL | 80-100 | | normal
Platelets | Platelet count | 301 | 301 | K/uL | 150-400 | | normal
Neutrophils | Neutrophils (absolute) | 4.1 | 4.1 | K/uL | 1.8-7.7 | | normal
Lymphocytes | Lymphocytes (absolute) | 1.9 | 1.9 | K/uL | 1.0-4.8 | | normal
""")
CHEMISTRY = rows("""
Sodium | = | 140 | 140 | mmol/L | 136-145 | | normal
Potassium | = | 4.0 | 4.0 | mmol/L | 3.5-5.1 | | normal
Glucose | = | 101 | 101 | mg/dL | 70-99 | H | high
Creatinine | = | 0.9 | 0.9 | mg/dL | 0.6-1.2 | | normal
ALT | Alanine aminotransferase | 19 | 19 | U/L | 7-52 | | normal
AST | Aspartate aminotransferase | 24 | 24 | U/L | 13-39 | | normal
Bilirubin, Total | Total bilirubin | 0.7 | 0.7 | mg/dL | 0.3-1.0 | | normal
Albumin | = | 4.4 | 4.4 | g/dL | 3.5-5.7 | | normal
""")


def two_column_blocks() -> Built:
    """Two result tables side by side: every text line holds a hematology and a chemistry row."""
    s = Sheet(
        "two_column_blocks",
        "Two tables side by side (hematology left, chemistry right) on the same lines",
        size=9,
    )
    s.new_page()
    s.line("Pinecrest Family Medicine - In-house Laboratory", bold=True, size=12)
    s.line(
        "Patient: LINDQVIST, Sofia    DOB: 05/19/1990    Visit: 03/04/2024    Provider: R. Osei, NP"
    )
    s.gap()
    widths = (30, 16, 16, 22, 8)
    titles = ("HEMATOLOGY", "", "", "", "", "CHEMISTRY", "", "", "")
    s.cells(zip((*widths, *widths[:4]), titles, strict=True), bold=True)
    header = ("Test", "Result", "Units", "Range")
    s.cells(zip((*widths, *widths[:4]), (*header, "", *header), strict=True), bold=True)
    for left, right in zip(HEMATOLOGY, CHEMISTRY, strict=True):
        cells = (*_cells(left), "", *_cells(right))
        s.cells(zip((*widths, *widths[:4]), cells, strict=True))
        s.record(left, right)
    s.gap()
    s.line("Fasting: yes (10 h).  Glucose slightly above range; recheck with HbA1c at next visit.")
    return s.finish()


def _cells(r: R) -> tuple[str, str, str, str]:
    value = f"{r.text} {r.flag_text}".strip()
    return (r.name, value, r.unit, r.ref)


SUMMARY = rows("""
LDL Cholesterol | LDL cholesterol | 162 | 162 | mg/dL | 0\u201399 | Above range | high
Vitamin D, 25-OH | Vitamin D (25-hydroxy) | 18 | 18 | ng/mL | 30\u2013100 | Below range | low
Hemoglobin A1c | = | 5.8 | 5.8 | % | 4.0\u20135.6 | Above range | high
Apolipoprotein B | = | 118 | 118 | mg/dL | 52\u2013109 | Above range | high
Ferritin | = | 96 | 96 | ng/mL | 38\u2013380 | In range | normal
hs-CRP | High-sensitivity C-reactive protein | 0.6 | 0.6 | mg/L | 0.0\u20133.0 | In range | normal
Testosterone, Total | Testosterone | 512 | 512 | ng/dL | 264\u2013916 | In range | normal
Magnesium, RBC | = | 5.1 | 5.1 | mg/dL | 4.0\u20136.4 | In range | normal
""")


def two_column_summary() -> Built:
    """A consumer-lab summary page: result cards two to a row, name above value above range."""
    s = Sheet(
        "two_column_summary",
        "Summary cards in two columns: name / value / range / status",
        font="dejavu",
    )
    s.new_page()
    s.line("Your Results Summary", bold=True, size=16)
    s.line("Prepared for: Daniel Okonkwo    Collected: February 27, 2024    Panel: Longevity 40")
    s.line("Values outside the reference range are listed first.")
    top = 50.0
    for index, r in enumerate(SUMMARY):
        x = 18 if index % 2 == 0 else 110
        y = top + (index // 2) * 34
        s.style(style="B", size=11)
        s.at(x, y, r.name)
        s.style(size=15)
        s.at(x, y + 8, f"{r.text} {r.unit}")
        s.style(size=9)
        s.at(x, y + 14, f"Reference: {r.ref} {r.unit}")
        s.at(x, y + 19, r.flag_text)
        s.record(r)
    s.style()
    s.at(18, 200, "This summary is for information only and is not a diagnosis.")
    return s.finish()


WRAPPED = (
    (
        ("C-Reactive Protein (high", "sensitivity)"),
        "High-sensitivity C-reactive protein",
        "2.8",
        2.8,
        "mg/L",
        "<3.0",
        "",
        "normal",
    ),
    (
        ("Estimated Glomerular Filtration", "Rate (CKD-EPI 2021)"),
        "eGFR",
        "84",
        84.0,
        "mL/min/1.73m2",
        ">59",
        "",
        "normal",
    ),
    (
        ("Thyroid Stimulating Hormone", "(3rd generation)"),
        "Thyroid stimulating hormone",
        "2.31",
        2.31,
        "mIU/L",
        "0.45-4.50",
        "",
        "normal",
    ),
    (
        ("Gamma-Glutamyl", "Transferase"),
        "Gamma-glutamyl transferase",
        "31",
        31.0,
        "U/L",
        "8-61",
        "",
        "normal",
    ),
    (
        ("25-Hydroxyvitamin D", "(Total, LC-MS/MS)"),
        "Vitamin D (25-hydroxy)",
        "41",
        41.0,
        "ng/mL",
        "30-100",
        "",
        "normal",
    ),
    (
        ("Hemoglobin A1c (glycated", "hemoglobin)"),
        "Hemoglobin A1c",
        "5.9",
        5.9,
        "%",
        "4.0-5.6",
        "H",
        "high",
    ),
    (
        ("Low Density Lipoprotein", "Cholesterol (calculated)"),
        "LDL cholesterol",
        "128",
        128.0,
        "mg/dL",
        "<100",
        "H",
        "high",
    ),
    (("Ferritin",), "Ferritin", "84", 84.0, "ng/mL", "24-336", "", "normal"),
    (("Iron",), "Iron", "92", 92.0, "ug/dL", "60-170", "", "normal"),
    (("Transferrin Saturation",), "Transferrin saturation", "28", 28.0, "%", "20-50", "", "normal"),
)


def wrapped_names() -> Built:
    """Long test names wrapped onto a second line inside the name column; values on the first."""
    s = Sheet("wrapped_names", "Test names wrapped over two lines inside a narrow name column")
    s.new_page()
    s.line("Harborview Outpatient Laboratory", bold=True, size=13)
    s.line("Patient: MORENO, Elena    DOB: 08/30/1972    Specimen: Serum    Collected: 03/01/2024")
    s.gap()
    widths = (56, 20, 8, 30, 30)
    s.cells(zip(widths, ("Test", "Result", "", "Units", "Reference"), strict=True), bold=True)
    for parts, analyte, text, value, unit, ref, flag_text, flag in WRAPPED:
        r = R(" ".join(parts), analyte, text, value, unit, ref, flag_text, flag)
        s.cells(zip(widths, (parts[0], text, flag_text, unit, ref), strict=True), h=5)
        for rest in parts[1:]:
            s.cells(((widths[0], rest),), h=5)
        s.gap(1.5)
        s.record(r)
    s.gap()
    s.line("Reference intervals apply to adults. H = above the reference interval.")
    return s.finish()
