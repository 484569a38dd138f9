"""Whole documents: a multi-page report with running headers and footers, a clinic
letter with results in its sentences, a discharge summary."""

from __future__ import annotations

from saga.evaluation.truth import ExpectedDocument
from tests.corpus.sheet import Sheet, rows

Built = tuple[bytes, ExpectedDocument]

MULTIPAGE = (
    (
        "HEMATOLOGY",
        rows("""
WBC | White blood cell count | 5.1 | 5.1 | x10^3/uL | 4.0-11.0 | | normal
RBC | Red blood cell count | 3.62 | 3.62 | x10^6/uL | 3.80-5.20 | L | low
Hemoglobin | = | 9.4 | 9.4 | g/dL | 12.0-15.5 | L | low
Hematocrit | = | 29.8 | 29.8 | % | 36.0-46.0 | L | low
MCV | Mean corpuscular volume | 72 | 72 | fL | 80-100 | L | low
MCH | Mean corpuscular hemoglobin | 26.0 | 26.0 | pg | 27.0-33.0 | L | low
RDW | Red cell distribution width | 17.9 | 17.9 | % | 11.5-14.5 | H | high
Platelets | Platelet count | 412 | 412 | x10^3/uL | 150-400 | H | high
Reticulocytes | Reticulocyte count | 1.1 | 1.1 | % | 0.5-2.5 | | normal
"""),
    ),
    (
        "CHEMISTRY",
        rows("""
Sodium | = | 138 | 138 | mmol/L | 135-145 | | normal
Potassium | = | 4.1 | 4.1 | mmol/L | 3.5-5.1 | | normal
Chloride | = | 104 | 104 | mmol/L | 98-107 | | normal
Bicarbonate | = | 25 | 25 | mmol/L | 22-29 | | normal
BUN | Blood urea nitrogen | 12 | 12 | mg/dL | 7-20 | | normal
Creatinine | = | 0.74 | 0.74 | mg/dL | 0.50-1.10 | | normal
Glucose | = | 94 | 94 | mg/dL | 70-99 | | normal
Calcium | = | 9.2 | 9.2 | mg/dL | 8.5-10.5 | | normal
ALT | Alanine aminotransferase | 17 | 17 | U/L | 7-35 | | normal
AST | Aspartate aminotransferase | 21 | 21 | U/L | 10-35 | | normal
Alkaline Phosphatase | Alkaline phosphatase | 88 | 88 | U/L | 40-129 | | normal
"""),
    ),
    (
        "IRON STUDIES",
        rows("""
Iron | = | 31 | 31 | ug/dL | 50-170 | L | low
TIBC | Total iron binding capacity | 468 | 468 | ug/dL | 250-450 | H | high
Transferrin Saturation | Transferrin saturation | 7 | 7 | % | 15-50 | L | low
Ferritin | = | 6 | 6 | ng/mL | 15-150 | L | low
Folate | = | 11.8 | 11.8 | ng/mL | >5.9 | | normal
Vitamin B12 | = | 402 | 402 | pg/mL | 232-1245 | | normal
"""),
    ),
)


def _riverside_header(s: Sheet, page: int, count: int) -> None:
    s.line("RIVERSIDE COMMUNITY HOSPITAL - LABORATORY SERVICES", bold=True, size=11)
    s.line("Patient: ARCHER, Linda M    MRN: 00482913    DOB: 03/14/1958    Sex: F    Age: 66")
    s.line("Ordering: Dr. Samuel Ito    Account: 88213377    Collected: 03/04/2024 07:55")
    s.gap(2)


def _riverside_footer(s: Sheet, page: int, count: int) -> None:
    s.style(size=7)
    s.at(
        15, 276, "CONFIDENTIAL: this report contains protected health information. Results must be"
    )
    s.at(15, 279.5, "interpreted in conjunction with clinical findings and other investigations.")
    s.style(size=8)
    s.at(15, 287, f"Printed 03/05/2024 14:22 by LABUSER7    Page {page} of {count}")


def multipage_headers() -> Built:
    """Three pages, each with the hospital header, a table header, a disclaimer and a footer."""
    s = Sheet(
        "multipage_headers",
        "3 pages with repeating headers, 'Printed ... Page 2 of 3' footers, a disclaimer",
        header=_riverside_header,
        footer=_riverside_footer,
    )
    widths = (64, 22, 12, 28, 34)
    for title, results in MULTIPAGE:
        s.new_page()
        s.cells(
            zip(widths, ("Test", "Result", "Flag", "Units", "Reference Range"), strict=True),
            bold=True,
        )
        s.line(title, bold=True)
        for r in results:
            s.cells(zip(widths, (r.name, r.text, r.flag_text, r.unit, r.ref), strict=True))
            s.record(r)
    s.gap()
    s.line("Comment: microcytic picture with low ferritin, consistent with iron deficiency.")
    s.line("Follow up in 2 weeks.")
    return s.finish()


LETTER = rows("""
C-reactive protein | = | 48 | 48 | mg/L | <5 | | high
white cell count | White blood cell count | 13.2 | 13.2 | x10^9/L | 4.0-11.0 | | high
neutrophils | Neutrophils (absolute) | 10.9 | 10.9 | x10^9/L | 2.0-7.5 | | high
haemoglobin | Hemoglobin | 131 | 131 | g/L
procalcitonin | Procalcitonin | 0.8 | 0.8 | ng/mL | <0.5 | | high
creatinine | Creatinine | 94 | 94 | umol/L | 45-90 | | high
""")
LETTER_TEXT = (
    "Dear Dr Fairbairn,",
    "Re: Mrs Margaret OSEI-BONSU, DOB 19/08/1956, Hospital No. RX4471902",
    "Thank you for referring this lady, whom I saw in the acute medical unit on 2 March. She"
    " presented with three days of productive cough, fever and breathlessness, and was febrile"
    " and mildly hypoxic on arrival. Chest radiograph showed right lower lobe consolidation."
    " Her C-reactive protein was {0} and her white cell count {1}, with neutrophils of {2}."
    " Her haemoglobin was {3}. Her procalcitonin was {4} and creatinine {5}, which we"
    " attribute to dehydration.",
    "Diagnosis: community-acquired pneumonia (CURB-65 score 1), with mild acute kidney injury.",
    "She was treated with oral amoxicillin and clarithromycin and intravenous fluids, and"
    " improved quickly. She was discharged on 5 March to complete a five-day course."
    " Follow up in 2 weeks with a repeat chest radiograph in 6 weeks.",
    "Yours sincerely,",
    "Dr Rhiannon Pryce, Consultant Physician, Acute Medicine",
)


def narrative_letter() -> Built:
    """A clinic letter: results inside sentences, 'C-reactive protein was 48 mg/L (ref <5)'."""
    s = Sheet("narrative_letter", "Results in prose: 'C-reactive protein was 48 mg/L (ref <5)'")
    s.new_page()
    s.line("Ashby Vale University Hospital - Department of Acute Medicine", bold=True, size=12)
    s.line("Clinic letter    Dictated 05/03/2024    Typed 06/03/2024")
    s.gap()
    phrases = [
        f"{r.text} {r.unit} (ref {r.ref})" if r.ref else f"{r.text} {r.unit}" for r in LETTER
    ]
    for text in LETTER_TEXT:
        s.paragraph(text.format(*phrases))
        s.gap(2)
    s.record(*LETTER)
    return s.finish(diagnoses=("Community-acquired pneumonia", "Acute kidney injury"))


ADMISSION = rows("""
Na | Sodium | 134 | 134
K | Potassium | 3.4 | 3.4
Cr | Creatinine | 2.1 | 2.1
BUN | Blood urea nitrogen | 38 | 38
WBC | White blood cell count | 17.8 | 17.8
Hgb | Hemoglobin | 11.9 | 11.9
lactate | Lactate | 3.1 | 3.1
""")
DISCHARGE = rows("""
Creatinine | = | 1.2 | 1.2 | mg/dL | 0.6-1.2 | | normal
WBC | White blood cell count | 8.4 | 8.4 | x10^3/uL | 4.0-11.0 | | normal
Potassium | = | 4.1 | 4.1 | mmol/L | 3.5-5.1 | | normal
Hemoglobin A1c | = | 8.3 | 8.3 | % | 4.0-5.6 | H | high
""")


def discharge_summary() -> Built:
    """A discharge summary: unit-less admission labs in prose, a discharge table, drug doses."""
    s = Sheet(
        "discharge_summary",
        "Discharge summary: 'Na 134, K 3.4, ...' in prose, labs table, drug doses",
    )
    s.new_page()
    s.line("MERCY WEST MEDICAL CENTER - DISCHARGE SUMMARY", bold=True, size=12)
    s.line("Patient: KOWALCZYK, Henryk    MRN: 5510287    DOB: 01/22/1949")
    s.line("Admitted: 02/27/2024    Discharged: 03/03/2024    Attending: Dr. Lucia Ferreira")
    s.gap()
    s.line("Diagnoses", bold=True)
    s.line("1. Sepsis secondary to urinary tract infection (A41.9)")
    s.line("2. Acute kidney injury (N17.9)")
    s.line("3. Type 2 diabetes mellitus (E11.9)")
    s.gap()
    s.line("Procedures", bold=True)
    s.line("Renal ultrasound 02/28/2024")
    s.gap()
    s.line("Hospital course", bold=True)
    labs = ", ".join(f"{r.name} {r.text}" for r in ADMISSION)
    s.paragraph(
        "74-year-old man admitted with fever, rigors and confusion. Admission labs: "
        f"{labs}. Blood and urine cultures grew E. coli sensitive to ceftriaxone. He received "
        "IV ceftriaxone and fluids; renal function recovered and he is back to his baseline."
    )
    s.record(*ADMISSION)
    s.gap()
    s.line("Labs at discharge (03/03/2024)", bold=True)
    widths = (50, 20, 10, 26, 30)
    for r in DISCHARGE:
        s.cells(zip(widths, (r.name, r.text, r.flag_text, r.unit, r.ref), strict=True))
        s.record(r)
    s.gap()
    s.line("Discharge medications", bold=True)
    s.line("Ciprofloxacin 500 mg by mouth twice daily for 5 days")
    s.line("Metformin 500 mg twice daily (resume; hold if vomiting)")
    s.line("Atorvastatin 40 mg at night")
    s.gap()
    s.line("Follow up with primary care in 1 week; repeat BMP in 2 weeks.")
    return s.finish(
        diagnoses=(
            "Sepsis secondary to urinary tract infection",
            "Acute kidney injury",
            "Type 2 diabetes mellitus",
        )
    )
