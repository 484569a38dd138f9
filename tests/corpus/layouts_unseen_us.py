"""Issue 28: word ranges, comment rows, categorical ranges, lab-code columns, a cumulative
report and a veterinary panel, each typed by hand and drawn with its truth."""

from __future__ import annotations

from saga.evaluation.truth import ExpectedDocument
from tests.corpus.sheet import Sheet, rows

Built = tuple[bytes, ExpectedDocument]

WORDS = rows("""
Glucose, Fasting | Glucose | 108 | 108 | mg/dL | 65 to 99 | HIGH | high
Total Cholesterol | Total cholesterol | 236 | 236 | mg/dL | Less than 200 | HIGH | high
Triglycerides | = | 131 | 131 | mg/dL | Less than 150 | | normal
HDL Cholesterol | HDL cholesterol | 34 | 34 | mg/dL | Greater than 39 | LOW | low
PSA, Total | Prostate-specific antigen | 1.8 | 1.8 | ng/mL | Less than or equal to 4.0 | | normal
TSH | Thyroid stimulating hormone | 1.92 | 1.92 | uIU/mL | 0.45 to 4.50 | | normal
Creatinine | = | 1.41 | 1.41 | mg/dL | 0.76 to 1.27 | HIGH | high
""")


def clinic_word_ranges() -> Built:
    """A US clinic printout: ranges in words, HIGH/LOW between value and unit."""
    s = Sheet("clinic_word_ranges", "US clinic: Total Cholesterol 236 HIGH mg/dL Less than 200")
    s.new_page()
    s.line("Lakeside Family Medicine - In-House Laboratory", bold=True, size=12)
    s.line("Patient: HOLLOWAY, Dana   DOB: 02/11/1970   Collected: 03/04/2024 07:50")
    s.gap()
    widths = (48, 16, 16, 22, 56)
    s.cells(
        zip(widths, ("Component", "Value", "Flag", "Units", "Standard Range"), strict=True),
        bold=True,
    )
    for r in WORDS:
        s.cells(zip(widths, (r.name, r.text, r.flag_text, r.unit, r.ref), strict=True))
        s.record(r)
    s.gap()
    s.line("Results reviewed by: K. Osei, NP")
    return s.finish()


CODED = rows("""
Vitamin D, 25-Hydroxy, Total | Vitamin D (25-hydroxy) | 17 | 17 | ng/mL | 30-100 | L | low
Ferritin | = | 64 | 64 | ng/mL | 16-232 | | normal
Magnesium | = | 1.6 | 1.6 | mg/dL | 1.5-2.5 | | normal
Lipase | = | 88 | 88 | U/L | 7-60 | H | high
Hemoglobin A1c | = | 6.0 | 6.0 | % | <5.7 | H | high
""")
CODED_COMMENTS = {
    0: ("Deficient:      <20 ng/mL", "Insufficient:   20-29 ng/mL", "Sufficient:     30-100 ng/mL"),
    4: ("Prediabetes:    5.7-6.4 %", "Diabetes:       >=6.5 %"),
}


def reference_lab_codes() -> Built:
    """A reference lab: a performing-site code after every row, category rows under two."""
    s = Sheet("reference_lab_codes", "Reference lab: Lipase 88 H U/L 7-60 Z4, Deficient: <20 rows")
    s.new_page()
    s.line("National Reference Laboratories", bold=True, size=12)
    s.line("Patient: MORALES, Ines   Acct: 55-10293   Received: 03/05/2024")
    s.gap()
    widths = (56, 16, 10, 18, 28, 12)
    head = ("Test Name", "Result", "Flag", "Units", "Reference Range", "Lab")
    s.cells(zip(widths, head, strict=True), bold=True)
    for index, r in enumerate(CODED):
        code = "Z4" if index % 2 == 0 else "NW"
        s.cells(zip(widths, (r.name, r.text, r.flag_text, r.unit, r.ref, code), strict=True))
        s.record(r)
        for comment in CODED_COMMENTS.get(index, ()):
            s.cells(((20, ""), (100, comment)))
    s.gap()
    s.line("Z4: Performed at NRL West, 1200 Harbor Blvd, Long Beach CA 90802")
    s.line("NW: Performed at NRL Northwest, 88 Alder St, Portland OR 97205")
    return s.finish()


LIPIDS = rows("""
Total Cholesterol | Total cholesterol | 219 | 219 | mg/dL | < 200 | H | high
Triglycerides | = | 176 | 176 | mg/dL | < 150 | H | high
LDL Cholesterol | LDL cholesterol | 141 | 141 | mg/dL | < 100 | H | high
HbA1c | Hemoglobin A1c | 5.9 | 5.9 | % | < 5.7 | H | high
""")
CATEGORIES = (
    ("Desirable : < 200", "Borderline High : 200 - 239", "High : >= 240"),
    ("Normal : < 150", "Borderline High : 150 - 199", "Very High : >= 500"),
    ("Optimal : < 100", "Near Optimal : 100 - 129", "High : 160 - 189"),
    ("Non-diabetic : < 5.7", "Pre-diabetic : 5.7 - 6.4", "Diabetic : >= 6.5"),
)


def lab_chain_categories() -> Built:
    """An Indian-style lab chain: each result followed by its categorical range lines."""
    s = Sheet("lab_chain_categories", "Lab chain: Total Cholesterol 219 then Desirable : < 200 ...")
    s.new_page()
    s.line("CITYCARE DIAGNOSTIC CENTRE", bold=True, size=13)
    s.line("Name : Mrs. ANITA DESAI    Age : 39 Yrs    Sample : 05/03/2024")
    s.gap()
    widths = (52, 22, 22, 40)
    s.cells(
        zip(widths, ("Investigation", "Result", "Unit", "Reference Interval"), strict=True),
        bold=True,
    )
    for r, lines in zip(LIPIDS, CATEGORIES, strict=True):
        s.cells(zip(widths, (r.name, f"{r.text} {r.flag_text}", r.unit, r.ref), strict=True))
        s.record(r)
        for text in lines:
            s.cells(((12, ""), (90, text)))
    s.gap()
    s.line("Method: Enzymatic. Kindly correlate clinically.")
    return s.finish()


CUMULATIVE = rows("""
Haemoglobin | Hemoglobin | 109 | 109 | g/L | 115-165 | L | low
White Cell Count | White blood cell count | 12.4 | 12.4 | x10^9/L | 4.0-11.0 | H | high
Platelets | Platelet count | 388 | 388 | x10^9/L | 150-400 | | normal
Sodium | = | 133 | 133 | mmol/L | 135-145 | L | low
Creatinine | = | 96 | 96 | umol/L | 45-90 | H | high
""")
EARLIER = (("121", "128"), ("9.8", "7.1"), ("341", ""), ("136", "139"), ("84", "79"))


def cumulative_au() -> Built:
    """An Australian cumulative report: the newest date first, flags glued to values."""
    s = Sheet("cumulative_au", "Cumulative report: Haemoglobin 109L 121 128 g/L under three dates")
    s.new_page()
    s.line("Coastal Pathology - Cumulative Report", bold=True, size=12)
    s.line("Patient: NGUYEN, Thanh   MRN 4471230   Referrer: Dr P. Walsh")
    s.gap()
    widths = (44, 22, 22, 22, 24, 28)
    head = ("Test", "04/03/24", "11/01/24", "20/10/23", "Units", "Ref. Range")
    s.cells(zip(widths, head, strict=True), bold=True)
    for r, (one, two) in zip(CUMULATIVE, EARLIER, strict=True):
        s.cells(
            zip(widths, (r.name, f"{r.text}{r.flag_text}", one, two, r.unit, r.ref), strict=True)
        )
        s.record(r)
    s.gap()
    s.line("Results in the first column are from the current request.")
    return s.finish()


VET = rows("""
ALB | Albumin | 3.2 | 3.2 | g/dL | 2.3-4.0 | | normal
ALKP | Alkaline phosphatase | 212 | 212 | U/L | 23-212 | | normal
BUN | Blood urea nitrogen | 31 | 31 | mg/dL | 7-27 | H | high
CREA | Creatinine | 1.9 | 1.9 | mg/dL | 0.5-1.8 | H | high
GLU | Glucose | 96 | 96 | mg/dL | 74-143 | | normal
TP | Total protein | 7.1 | 7.1 | g/dL | 5.2-8.2 | | normal
GLOB | = | 3.9 | 3.9 | g/dL | 2.5-4.5 | | normal
PHOS | Phosphate | 6.4 | 6.4 | mg/dL | 2.5-6.8 | | normal
""")


def vet_chemistry() -> Built:
    """A veterinary chemistry panel: short codes the table mostly does not know."""
    s = Sheet("vet_chemistry", "Veterinary panel: CREA 1.9 mg/dL 0.5-1.8 H, GLOB, ALKP codes")
    s.new_page()
    s.line("Riverbend Animal Hospital - In-clinic Chemistry", bold=True, size=12)
    s.line("Patient: Biscuit (canine, 9 y)   Owner: T. Marsh   Run: 03/05/2024 10:12")
    s.gap()
    widths = (30, 24, 24, 36, 12)
    s.cells(zip(widths, ("Test", "Result", "Units", "Reference", "Flag"), strict=True), bold=True)
    for r in VET:
        s.cells(zip(widths, (r.name, r.text, r.unit, r.ref, r.flag_text), strict=True))
        s.record(r)
    s.gap()
    s.line("Sample quality: no hemolysis, no lipemia.")
    return s.finish()
