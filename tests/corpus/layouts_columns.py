"""Pages in two column blocks whose rows do not share lines.

Each column keeps its own row pitch, so the left and the right column's rows sit at
different heights: text extraction meets them interleaved (a left row, a right row,
a left row...) or, where two baselines come close, joined on one line.
"""

from __future__ import annotations

from saga.evaluation.truth import ExpectedDocument
from tests.corpus.sheet import R, Sheet, rows

Built = tuple[bytes, ExpectedDocument]

LIPIDS_THYROID = rows("""
Cholesterol, Total | Total cholesterol | 212 | 212 | mg/dL | 100-199 | H | high
Triglycerides | = | 148 | 148 | mg/dL | 0-149 | | normal
HDL Cholesterol | HDL cholesterol | 47 | 47 | mg/dL | >39 | | normal
LDL Chol Calc | LDL cholesterol | 136 | 136 | mg/dL | 0-99 | H | high
TSH | Thyroid stimulating hormone | 1.92 | 1.92 | uIU/mL | 0.450-4.500 | | normal
Free T4 | Free thyroxine | 1.21 | 1.21 | ng/dL | 0.82-1.77 | | normal
""")
RENAL_IRON = rows("""
BUN | Urea nitrogen | 17 | 17 | mg/dL | 6-24 | | normal
Creatinine | = | 1.08 | 1.08 | mg/dL | 0.76-1.27 | | normal
eGFR | = | 81 | 81 | mL/min/1.73 | >59 | | normal
Calcium | = | 9.6 | 9.6 | mg/dL | 8.7-10.2 | | normal
Iron | = | 58 | 58 | ug/dL | 38-169 | | normal
Ferritin | = | 22 | 22 | ng/mL | 30-400 | L | low
Vitamin B12 | = | 412 | 412 | pg/mL | 232-1245 | | normal
Folate | = | 9.8 | 9.8 | ng/mL | >3.0 | | normal
""")


def _page(name: str, what: str, heading: str, patient: str) -> Sheet:
    """A new one-page sheet: its heading in bold, the patient line under it."""
    s = Sheet(name, what, size=9)
    s.new_page()
    s.style(style="B", size=12)
    s.at(15, 20, heading)
    s.style()
    s.at(15, 27, patient)
    return s


def _row(s: Sheet, x: float, y: float, r: R, tabs: tuple[float, float, float]) -> None:
    s.at(x, y, r.name)
    s.at(x + tabs[0], y, f"{r.text} {r.flag_text}".strip())
    s.at(x + tabs[1], y, r.unit)
    s.at(x + tabs[2], y, r.ref)


def _headers(s: Sheet, x: float, y: float, tabs: tuple[float, float, float]) -> None:
    """The column titles of a table at ``x`` (the caller sets the bold style)."""
    for dx, title in ((0.0, "Test"), (tabs[0], "Result"), (tabs[1], "Units"), (tabs[2], "Range")):
        s.at(x + dx, y, title)


def _table(s: Sheet, x: float, top: float, pitch: float, results: list[R],
           tabs: tuple[float, float, float]) -> None:  # fmt: skip
    """One result a row, ``pitch`` apart from ``top``; each is expected."""
    for index, r in enumerate(results):
        _row(s, x, top + index * pitch, r, tabs)
        s.record(r)


def offset_side_tables() -> Built:
    """Two tables side by side, each with its own row height: no row shares a line."""
    s = _page(
        "offset_side_tables",
        "Two result tables side by side with different row heights (rows never aligned)",
        "Ridgeway Diagnostics - Outpatient Report",
        "Patient: ABERNATHY, Colm    DOB: 11/02/1968    Collected: 04/09/2024 07:40",
    )
    tabs = (34.0, 50.0, 72.0)
    s.style(style="B")
    s.at(15, 38, "LIPIDS AND THYROID")
    s.at(110, 38, "RENAL AND IRON")
    for x in (15, 110):
        _headers(s, x, 44, tabs)
    s.style()
    _table(s, 15, 52, 7.4, LIPIDS_THYROID, tabs)
    _table(s, 110, 50.5, 5.3, RENAL_IRON, tabs)
    s.at(15, 110, "H = above, L = below the reference interval. Fasting specimen.")
    return s.finish()


NARRATIVE = (
    "Mr Haldane was seen in clinic for review of fatigue over the last 3 months. "
    "He reports 2 episodes of dizziness on standing and sleeps 6 hours a night. "
    "Hemoglobin had been 10.1 g/dL at his GP in 2022; he took iron for 8 weeks. "
    "Glucose control is discussed below. Creatinine and potassium are within the "
    "ranges on the right. Plan: repeat ferritin and sodium in 6 weeks, review in 12 "
    "weeks, blood pressure target below 130/80."
)
RESULTS = rows("""
Hemoglobin | = | 12.4 | 12.4 | g/dL | 13.0-17.0 | L | low
Ferritin | = | 18 | 18 | ng/mL | 30-400 | L | low
Sodium | = | 137 | 137 | mmol/L | 135-145 | | normal
Potassium | = | 4.6 | 4.6 | mmol/L | 3.5-5.1 | | normal
Creatinine | = | 1.02 | 1.02 | mg/dL | 0.70-1.30 | | normal
Glucose | = | 131 | 131 | mg/dL | 70-99 | H | high
HbA1c | Hemoglobin A1c | 6.6 | 6.6 | % | 4.0-5.6 | H | high
""")


def narrative_beside_results() -> Built:
    """A clinic letter in two columns: prose on the left, the results table on the right."""
    s = _page(
        "narrative_beside_results",
        "Two-column page: wrapped prose (with names and numbers) left, a results table right",
        "Eastmoor Renal and General Clinic - Clinic Letter",
        "Re: HALDANE, Piers    DOB: 02/07/1959    Clinic date: 18/03/2024",
    )
    s.pdf.set_xy(15, 36)
    s.pdf.multi_cell(82, 4.6, NARRATIVE, new_x="LMARGIN", new_y="NEXT")
    s.style(style="B")
    s.at(108, 38, "Results (18/03/2024)")
    tabs = (26.0, 41.0, 58.0)
    _headers(s, 108, 45, tabs)
    s.style()
    _table(s, 108, 52, 6.3, RESULTS, tabs)
    s.at(15, 110, "Dr A. Mensah, Consultant Nephrologist")
    return s.finish()


PANEL = rows("""
Hemoglobin | = | 14.1 | 14.1 | g/dL | 13.0-17.0 | | normal
Platelets | Platelet count | 212 | 212 | K/uL | 150-400 | | normal
Sodium | = | 133 | 133 | mmol/L | 135-145 | L | low
Potassium | = | 5.4 | 5.4 | mmol/L | 3.5-5.1 | H | high
Creatinine | = | 1.62 | 1.62 | mg/dL | 0.70-1.30 | H | high
Glucose | = | 96 | 96 | mg/dL | 70-99 | | normal
""")
PROSE = (
    "Summary for the referring physician. Potassium was 4.9 mmol/L in January and "
    "creatinine 1.31 mg/dL; the rise since then is modest. Sodium 138 mmol/L was "
    "recorded by the ward in 2023. Hemoglobin is stable. Glucose 112 mg/dL after a "
    "meal is not a fasting value. Repeat the renal panel in 2 weeks and stop the "
    "ibuprofen 400 mg."
)


def results_beside_history() -> Built:
    """A results table on the left, prose quoting earlier values on the right."""
    s = _page(
        "results_beside_history",
        "Two-column page: results table left, prose with earlier values and units right",
        "Lakeshore Community Hospital - Renal Clinic Results",
        "Patient: OYELARAN, Tomi    MRN: 5520193    Collected: 22/05/2024",
    )
    tabs = (24.0, 37.0, 52.0)
    s.style(style="B")
    _headers(s, 15, 38, tabs)
    s.style()
    _table(s, 15, 45, 6.1, PANEL, tabs)
    s.pdf.set_xy(104, 34)
    s.pdf.multi_cell(90, 4.4, PROSE)
    s.at(15, 100, "Results validated by: K. Dube, Biomedical Scientist")
    return s.finish()


STACKED_LEFT = rows("""
Ferritin | = | 22 | 22 | ng/mL | 30-400 | L | low
Vitamin B12 | = | 412 | 412 | pg/mL | 232-1245 | | normal
Folate | = | 9.8 | 9.8 | ng/mL | >3.0 | | normal
Iron | = | 58 | 58 | ug/dL | 38-169 | | normal
TSH | Thyroid stimulating hormone | 1.92 | 1.92 | uIU/mL | 0.450-4.500 | | normal
""")
STACKED_RIGHT = rows("""
Sodium | = | 140 | 140 | mmol/L | 136-145 | | normal
Potassium | = | 5.6 | 5.6 | mmol/L | 3.5-5.1 | H | high
Creatinine | = | 0.9 | 0.9 | mg/dL | 0.6-1.2 | | normal
Calcium | = | 9.6 | 9.6 | mg/dL | 8.7-10.2 | | normal
Albumin | = | 4.4 | 4.4 | g/dL | 3.5-5.7 | | normal
""")


def stacked_columns() -> Built:
    """Two newspaper columns of results, name above value; the right column half a step lower.

    Each right name sits level with a left value line: read across, a name meets the
    other column's value.
    """
    s = _page(
        "stacked_columns",
        "Two columns of name-above-value results, the right column offset by half a result",
        "Northfield Wellness Screening - Results",
        "Member: DACOSTA, Ines    DOB: 30/09/1981    Drawn: 12/06/2024",
    )
    for x, top, column in ((15, 40.0, STACKED_LEFT), (110, 45.5, STACKED_RIGHT)):
        for index, r in enumerate(column):
            y = top + index * 11
            s.style(style="B")
            s.at(x, y, r.name)
            s.style()
            flag = f" {r.flag_text}" if r.flag_text else ""
            s.at(x, y + 5, f"{r.text}{flag} {r.unit}   (ref {r.ref})")
            s.record(r)
    s.at(15, 110, "Reference intervals for adults. H = high, L = low.")
    return s.finish()
