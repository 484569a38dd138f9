"""US reference-lab layouts: Quest-style, LabCorp-style, a urinalysis, a clinic printout."""

from __future__ import annotations

from saga.evaluation.truth import ExpectedDocument
from tests.corpus.sheet import NORMAL, Sheet, rows

Built = tuple[bytes, ExpectedDocument]

QUEST_CMP = rows("""
GLUCOSE | Glucose | 155 | 155 | mg/dL | 65-99 | H | high
UREA NITROGEN (BUN) | Blood urea nitrogen | 14 | 14 | mg/dL | 7-25 | | normal
CREATININE | Creatinine | 1.32 | 1.32 | mg/dL | 0.50-1.05 | H | high
EGFR | eGFR | 47 | 47 | mL/min/1.73m2 | > OR = 60 | L | low
SODIUM | Sodium | 139 | 139 | mmol/L | 135-146 | | normal
POTASSIUM | Potassium | 4.6 | 4.6 | mmol/L | 3.5-5.3 | | normal
CHLORIDE | Chloride | 103 | 103 | mmol/L | 98-110 | | normal
CARBON DIOXIDE | Bicarbonate | 26 | 26 | mmol/L | 20-32 | | normal
CALCIUM | Calcium | 9.6 | 9.6 | mg/dL | 8.6-10.4 | | normal
PROTEIN, TOTAL | Total protein | 7.1 | 7.1 | g/dL | 6.1-8.1 | | normal
ALBUMIN | Albumin | 4.3 | 4.3 | g/dL | 3.6-5.1 | | normal
BILIRUBIN, TOTAL | Total bilirubin | 0.5 | 0.5 | mg/dL | 0.2-1.2 | | normal
ALKALINE PHOSPHATASE | Alkaline phosphatase | 72 | 72 | U/L | 37-153 | | normal
AST | Aspartate aminotransferase | 22 | 22 | U/L | 10-35 | | normal
ALT | Alanine aminotransferase | 41 | 41 | U/L | 6-29 | H | high
""")
QUEST_PAGE2 = rows("""
CHOLESTEROL, TOTAL | Total cholesterol | 231 | 231 | mg/dL | <200 | H | high
HDL CHOLESTEROL | HDL cholesterol | 52 | 52 | mg/dL | > OR = 50 | | normal
TRIGLYCERIDES | Triglycerides | 148 | 148 | mg/dL | <150 | | normal
LDL-CHOLESTEROL | LDL cholesterol | 150 | 150 | mg/dL | <100 | H | high
NON HDL CHOLESTEROL | Non-HDL cholesterol | 179 | 179 | mg/dL | <130 | H | high
HEMOGLOBIN A1c | Hemoglobin A1c | 6.1 | 6.1 | % | <5.7 | H | high
TSH | Thyroid stimulating hormone | 2.14 | 2.14 | mIU/L | 0.40-4.50 | | normal
HIV 1/2 AG/AB, 4TH GEN | HIV 1/2 antigen and antibody | NON-REACTIVE | - | | NON-REACTIVE | | normal
""")


def _quest_footer(s: Sheet, page: int, count: int) -> None:
    s.style(size=7)
    s.at(
        15,
        282,
        "CLIENT SERVICES: 866.555.0142      SPECIMEN: KM512345A      PATIENT: DOE-RIVERA, JANE",
    )
    s.at(170, 287, f"PAGE {page} OF {count}")


def quest_style() -> Built:
    """In Range / Out Of Range columns, the unit after the reference range, a lab code column."""
    s = Sheet(
        "quest_style",
        "Quest-style: In Range / Out Of Range columns, '65-99 mg/dL', '> OR = 60', a Lab column",
        size=9,
        footer=_quest_footer,
    )
    widths = (62, 24, 26, 50, 10)
    for page, sections in enumerate(
        (
            (("COMPREHENSIVE METABOLIC PANEL", QUEST_CMP),),
            (("LIPID PANEL AND OTHER TESTS", QUEST_PAGE2),),
        )
    ):
        s.new_page()
        s.line("MERIDIAN REFERENCE LABORATORIES", bold=True, size=12)
        s.line("DOE-RIVERA, JANE    DOB: 04/18/1970    AGE: 53    GENDER: F    FASTING: Y")
        s.line("COLLECTED: 03/01/2024 08:14    RECEIVED: 03/01/2024 20:37    REPORTED: 03/02/2024")
        s.gap()
        header = ("Test Name", "In Range", "Out Of Range", "Reference Range", "Lab")
        s.cells(zip(widths, header, strict=True), bold=True)
        for title, results in sections:
            s.line(title, bold=True)
            for r in results:
                value = r.text if r.flag in {NORMAL, ""} else f"{r.text} {r.flag_text}"
                inside, outside = (value, "") if r.flag in {NORMAL, ""} else ("", value)
                ref = f"{r.ref} {r.unit}".strip()
                s.cells(zip(widths, (r.name, inside, outside, ref, "01"), strict=True))
                s.record(r)
        if page == 1:
            s.gap()
            s.line("For someone with known diabetes, a value <7% indicates that their diabetes is")
            s.line("well controlled. Performing Site: 01 MERIDIAN LABS, 1200 LAKE ST, ANYTOWN, ST")
    return s.finish()


LABCORP = (
    (
        rows("""
WBC | White blood cell count | 7.9 | 7.9 | x10E3/uL | 3.4-10.8 | | normal
RBC | Red blood cell count | 4.21 | 4.21 | x10E6/uL | 3.77-5.28 | | normal
Hemoglobin | = | 12.6 | 12.6 | g/dL | 11.1-15.9 | | normal
Hematocrit | = | 38.2 | 38.2 | % | 34.0-46.6 | | normal
MCV | Mean corpuscular volume | 91 | 91 | fL | 79-97 | | normal
RDW | Red cell distribution width | 13.1 | 13.1 | % | 11.7-15.4 | | normal
Platelets | Platelet count | 388 | 388 | x10E3/uL | 150-450 | | normal
Vitamin D, 25-Hydroxy | Vitamin D (25-hydroxy) | 18.2 | 18.2 | ng/mL | 30.0-100.0 | Low | low
Ferritin | = | 12 | 12 | ng/mL | 15-150 | Low | low
Vitamin B12 | = | 486 | 486 | pg/mL | 232-1245 | | normal
TSH | Thyroid stimulating hormone | 5.310 | 5.31 | uIU/mL | 0.450-4.500 | High | high
""")
    ),
    (
        "8.2  09/14/2023",
        "",
        "12.9  09/14/2023",
        "39.0  09/14/2023",
        "",
        "",
        "",
        "21.0  09/14/2023",
        "",
        "",
        "4.020  09/14/2023",
    ),
)


def labcorp_style() -> Built:
    """Current result and flag, then a previous result with its date, then units and interval."""
    s = Sheet(
        "labcorp_style",
        "LabCorp-style: a Previous Result and Date column between value and units",
        size=9,
    )
    s.new_page()
    s.line("Patient Report", bold=True, size=14)
    s.line("Patient: NGUYEN, THUY    DOB: 12/02/1984    Patient ID: 0048812731    Age: 39")
    s.line("Specimen ID: 061-477-3391-0    Date Collected: 03/04/2024    Date Reported: 03/05/2024")
    s.gap()
    widths = (44, 38, 40, 20, 26, 6)
    header = (
        "Tests Ordered",
        "Current Result and Flag",
        "Previous Result and Date",
        "Units",
        "Reference Interval",
        "",
    )
    s.cells(zip(widths, header, strict=True), bold=True)
    results, previous = LABCORP
    for r, before in zip(results, previous, strict=True):
        current = f"{r.text} {r.flag_text}".strip()
        s.cells(zip(widths, (r.name, current, before, r.unit, r.ref, "01"), strict=True))
        s.record(r)
    s.gap()
    s.line("01  Eastgate Laboratory Services, 1447 York Court, Burlington, NC 27215-3361")
    s.line(
        "Dir: Jonathan Reyes, MD    For inquiries, the physician may contact Branch: 800-555-0100"
    )
    return s.finish()


URINALYSIS = rows("""
Color | Urine color | Yellow | - | | Yellow | | normal
Appearance | Urine appearance | Cloudy | - | | Clear | *
Specific Gravity | Urine specific gravity | 1.024 | 1.024 | | 1.005-1.030 | | normal
pH | Urine pH | 5.5 | 5.5 | | 5.0-8.0 | | normal
Protein | Urine protein | Negative | - | | Negative | | normal
Glucose | Urine glucose | Negative | - | | Negative | | normal
Ketones | Urine ketones | Trace | - | | Negative | *
Blood | Urine blood | Negative | - | | Negative | | normal
Nitrite | Urine nitrite | Positive | - | | Negative | *
Leukocyte Esterase | Urine leukocyte esterase | 2+ | - | | Negative | *
Microalbumin | Urine albumin | 18 | 18 | mg/L | <30 | | normal
""")


def urinalysis() -> Built:
    """A dipstick urinalysis: word results and 2+ beside a specific gravity and a pH."""
    s = Sheet(
        "urinalysis", "Urinalysis: Yellow, Cloudy, Trace, Positive, 2+ next to 1.024 and pH 5.5"
    )
    s.new_page()
    s.line("Cedar Valley Urgent Care - Point of Care Testing", bold=True, size=12)
    s.line("Patient: ABERNATHY, Claire    DOB: 02/11/1996    Collected: 03/04/2024 16:05")
    s.line("Specimen: Urine, clean catch midstream")
    s.gap()
    widths = (60, 30, 10, 20, 40)
    s.cells(
        zip(widths, ("URINALYSIS, COMPLETE", "Result", "", "Units", "Expected"), strict=True),
        bold=True,
    )
    for r in URINALYSIS:
        s.cells(zip(widths, (r.name, r.text, r.flag_text, r.unit, r.ref), strict=True))
        s.record(r)
    s.gap()
    s.line("* Abnormal.  Culture sent; treat empirically per UTI protocol.")
    return s.finish()


CLINIC = rows("""
WBC | White blood cell count | 11,200 | 11200 | /uL | 4,500-11,000 | * | high
Platelets | Platelet count | 452,000 | 452000 | /uL | 150,000-450,000 | * | high
RBC | Red blood cell count | 4.1 | 4.1 | M/uL | 3.9-5.2 | | normal
Hemoglobin | = | 12.2 | 12.2 | g/dL | 12.0-15.5 | | normal
Glucose | = | 68 | 68 | mg/dL | 70-99 | * | low
Sodium | = | 136 | 136 | mmol/L | 135-145 | | normal
Potassium | = | 5.6 | 5.6 | mmol/L | 3.5-5.1 | * | high
Iron | = | 38 | 38 | mcg/dL | 50-170 | * | low
Ferritin | = | 8 | 8 | ng/mL | 13-150 | * | low
""")


def clinic_asterisk() -> Built:
    """A small clinic's printout: counts with thousands separators, * marking any abnormal value."""
    s = Sheet(
        "clinic_asterisk",
        "US clinic: 11,200 /uL and 452,000 /uL with * flags",
        font="courier",
        size=9,
    )
    s.new_page()
    s.line("SUNRISE COMMUNITY HEALTH CENTER - LAB RESULTS", bold=True)
    s.line("PATIENT: MBEKI, NALEDI      DOB: 09/23/1988      DATE: 03/04/2024")
    s.line("")
    s.line(f"{'TEST':<14}{'RESULT':>10} {'':1}  {'UNITS':<9}NORMAL RANGE")
    for r in CLINIC:
        s.line(f"{r.name:<14}{r.text:>10} {r.flag_text:<1}  {r.unit:<9}{r.ref}")
        s.record(r)
    s.line("")
    s.line("* = OUTSIDE NORMAL RANGE.  RESULTS REVIEWED BY: K. PATEL, MD")
    return s.finish()
