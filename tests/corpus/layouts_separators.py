"""Layouts nobody here had made, written before the rules that now read them (h29).

Column separators other than runs of spaces (pipes without a known header, a
semicolon export), a range labelled ``N:``, a unit column before the value and a
flag column without a header word, two tables side by side whose unit header is
``Unid.``. Scratch layouts that already read (dot leaders with ``(range)``, ``bis``
ranges and arrows, tab exports, glued ``H``/``L``/``*``/``↑`` flags, pipes with
outer bars) are in docs/extraction.md's figures, not here.
"""

from __future__ import annotations

from saga.evaluation.truth import ExpectedDocument
from tests.corpus.sheet import R, Sheet, rows

Built = tuple[bytes, ExpectedDocument]

PIPE = rows("""
Glukoza | Glucose | 5,4 | 5.4 | mmol/l | N: 3,9\u20135,5 | | normal
Kreatinin | Creatinine | 88 | 88 | µmol/l | N: 62\u2013106 | | normal
Hemoglobin | Hemoglobin | 131 | 131 | g/l | N: 120\u2013160 | | normal
Holesterol | Total cholesterol | 6,2 | 6.2 | mmol/l | N: < 5,2 | H | high
Trigliceridi | Triglycerides | 1,4 | 1.4 | mmol/l | N: < 1,7 | | normal
Kalij | Potassium | 4,3 | 4.3 | mmol/l | N: 3,5\u20135,1 | | normal
""")


def pipe_table() -> Built:
    """Pipes without a header we know, ranges labelled ``N:``: read, names kept unverified."""
    s = Sheet(
        "pipe_table",
        "Croatian pipe table: Glukoza | 5,4 | mmol/l | N: 3,9\u20135,5 (unknown names)",
        font="dejavu",
    )
    s.new_page()
    s.line("Laboratorij Medicinske biokemije", bold=True)
    s.line("Pacijent: Horvat Ivan   Datum: 05.03.2024")
    s.gap()
    s.line("Pretraga | Rezultat | Jedinica | Referentni interval")
    for r in PIPE:
        ref = r.ref + (f" {r.flag_text}" if r.flag_text else "")
        s.line(f"{r.name} | {r.text} | {r.unit} | {ref}")
        s.record(r)
    # Glukoza, Holesterol, Kalij: no analyte of the table, so kept unverified and the
    # document flagged (test_corpus_names checks it; expect_review is for scans only)
    return s.finish()


SEMI = rows("""
Hämoglobin | Hemoglobin | 14,2 | 14.2 | g/dl | 13,5-17,5 | | normal
Leukozyten | White blood cell count | 11,8 | 11.8 | Tsd/µl | 4,0-10,0 | H | high
Thrombozyten | Platelet count | 245 | 245 | Tsd/µl | 150-400 | | normal
Natrium | Sodium | 139 | 139 | mmol/l | 135-145 | | normal
Kalium | Potassium | 3,3 | 3.3 | mmol/l | 3,5-5,1 | L | low
Kreatinin | Creatinine | 1,08 | 1.08 | mg/dl | 0,70-1,20 | | normal
GPT (ALT) | Alanine aminotransferase | 41 | 41 | U/l | < 50 | | normal
""")


def semicolon_export() -> Built:
    """A laboratory export printed as it is: semicolon-separated cells, German names."""
    s = Sheet(
        "semicolon_export",
        "German export printed as CSV: Kalium;3,3;mmol/l;3,5-5,1;L",
        font="dejavumono",
        size=9,
    )
    s.new_page()
    s.line("Export Laborbefunde - Praxis Dr. Weber")
    s.line("Parameter;Ergebnis;Einheit;Referenz;Flag")
    for r in SEMI:
        s.line(f"{r.name};{r.text};{r.unit};{r.ref};{r.flag_text}")
        s.record(r)
    return s.finish()


UNIT_FIRST = rows("""
Glycémie | Glucose | 5.4 | 5.4 | mmol/l | 3.9 - 5.5 | | normal
Créatinine | Creatinine | 71 | 71 | µmol/l | 45 - 90 | | normal
Hémoglobine | Hemoglobin | 12.9 | 12.9 | g/dl | 12.0 - 16.0 | | normal
Sodium | Sodium | 133 | 133 | mmol/l | 136 - 145 | L | low
Potassium | Potassium | 4.6 | 4.6 | mmol/l | 3.5 - 5.1 | | normal
Cholestérol total | Total cholesterol | 6.1 | 6.1 | mmol/l | < 5.2 | H | high
""")


def unit_before_value() -> Built:
    """A French report whose unit column comes before the result, a flag column unnamed."""
    s = Sheet(
        "unit_before_value",
        "French report, unit before value: Sodium  mmol/l  133  L  136 - 145",
        font="dejavu",
    )
    s.new_page()
    s.line("Laboratoire de Biologie Médicale du Parc", bold=True)
    s.gap()
    widths = (50, 22, 22, 12, 40)
    header = ("Analyse", "Unité", "Résultat", "", "Valeurs de référence")
    s.cells(zip(widths, header, strict=True), bold=True)
    for r in UNIT_FIRST:
        s.cells(zip(widths, (r.name, r.unit, r.text, r.flag_text, r.ref), strict=True))
        s.record(r)
    return s.finish()


LEFT = rows("""
Hemoglobina | Hemoglobin | 13,8 | 13.8 | g/dL | 12,0-16,0 | | normal
Hematocrito | Hematocrit | 41,2 | 41.2 | % | 36,0-46,0 | | normal
Leucocitos | White blood cell count | 3,2 | 3.2 | x10³/µL | 4,0-11,0 | L | low
Plaquetas | Platelet count | 256 | 256 | x10³/µL | 150-450 | | normal
VCM | Mean corpuscular volume | 88 | 88 | fL | 80-100 | | normal
""")
RIGHT = rows("""
Glucosa | Glucose | 131 | 131 | mg/dL | 74-106 | H | high
Urea | Urea | 38 | 38 | mg/dL | 17-43 | | normal
Creatinina | Creatinine | 0,81 | 0.81 | mg/dL | 0,50-0,90 | | normal
Sodio | Sodium | 138 | 138 | mmol/L | 136-145 | | normal
Potasio | Potassium | 5,6 | 5.6 | mmol/L | 3,5-5,1 | H | high
""")


def two_tables_es() -> Built:
    """Two Spanish tables side by side under one header each, the unit header ``Unid.``."""
    s = Sheet(
        "two_tables_es",
        "Spanish hematology and chemistry side by side, header words Result. / Unid.",
        font="dejavu",
        size=8,
    )
    s.new_page()
    s.line("Laboratorio Clínico Central", bold=True)
    s.gap()
    w = (26, 14, 6, 16, 22, 6)
    hdr = ("Prueba", "Result.", "", "Unid.", "Referencia", "")
    s.cells(zip(w + w[:5], hdr + hdr[:5], strict=True), bold=True)
    for left, right in zip(LEFT, RIGHT, strict=True):
        cells = (*_cells(left), "", *_cells(right))
        s.cells(zip(w + w[:5], cells, strict=True))
        s.record(left, right)
    return s.finish()


def _cells(r: R) -> tuple[str, str, str, str, str]:
    return (r.name, r.text, r.flag_text, r.unit, r.ref)
