"""Layouts from labs outside the US and Germany: an Indian lab chain, a UK NHS trust."""

from __future__ import annotations

from saga.evaluation.truth import ExpectedDocument
from tests.corpus.sheet import Sheet, rows

Built = tuple[bytes, ExpectedDocument]

INDIAN_CBC = rows("""
Hemoglobin | = | 13.3 | 13.3 | g/dL | 13.5-17.5 | \u25bc (L) | low
Total Leucocyte Count | White blood cell count | 7.8 | 7.8 | thou/mm3 | 4.0-10.0 | | normal
RBC Count | Red blood cell count | 4.31 | 4.31 | mill/mm3 | 4.5-5.5 | \u25bc (L) | low
PCV | Hematocrit | 40.2 | 40.2 | % | 40-50 | | normal
MCV | Mean corpuscular volume | 93.3 | 93.3 | fL | 83-101 | | normal
Platelet Count | Platelet count | 168 | 168 | thou/mm3 | 150-410 | | normal
""")
INDIAN_METHODS_CBC = (
    "Photometry",
    "Flow cytometry",
    "Electrical impedance",
    "Calculated",
    "Calculated",
    "Electrical impedance",
)
INDIAN_CHEM = rows("""
HbA1c | Hemoglobin A1c | 7.2 | 7.2 | % | 4.0-5.6 | \u25b2 (H) | high
Estimated Average Glucose | = | 160 | 160 | mg/dL | <117 | \u25b2 (H) | high
Vitamin D, 25-Hydroxy | Vitamin D (25-hydroxy) | 14.5 | 14.5 | ng/mL | 30-100 | \u25bc (L) | low
Vitamin B12 | = | 180 | 180 | pg/mL | 211-911 | \u25bc | low
TSH | Thyroid stimulating hormone | 3.12 | 3.12 | µIU/mL | 0.35-5.50 | | normal
""")
INDIAN_METHODS_CHEM = ("HPLC", "Calculated", "CLIA", "CLIA", "CLIA")


def indian_lab_chain() -> Built:
    """Arrows and (L)/(H) between value and unit, a method column, a signature block."""
    s = Sheet(
        "indian_lab_chain",
        "Indian lab chain: 13.3 \u25bc (L) g/dL 13.5-17.5 with a Method column",
        font="dejavu",
        size=9,
    )
    s.new_page()
    s.line("SHREE DIAGNOSTICS & PATHLABS PVT. LTD.", bold=True, size=13)
    s.line("NABL Accredited Laboratory | Plot 14, Sector 18, Gurugram - 122015 | Ph: 0124-4567890")
    s.line("Patient Name : Mr. RAJESH KUMAR SHARMA     Age/Gender : 46 Y / Male")
    s.line("Lab No. : 2403040871     Ref. By : Dr. A. MEHTA     Reported : 04/Mar/2024 06:18 PM")
    s.gap()
    widths = (50, 28, 22, 36, 44)
    header = ("Test Name", "Result", "Unit", "Bio. Ref. Interval", "Method")
    s.cells(zip(widths, header, strict=True), bold=True)
    sections = (
        ("COMPLETE BLOOD COUNT (CBC)", INDIAN_CBC, INDIAN_METHODS_CBC),
        ("DIABETES & VITAMINS", INDIAN_CHEM, INDIAN_METHODS_CHEM),
    )
    for title, results, methods in sections:
        s.line(title, bold=True)
        for r, method in zip(results, methods, strict=True):
            result = f"{r.text} {r.flag_text}".strip()
            s.cells(zip(widths, (r.name, result, r.unit, r.ref, method), strict=True))
            s.record(r)
    s.gap()
    s.line("Interpretation: HbA1c 6.5% and above is diagnostic of diabetes (ADA 2024).")
    s.line("*** End of Report ***")
    s.line("Dr. Neha Kapoor, MD (Pathology)    Senior Consultant Pathologist")
    return s.finish()


NHS_FBC = rows("""
Haemoglobin | Hemoglobin | 128 | 128 | g/L | 130 - 170 | L | low
Total white cell count | White blood cell count | 6.2 | 6.2 | 10*9/L | 4.0 - 11.0 | | normal
Platelet count | = | 245 | 245 | 10*9/L | 150 - 410 | | normal
Mean cell volume | Mean corpuscular volume | 88 | 88 | fL | 80 - 100 | | normal
""")
NHS_BIOCHEMISTRY = rows("""
Serum sodium | Sodium | 139 | 139 | mmol/L | 133 - 146 | | normal
Serum potassium | Potassium | 4.8 | 4.8 | mmol/L | 3.5 - 5.3 | | normal
Serum urea | Urea | 5.4 | 5.4 | mmol/L | 2.5 - 7.8 | | normal
Serum creatinine | Creatinine | 88 | 88 | umol/L | 59 - 104 | | normal
eGFR | = | >90 | 90 | mL/min/1.73m2 | | | | >
Haemoglobin A1c level - IFCC standardised | Hemoglobin A1c | 52 | 52 | mmol/mol | 20 - 41 | H | high
Serum ferritin | Ferritin | 21 | 21 | ug/L | 30 - 400 | L | low
Serum TSH level | Thyroid stimulating hormone | 2.1 | 2.1 | mU/L | 0.27 - 4.2 | | normal
Serum cholesterol | Total cholesterol | 5.8 | 5.8 | mmol/L
""")


def nhs_uk() -> Built:
    """A UK NHS pathology report: bracketed ranges, 10*9/L, mmol/mol, an NHS number."""
    s = Sheet("nhs_uk", "UK NHS pathology: Haemoglobin 128 g/L [130 - 170] L, HbA1c in mmol/mol")
    s.new_page()
    s.line("Northfield Teaching Hospitals NHS Foundation Trust - Pathology", bold=True, size=12)
    s.line("Patient: PEMBERTON, Alistair    NHS No: 485 777 3456    DOB: 07/06/1956    Sex: M")
    s.line("Requested by: Dr S. Iqbal, Ashgrove Surgery    Received: 04/03/2024 09:12")
    s.gap()
    widths = (78, 18, 26, 34, 10)
    groups = (
        ("Haematology - Full blood count", NHS_FBC),
        ("Clinical Biochemistry", NHS_BIOCHEMISTRY),
    )
    for title, results in groups:
        s.line(title, bold=True)
        for r in results:
            ref = f"[{r.ref}]" if r.ref else ""
            s.cells(zip(widths, (r.name, r.text, r.unit, ref, r.flag_text), strict=True))
            s.record(r)
        s.gap(2)
    s.line("HbA1c of 48 mmol/mol or above is consistent with diabetes; please repeat to confirm.")
    s.line("Authorised by: Mrs J. Coulter, Biomedical Scientist    05/03/2024 11:40")
    return s.finish()
