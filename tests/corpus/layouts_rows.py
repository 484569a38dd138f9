"""Layouts where the row itself is the difficulty (the cases first seen going wrong)."""

from __future__ import annotations

from saga.evaluation.truth import ExpectedDocument
from tests.corpus.sheet import Sheet, rows

Built = tuple[bytes, ExpectedDocument]

UNIT_AFTER_RANGE = rows("""
Hemoglobin | = | 11.2 | 11.2 | g/dL | 12.0 - 15.5 | L | low
Hematocrit | = | 34.1 | 34.1 | % | 36.0 - 46.0 | L | low
WBC | White blood cell count | 12.4 | 12.4 | x10^9/L | 4.0 - 11.0 | H | high
Platelets | Platelet count | 210 | 210 | x10^9/L | 150 - 400 | | normal
Sodium | = | 131 | 131 | mmol/L | 135 - 145 | L | low
Potassium | = | 4.2 | 4.2 | mmol/L | 3.5 - 5.1 | | normal
Creatinine | = | 0.8 | 0.8 | mg/dL | 0.6 - 1.1 | | normal
Glucose | = | 112 | 112 | mg/dL | 70 - 99 | H | high
Albumin | = | 3.1 | 3.1 | g/dL | 3.5 - 5.0 | L | low
Total Protein | Total protein | 6.2 | 6.2 | g/dL | 6.0 - 8.3 | | normal
""")


def unit_after_range() -> Built:
    """A hospital table printing the unit after the value and again after a spaced range."""
    s = Sheet(
        "unit_after_range",
        "Unit repeated after a spaced range: 11.2 g/dL  12.0 - 15.5 g/dL  L",
    )
    s.new_page()
    s.line("St. Brigid General Hospital - Clinical Laboratory", bold=True, size=13)
    s.line("Patient: HALVORSEN, Ingrid    MRN: 7730215    DOB: 11/02/1958    Sex: F")
    s.line("Collected: 03/04/2024 06:45    Received: 03/04/2024 07:10    Ward: 4 West")
    s.gap()
    widths = (58, 38, 52, 14)
    s.cells(zip(widths, ("Test", "Result", "Reference Range", "Flag"), strict=True), bold=True)
    for r in UNIT_AFTER_RANGE:
        cells = (r.name, f"{r.text} {r.unit}", f"{r.ref} {r.unit}", r.flag_text)
        s.cells(zip(widths, cells, strict=True))
        s.record(r)
    s.gap()
    s.line("Verified by: T. Okafor, MLS(ASCP)    03/04/2024 08:02")
    return s.finish()


PAREN_FLAGS = rows("""
Glucose | = | 155 | 155 | mg/dL | Normal: 70 - 100 | (High) | high
Cholesterol | Total cholesterol | 242 | 242 | mg/dL | Normal: < 200 | (High) | high
Triglycerides | = | 98 | 98 | mg/dL | Normal: < 150 | | normal
HDL Cholesterol | HDL cholesterol | 44 | 44 | mg/dL | Normal: > 40 | | normal
Vitamin D | Vitamin D (25-hydroxy) | 21 | 21 | ng/mL | Normal: 30 - 100 | (Low) | low
TSH | Thyroid stimulating hormone | 1.9 | 1.9 | mIU/L | Normal: 0.4 - 4.0 | | normal
Ferritin | = | 35 | 35 | ng/mL | Normal: 15 - 150 | | normal
Hemoglobin A1c | = | 6.8 | 6.8 | % | Normal: 4.0 - 5.6 | (High) | high
""")


def paren_flags() -> Built:
    """A patient-portal export: ``Glucose  155 mg/dL (High) (Normal: 70 - 100)``."""
    s = Sheet(
        "paren_flags",
        "Flags and ranges in parentheses after the unit: (High) (Normal: 70 - 100)",
    )
    s.new_page()
    s.line("MyHealth Portal - Test Results", bold=True, size=13)
    s.line("Name: Marcus Webb    Date of birth: 22 Jul 1979")
    s.line("Ordered by: Dr. Priya Raman    Resulted: Mar 5, 2024")
    s.gap()
    s.line("Basic metabolic and lipid results", bold=True)
    for r in PAREN_FLAGS:
        flag = f" {r.flag_text}" if r.flag_text else ""
        s.line(f"{r.name}    {r.text} {r.unit}{flag} ({r.ref})")
        s.record(r)
    s.gap()
    s.line("Questions about your results? Message your care team.")
    return s.finish()


CENSORED_QUALITATIVE = rows("""
C-Reactive Protein | C-reactive protein | <0.3 | 0.3 | mg/dL | 0.0 - 0.5 | | normal | <
Procalcitonin | = | <0.05 | 0.05 | ng/mL | <0.50 | | normal | <
Rheumatoid Factor | Rheumatoid factor | <10 | 10 | IU/mL | <14 | | normal | <
eGFR (CKD-EPI 2021) | eGFR | >90 | 90 | mL/min/1.73m2 | >60 | | normal | >
HBsAg | Hepatitis B surface antigen | NON-REACTIVE | - | | NON-REACTIVE | | normal
Anti-HCV | Hepatitis C antibody | NON-REACTIVE | - | | NON-REACTIVE | | normal
HIV-1/2 Ag/Ab | HIV 1/2 antigen and antibody | NON-REACTIVE | - | | NON-REACTIVE | | normal
RPR | Rapid plasma reagin | Negative | - | | Negative | | normal
ANA Screen | Antinuclear antibodies | Negative | - | | Negative | | normal
H. pylori Stool Antigen | Helicobacter pylori antigen | Positive | - | | Negative
Ferritin | = | 212 | 212 | ng/mL | 30 - 400 | | normal
""")


def censored_qualitative() -> Built:
    """Serology and markers: ``<0.3``, ``>90``, NON-REACTIVE, Negative, Positive."""
    s = Sheet(
        "censored_qualitative",
        "Censored values (<0.3, >90) and word results (NON-REACTIVE, Negative, Positive)",
    )
    s.new_page()
    s.line("Lakeshore Diagnostic Laboratory", bold=True, size=13)
    s.line("Patient: OYELARAN, Tunde    Age/Sex: 41 Y / M    Accession: LD24-06371")
    s.line("Collected: 04-Mar-2024 08:10    Reported: 04-Mar-2024 17:42")
    s.gap()
    widths = (70, 34, 30, 40)
    s.cells(zip(widths, ("Test", "Result", "Units", "Reference"), strict=True), bold=True)
    for r in CENSORED_QUALITATIVE:
        s.cells(zip(widths, (r.name, r.text, r.unit, r.ref), strict=True))
        s.record(r)
    s.gap()
    s.line("A positive H. pylori antigen indicates active infection. Treat and retest")
    s.line("no sooner than 4 weeks after completing therapy.")
    return s.finish()


DOT_LEADERS = rows("""
Sodium | = | 139 | 139 | mmol/L | 135-145 | | normal
Potassium | = | 3.3 | 3.3 | mmol/L | 3.5-5.1 | L | low
Chloride | = | 101 | 101 | mmol/L | 98-107 | | normal
CO2 | Bicarbonate | 24 | 24 | mmol/L | 22-29 | | normal
BUN | Blood urea nitrogen | 18 | 18 | mg/dL | 7-20 | | normal
Creatinine | = | 1.4 | 1.4 | mg/dL | 0.7-1.3 | H | high
Calcium | = | 9.1 | 9.1 | mg/dL | 8.5-10.2 | | normal
Magnesium | = | 1.6 | 1.6 | mg/dL | 1.7-2.2 | L | low
Phosphorus | = | 3.4 | 3.4 | mg/dL | 2.5-4.5 | | normal
Uric Acid | Uric acid | 7.9 | 7.9 | mg/dL | 3.4-7.0 | H | high
""")


def dot_leaders() -> Built:
    """A monospaced LIS printout joining names to values with dot leaders."""
    s = Sheet(
        "dot_leaders", "Monospaced rows with dot leaders: Sodium ......... 139", font="courier"
    )
    s.new_page()
    s.line("VALLEY REGIONAL MEDICAL CENTER        LABORATORY REPORT", bold=True)
    s.line("PT: GRUBER, WALTER J        MRN: 00318842     LOC: ED-12")
    s.line("COLL: 03/04/24 2215   RECD: 03/04/24 2231   ACC#: C24-1187")
    s.line("-" * 72)
    s.line("BASIC METABOLIC PANEL + MG/PHOS")
    for r in DOT_LEADERS:
        name = f"{r.name} ".ljust(26, ".")
        s.line(f"{name} {r.text:>6} {r.flag_text:<2} {r.unit:<8} ({r.ref})")
        s.record(r)
    s.line("-" * 72)
    s.line("CRITICAL VALUES NONE.  REPORT STATUS: FINAL")
    return s.finish()


UNIT_IN_NAME = rows("""
Hemoglobin (g/dL) | Hemoglobin | 14.2 | 14.2 | g/dL | 13.0-17.0 | | normal
WBC (K/uL) | White blood cell count | 5.6 | 5.6 | K/uL | 4.0-11.0 | | normal
Glucose (mg/dL) | Glucose | 126 | 126 | mg/dL | 70-99 | H | high
Creatinine (mg/dL) | Creatinine | 1.05 | 1.05 | mg/dL | 0.70-1.30 | | normal
LDL Cholesterol (mg/dL) | LDL cholesterol | 139 | 139 | mg/dL | 0-99 | H | high
Vitamin D, 25-OH (ng/mL) | Vitamin D (25-hydroxy) | 27 | 27 | ng/mL | 30-100 | L | low
PSA, Total (ng/mL) | Prostate-specific antigen | 1.8 | 1.8 | ng/mL | 0.0-4.0 | | normal
""")


def unit_in_name() -> Built:
    """A flowsheet export with the unit in brackets after the test name, none after the value."""
    s = Sheet("unit_in_name", "Units in the name column: 'Glucose (mg/dL)  126  H  70-99'")
    s.new_page()
    s.line("Oakridge Primary Care - Lab Flowsheet", bold=True, size=12)
    s.line("Patient: HOLLOWAY, Grant    DOB: 07/07/1963    Printed: 03/05/2024")
    s.gap()
    widths = (70, 22, 10, 40)
    s.cells(zip(widths, ("Test (units)", "03/04/2024", "", "Ref range"), strict=True), bold=True)
    for r in UNIT_IN_NAME:
        s.cells(zip(widths, (r.name, r.text, r.flag_text, r.ref), strict=True))
        s.record(r)
    return s.finish()
