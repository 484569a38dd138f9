"""German reports: decimal commas, + and minus-sign flags, German analyte names."""

from __future__ import annotations

from saga.evaluation.truth import ExpectedDocument
from tests.corpus.sheet import Sheet, rows

Built = tuple[bytes, ExpectedDocument]

# \u2212 is the typographic minus German labs print as the low flag
BLUTBILD = rows("""
Leukozyten | White blood cell count | 7,5 | 7.5 | /nl | 3,9 - 10,2 | | normal
Erythrozyten | Red blood cell count | 4,21 | 4.21 | /pl | 4,30 - 5,75 | \u2212 | low
Hämoglobin | Hemoglobin | 13,2 | 13.2 | g/dl | 13,5 - 17,5 | \u2212 | low
Hämatokrit | Hematocrit | 39,8 | 39.8 | % | 40 - 52 | \u2212 | low
MCV | Mean corpuscular volume | 94,5 | 94.5 | fl | 80 - 99 | | normal
MCH | Mean corpuscular hemoglobin | 31,4 | 31.4 | pg | 27 - 33 | | normal
Thrombozyten | Platelet count | 412 | 412 | /nl | 150 - 400 | + | high
""")
CHEMIE = rows("""
Natrium | Sodium | 141 | 141 | mmol/l | 136 - 145 | | normal
Kalium | Potassium | 4,3 | 4.3 | mmol/l | 3,5 - 5,1 | | normal
Kreatinin | Creatinine | 1,12 | 1.12 | mg/dl | 0,70 - 1,20 | | normal
GOT (AST) | Aspartate aminotransferase | 28 | 28 | U/l | \u2264 50 | | normal
GPT (ALT) | Alanine aminotransferase | 64 | 64 | U/l | \u2264 50 | + | high
Gamma-GT | Gamma-glutamyl transferase | 71 | 71 | U/l | < 60 | + | high
CRP | C-reactive protein | 12,4 | 12.4 | mg/l | < 5,0 | + | high
Glukose nüchtern | Glucose | 98 | 98 | mg/dl | 74 - 106 | | normal
Cholesterin | Total cholesterol | 246 | 246 | mg/dl | < 200 | + | high
HDL-Cholesterin | HDL cholesterol | 48 | 48 | mg/dl | > 40 | | normal
Triglyceride | Triglycerides | 152 | 152 | mg/dl | < 150 | + | high
TSH basal | Thyroid stimulating hormone | 1,84 | 1.84 | mU/l | 0,27 - 4,20 | | normal
""")


def german_befund() -> Built:
    """A German Laborbefund table: value, flag column, unit, Referenzbereich."""
    s = Sheet(
        "german_befund",
        "German Befund: 13,2 g/dl, flags + and \u2212, Leukozyten/Hämoglobin/Thrombozyten",
        font="dejavu",
        size=9,
    )
    s.new_page()
    s.line("Labor Dr. Weber & Kollegen MVZ GmbH", bold=True, size=13)
    s.line("Laborbefund    Auftragsnummer: 2403041187    Eingang: 04.03.2024 07:40")
    s.line(
        "Patient: Mustermann, Max    geb. 12.04.1961    männlich    Einsender: Praxis Dr. Schulz"
    )
    s.gap()
    widths = (52, 22, 10, 22, 40)
    header = ("Untersuchung", "Ergebnis", "", "Einheit", "Referenzbereich")
    s.cells(zip(widths, header, strict=True), bold=True)
    for title, results in (("Kleines Blutbild", BLUTBILD), ("Klinische Chemie", CHEMIE)):
        s.line(title, bold=True)
        for r in results:
            s.cells(zip(widths, (r.name, r.text, r.flag_text, r.unit, r.ref), strict=True))
            s.record(r)
    s.gap()
    s.line("Befund technisch und medizinisch validiert: Dr. med. K. Weber, Fachärztin für")
    s.line("Laboratoriumsmedizin. Bei Rückfragen erreichen Sie uns unter 0761 / 45 67-0.")
    return s.finish()


KURZ = rows("""
Leukozyten | White blood cell count | 7,500 | 7.5 | /nl | 3,800 - 10,500 | | normal
Erythrozyten | Red blood cell count | 4,620 | 4.62 | /pl | 3,900 - 5,200 | | normal
Hämoglobin | Hemoglobin | 14,1 | 14.1 | g/dl | 12,0 - 16,0 | | normal
Thrombozyten | Platelet count | 238 | 238 | /nl | 150 - 400 | | normal
Ferritin | = | 28 | 28 | µg/l | 15 - 150 | | normal
Vitamin B12 | = | 312 | 312 | pg/ml | 197 - 771 | | normal
Folsäure | Folate | 5,8 | 5.8 | ng/ml | 3,9 - 26,8 | | normal
25-OH-Vitamin D3 | Vitamin D (25-hydroxy) | 18,2 | 18.2 | ng/ml | 30 - 100 | \u2212 | low
HbA1c | Hemoglobin A1c | 5,4 | 5.4 | % | < 5,7 | | normal
""")


def german_kurzbefund() -> Built:
    """Colon rows from a GP's practice; three decimals written as 7,500 (that is 7.5)."""
    s = Sheet(
        "german_kurzbefund",
        "German colon rows: Leukozyten: 7,500 /nl (3,800 - 10,500) means 7.5",
        font="dejavu",
    )
    s.new_page()
    s.line("Hausarztpraxis am Markt - Laborwerte", bold=True, size=12)
    s.line("Patientin: Schneider, Anna    geb. 03.09.1985    Abnahme: 01.03.2024")
    s.gap()
    for r in KURZ:
        flag = f" {r.flag_text}" if r.flag_text else ""
        s.line(f"{r.name}: {r.text} {r.unit} ({r.ref}){flag}")
        s.record(r)
    s.gap()
    s.line("Vitamin-D-Mangel: Substitution 1000 IE täglich, Kontrolle in 3 Monaten.")
    return s.finish()
