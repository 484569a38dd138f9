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


FRENCH = rows("""
Hématies | Red blood cell count | 4,52 | 4.52 | T/L | 4,28 - 5,79 | | normal
Hémoglobine | Hemoglobin | 13,1 | 13.1 | g/dL | 13,4 - 16,7 | | low
Hématocrite | Hematocrit | 39,6 | 39.6 | % | 39,2 - 48,6 | | normal
VGM | Mean corpuscular volume | 87,6 | 87.6 | fL | 78,0 - 97,0 | | normal
Leucocytes | White blood cell count | 6,84 | 6.84 | G/L | 4,05 - 11,00 | | normal
Plaquettes | Platelet count | 254 | 254 | G/L | 150 - 400 | | normal
Créatinine | Creatinine | 82 | 82 | µmol/L | 59 - 104 | | normal
Glycémie à jeun | Glucose | 1,02 | 1.02 | g/L | 0,74 - 1,06 | | normal
Cholestérol total | Total cholesterol | 2,31 | 2.31 | g/L | < 2,00 | | high
Ferritine | Ferritin | 45 | 45 | µg/L | 22 - 275 | | normal
TSH | Thyroid stimulating hormone | 1,92 | 1.92 | mUI/L | 0,27 - 4,20 | | normal
""")
FRENCH_BEFORE = ("4,61", "13,6", "40,8", "", "7,12", "239", "79", "0,98", "2,18", "", "2,05")


def french_bilan() -> Built:
    """A French bilan: decimal commas, glucose in g/L, an Antériorités column of earlier values."""
    s = Sheet(
        "french_bilan",
        "French bilan: 13,1 g/dL, glycémie 1,02 g/L, earlier results in an Antériorités column",
        size=9,
    )
    s.new_page()
    s.line("Laboratoire de Biologie Médicale Saint-Roch", bold=True, size=12)
    s.line("Patient : M. LEFEBVRE Julien    Né le 14/02/1975    Dossier n° 24030412")
    s.line("Prélevé le 04/03/2024 à 08h05    Édité le 04/03/2024 à 16h20")
    s.gap()
    widths = (44, 22, 20, 38, 40)
    header = ("Analyse", "Résultat", "Unité", "Valeurs de référence", "Antériorités")
    s.cells(zip(widths, header, strict=True), bold=True)
    for r, before in zip(FRENCH, FRENCH_BEFORE, strict=True):
        earlier = f"{before}  (12/09/2023)" if before else ""
        s.cells(zip(widths, (r.name, r.text, r.unit, r.ref, earlier), strict=True))
        s.record(r)
    s.gap()
    s.line(
        "Les résultats hors des valeurs de référence sont à interpréter selon le contexte clinique."
    )
    s.line("Biologiste responsable : Dr C. Marchand")
    return s.finish()


AUSTRALIAN = rows("""
Haemoglobin | Hemoglobin | 118 | 118 | g/L | 115-165 | | normal
White Cell Count | White blood cell count | 3.6 | 3.6 | x10^9/L | 4.0-11.0 | L | low
Platelets | Platelet count | 162 | 162 | x10^9/L | 150-450 | | normal
Neutrophils | Neutrophils (absolute) | 1.4 | 1.4 | x10^9/L | 2.0-7.5 | L | low
Sodium | = | 137 | 137 | mmol/L | 135-145 | | normal
Potassium | = | 4.3 | 4.3 | mmol/L | 3.5-5.2 | | normal
Urea | = | 6.1 | 6.1 | mmol/L | 2.9-8.2 | | normal
Creatinine | = | 71 | 71 | umol/L | 45-90 | | normal
Ferritin | = | 412 | 412 | ug/L | 30-300 | H | high
Vitamin B12 | = | 156 | 156 | pmol/L | 150-700 | | normal
""")


def australian_range_first() -> Built:
    """An Australian pathology report printing the range in brackets before the unit."""
    s = Sheet(
        "australian_range_first",
        "Australian: 'White Cell Count  3.6 L  (4.0-11.0)  x10^9/L', range before unit",
    )
    s.new_page()
    s.line("Harbourside Pathology (NATA accredited)", bold=True, size=12)
    s.line("Patient: TRAN, Minh Chau    DOB: 21/11/1962    Medicare: 4123 56789 1")
    s.line("Requested: Dr J. McAllister    Collected: 04/03/2024 09:30    Lab ref: 24-118203")
    s.gap()
    widths = (60, 18, 8, 34, 30)
    s.cells(zip(widths, ("Test", "Result", "", "Reference", "Units"), strict=True), bold=True)
    for r in AUSTRALIAN:
        s.cells(zip(widths, (r.name, r.text, r.flag_text, f"({r.ref})", r.unit), strict=True))
        s.record(r)
    s.gap()
    s.line("Comment: mild neutropenia; ferritin raised, consider an acute phase response.")
    s.line("Repeat FBE in 4-6 weeks.")
    return s.finish()
