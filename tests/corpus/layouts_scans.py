"""Documents with image-only pages: a report with a scanned page inside, a fax of a report.

Their truth lists the results on the scanned pages too (a person reads them) and
asks for review: a text parser cannot see them and must say so.
"""

from __future__ import annotations

from saga.evaluation.truth import ExpectedDocument
from tests.corpus.scan import scan_page
from tests.corpus.sheet import R, Sheet, rows

Built = tuple[bytes, ExpectedDocument]

CHEMISTRY = rows("""
Glucose | = | 88 | 88 | mg/dL | 70-99 | | normal
Sodium | = | 141 | 141 | mmol/L | 136-145 | | normal
Potassium | = | 4.4 | 4.4 | mmol/L | 3.5-5.1 | | normal
Creatinine | = | 1.02 | 1.02 | mg/dL | 0.70-1.30 | | normal
Calcium | = | 10.8 | 10.8 | mg/dL | 8.5-10.2 | H | high
Albumin | = | 4.6 | 4.6 | g/dL | 3.5-5.2 | | normal
""")
SCANNED_CBC = rows("""
WBC | White blood cell count | 6.1 | 6.1 | x10^3/uL | 4.0-11.0 | | normal
Hemoglobin | = | 14.8 | 14.8 | g/dL | 13.5-17.5 | | normal
Hematocrit | = | 44.0 | 44.0 | % | 40.0-52.0 | | normal
Platelets | Platelet count | 232 | 232 | x10^3/uL | 150-400 | | normal
""")
LIPIDS = rows("""
Cholesterol, Total | Total cholesterol | 188 | 188 | mg/dL | <200 | | normal
HDL Cholesterol | HDL cholesterol | 61 | 61 | mg/dL | >40 | | normal
LDL Cholesterol | LDL cholesterol | 104 | 104 | mg/dL | <100 | H | high
Triglycerides | = | 115 | 115 | mg/dL | <150 | | normal
PTH, Intact | Parathyroid hormone | 96 | 96 | pg/mL | 15-65 | H | high
""")
WIDTHS = (60, 24, 12, 28, 36)


def _table(s: Sheet, results: list[R]) -> None:
    s.cells(zip(WIDTHS, ("Test", "Result", "Flag", "Units", "Reference"), strict=True), bold=True)
    for r in results:
        s.cells(zip(WIDTHS, (r.name, r.text, r.flag_text, r.unit, r.ref), strict=True))
        s.record(r)


def _scanned_lines(title: str, results: list[R]) -> list[list[tuple[float, str]]]:
    """A table as lines of (x mm, text) for a picture, the columns where a printer puts them."""
    xs = (18.0, 80.0, 106.0, 120.0, 150.0)
    lines: list[list[tuple[float, str]]] = [[(18.0, title)], []]
    lines.append(list(zip(xs, ("Test", "Result", "Flag", "Units", "Reference"), strict=True)))
    for r in results:
        lines.append(list(zip(xs, (r.name, r.text, r.flag_text, r.unit, r.ref), strict=True)))
    return lines


def scanned_page_inside() -> Built:
    """Text page, a scanned page of results (no text layer), text page."""
    s = Sheet("scanned_page_inside", "A text report with page 2 a scan (no text layer)")
    s.new_page()
    s.line("Glenmore Endocrine Associates - Laboratory Results", bold=True, size=12)
    s.line("Patient: FITZGERALD, Owen    DOB: 10/05/1967    Collected: 02/29/2024")
    s.gap()
    s.line("CHEMISTRY", bold=True)
    _table(s, CHEMISTRY)
    s.gap()
    s.line("Hematology results from the outside laboratory are attached as page 2.")
    lines = [
        [(18.0, "WESTBROOK HOSPITAL LABORATORY - HEMATOLOGY")],
        [(18.0, "FITZGERALD, OWEN   DOB 10/05/1967   COLL 02/29/2024")],
        [],
    ]
    page = scan_page(s, lines + _scanned_lines("COMPLETE BLOOD COUNT", SCANNED_CBC), seed=7)
    s.record(*SCANNED_CBC, page=page)
    s.new_page()
    s.line("LIPIDS AND PARATHYROID", bold=True)
    _table(s, LIPIDS)
    s.gap()
    s.line("Hypercalcemia with raised PTH: primary hyperparathyroidism suspected.")
    return s.finish(expect_review=True)


FAX_CMP = rows("""
Glucose | = | 131 | 131 | mg/dL | 70-99 | H | high
BUN | Blood urea nitrogen | 22 | 22 | mg/dL | 7-20 | H | high
Creatinine | = | 1.18 | 1.18 | mg/dL | 0.60-1.20 | | normal
Sodium | = | 137 | 137 | mmol/L | 135-145 | | normal
Potassium | = | 3.9 | 3.9 | mmol/L | 3.5-5.1 | | normal
ALT | Alanine aminotransferase | 33 | 33 | U/L | 7-56 | | normal
""")
FAX_CBC = rows("""
WBC | White blood cell count | 9.7 | 9.7 | x10^3/uL | 4.0-11.0 | | normal
Hemoglobin | = | 11.1 | 11.1 | g/dL | 12.0-15.5 | L | low
Platelets | Platelet count | 276 | 276 | x10^3/uL | 150-400 | | normal
Hemoglobin A1c | = | 7.9 | 7.9 | % | 4.0-5.6 | H | high
""")


def fax_scanned() -> Built:
    """A fax: a typed cover page, then the lab report as two scanned pages."""
    s = Sheet("fax_scanned", "A text fax cover page followed by two scanned report pages")
    s.new_page()
    s.line("FAX TRANSMISSION", bold=True, size=16)
    s.gap()
    for text in (
        "To: Dr. Helen Marsh, Brookside Internal Medicine    Fax: (555) 201-4478",
        "From: Coastal Reference Laboratory, Client Services    Fax: (555) 880-1200",
        "Date: 03/05/2024 10:42    Pages: 3 (including cover)",
        "RE: Laboratory results for ROSS, Daniel (DOB 06/12/1961)",
        "",
        "CONFIDENTIALITY NOTICE: this facsimile contains protected health information intended",
        "only for the addressee. If you received it in error, call (555) 880-1234 and destroy it.",
    ):
        s.line(text)
    head = [
        [(18.0, "COASTAL REFERENCE LABORATORY")],
        [(18.0, "ROSS, DANIEL   DOB 06/12/1961   COLLECTED 03/04/2024")],
        [],
    ]
    page = scan_page(s, head + _scanned_lines("CHEMISTRY", FAX_CMP), seed=11, tilt=-0.8)
    s.record(*FAX_CMP, page=page)
    page = scan_page(s, head + _scanned_lines("HEMATOLOGY / HBA1C", FAX_CBC), seed=12, tilt=0.6)
    s.record(*FAX_CBC, page=page)
    return s.finish(expect_review=True)
