"""Issue 28: layouts in other languages, written without the rules in front of us.

Decimal commas with thousands points (Spanish, Portuguese), Nordic system
prefixes and unit spellings (Swedish, Danish), Dutch mmol/L haemoglobin, an
Italian report with starred flags. Each is drawn from data typed by hand.
"""

from __future__ import annotations

from saga.evaluation.truth import ExpectedDocument
from tests.corpus.sheet import Sheet, rows

Built = tuple[bytes, ExpectedDocument]

SPANISH = rows("""
Hemoglobina | Hemoglobin | 13,1 | 13.1 | g/dL | 12,0 - 16,0 | | normal
Hematocrito | Hematocrit | 39,8 | 39.8 | % | 36,0 - 46,0 | | normal
Leucocitos | White blood cell count | 11.250 | 11250 | /mm³ | 4.500 - 11.000 | * | high
Plaquetas | Platelet count | 198.000 | 198000 | /mm³ | 150.000 - 450.000 | | normal
Glucosa basal | Glucose | 112 | 112 | mg/dL | 74 - 106 | * | high
Creatinina | Creatinine | 0,74 | 0.74 | mg/dL | 0,51 - 0,95 | | normal
Triglicéridos | Triglycerides | 187 | 187 | mg/dL | 0 - 150 | * | high
Ferritina | Ferritin | 1.340 | 1340 | ng/mL | 13 - 150 | * | high
Colesterol HDL | HDL cholesterol | 52 | 52 | mg/dL | 40 - 60 | | normal
""")


def spanish_hospital() -> Built:
    """A Spanish hospital: decimal commas, thousands with points, starred out-of-range values."""
    s = Sheet(
        "spanish_hospital",
        "Spanish hospital: Plaquetas 198.000 /mm³ 150.000 - 450.000, Hemoglobina 13,1",
        font="dejavu",
        size=9,
    )
    s.new_page()
    s.line("HOSPITAL UNIVERSITARIO SAN RAFAEL - Servicio de Análisis Clínicos", bold=True)
    s.line("Paciente: GARCÍA LÓPEZ, María    Nº Historia: 448.120    Fecha: 12/02/2024")
    s.line("Médico solicitante: Dra. Ruiz    Procedencia: Consultas Externas")
    s.gap()
    widths = (52, 24, 22, 44, 10)
    s.cells(
        zip(widths, ("Prueba", "Resultado", "Unidades", "Valores de referencia", ""), strict=True),
        bold=True,
    )
    for r in SPANISH:
        s.cells(zip(widths, (r.name, r.text, r.unit, r.ref, r.flag_text), strict=True))
        s.record(r)
    s.gap()
    s.line("(*) Valor fuera del intervalo de referencia.")
    s.line("Validado por: Dr. J. Martín, Facultativo Especialista")
    return s.finish()


PORTUGUESE = rows("""
Hemácias | Red blood cell count | 4,62 | 4.62 | milhões/mm³ | 4,30 a 5,70 | | normal
Hemoglobina | Hemoglobin | 14,1 | 14.1 | g/dL | 13,5 a 17,5 | | normal
Leucócitos | White blood cell count | 6.300 | 6300 | /mm³ | 3.500 a 10.500 | | normal
Plaquetas | Platelet count | 231.000 | 231000 | /mm³ | 150.000 a 450.000 | | normal
Glicose | Glucose | 94 | 94 | mg/dL | 70 a 99 | | normal
Colesterol total | Total cholesterol | 214 | 214 | mg/dL | < 190 | | high
Ureia | Urea | 31 | 31 | mg/dL | 15 a 45 | | normal
""")


def brazilian_lab() -> Built:
    """A Brazilian lab: ranges written ``a a b``, counts per mm³ with thousands points."""
    s = Sheet("brazilian_lab", "Brazilian lab: Leucócitos 6.300 /mm³ 3.500 a 10.500", font="dejavu")
    s.new_page()
    s.line("LABORATÓRIO VIDA NOVA - Medicina Diagnóstica", bold=True, size=12)
    s.line("Paciente: João Pereira da Silva    Idade: 52 anos    Pedido: 2024-0314")
    s.gap()
    widths = (48, 26, 30, 46)
    s.cells(
        zip(widths, ("Exame", "Resultado", "Unidade", "Valor de referência"), strict=True),
        bold=True,
    )
    for r in PORTUGUESE:
        s.cells(zip(widths, (r.name, r.text, r.unit, r.ref), strict=True))
        s.record(r)
    s.gap()
    s.line("Material: sangue venoso. Método: automação.")
    return s.finish()


SWEDISH = rows("""
B-Hb | Hemoglobin | 121 | 121 | g/L | 117-153 | | normal
B-LPK | White blood cell count | 9,6 | 9.6 | x10⁹/L | 3,5-8,8 | H | high
B-TPK | Platelet count | 402 | 402 | x10⁹/L | 165-387 | H | high
P-Kreatinin | Creatinine | 68 | 68 | µmol/L | 45-90 | | normal
fP-Glukos | Glucose | 6,3 | 6.3 | mmol/L | 4,0-6,0 | H | high
S-TSH | Thyroid stimulating hormone | 3,1 | 3.1 | mIE/L | 0,4-4,0 | | normal
P-ALAT | Alanine aminotransferase | 0,38 | 0.38 | µkat/L | 0,15-0,75 | | normal
S-Ferritin | Ferritin | 14 | 14 | µg/L | 13-150 | | normal
""")


def swedish_lab() -> Built:
    """A Swedish lab: B-/P-/S-/fP- prefixes, mIE/L, µkat/L, x10⁹/L, decimal commas."""
    s = Sheet("swedish_lab", "Swedish lab: B-LPK 9,6 x10⁹/L, S-TSH 3,1 mIE/L", font="dejavu")
    s.new_page()
    s.line("Klinisk kemi, Universitetssjukhuset", bold=True, size=12)
    s.line("Patient: 19580412-XXXX  Andersson, Karin    Provtagning: 2024-03-05 08:15")
    s.gap()
    widths = (40, 22, 26, 34, 10)
    s.cells(zip(widths, ("Analys", "Resultat", "Enhet", "Referens", ""), strict=True), bold=True)
    for r in SWEDISH:
        s.cells(zip(widths, (r.name, r.text, r.unit, r.ref, r.flag_text), strict=True))
        s.record(r)
    s.gap()
    s.line("Svar signerat av: överläkare E. Lind")
    return s.finish()


DUTCH = rows("""
Hemoglobine | Hemoglobin | 8,1 | 8.1 | mmol/L | 8,5 - 11,0 | L | low
Leukocyten | White blood cell count | 5,4 | 5.4 | 10^9/L | 4,0 - 10,0 | | normal
Trombocyten | Platelet count | 288 | 288 | 10^9/L | 150 - 400 | | normal
Kreatinine | Creatinine | 91 | 91 | µmol/L | 64 - 104 | | normal
Glucose nuchter | Glucose | 5,8 | 5.8 | mmol/L | 4,0 - 6,0 | | normal
Cholesterol totaal | Total cholesterol | 6,4 | 6.4 | mmol/L | < 5,0 | H | high
Triglyceriden | Triglycerides | 1,9 | 1.9 | mmol/L | < 2,0 | | normal
Ferritine | Ferritin | 35 | 35 | µg/L | 20 - 300 | | normal
""")


def dutch_lab() -> Built:
    """A Dutch general-practice lab: haemoglobin in mmol/L, one-sided ranges with commas."""
    s = Sheet("dutch_lab", "Dutch lab: Hemoglobine 8,1 mmol/L 8,5 - 11,0 L", font="dejavu")
    s.new_page()
    s.line("Huisartsenlaboratorium Midden-Nederland", bold=True, size=12)
    s.line("Patiënt: J. de Vries    Geboortedatum: 14-08-1961    Afname: 05-03-2024")
    s.gap()
    widths = (50, 22, 24, 34, 10)
    s.cells(
        zip(widths, ("Bepaling", "Uitslag", "Eenheid", "Referentie", ""), strict=True), bold=True
    )
    for r in DUTCH:
        s.cells(zip(widths, (r.name, r.text, r.unit, r.ref, r.flag_text), strict=True))
        s.record(r)
    s.gap()
    s.line("Uitslagen buiten de referentiewaarden zijn gemarkeerd met H of L.")
    return s.finish()


ITALIAN = rows("""
Emoglobina | Hemoglobin | 15,2 | 15.2 | g/dL | 13,0 - 17,0 | | normal
Globuli bianchi | White blood cell count | 7,85 | 7.85 | x10^3/µL | 4,00 - 10,00 | | normal
Piastrine | Platelet count | 141 | 141 | x10^3/µL | 150 - 400 | * | low
Glicemia | Glucose | 104 | 104 | mg/dL | 70 - 100 | * | high
Colesterolo totale | Total cholesterol | 226 | 226 | mg/dL | < 200 | * | high
Trigliceridi | Triglycerides | 98 | 98 | mg/dL | < 150 | | normal
Creatinina | Creatinine | 1,02 | 1.02 | mg/dL | 0,70 - 1,20 | | normal
Sodio | Sodium | 141 | 141 | mmol/L | 136 - 145 | | normal
""")


def italian_referto() -> Built:
    """An Italian referto: x10^3/µL counts, starred results, decimal commas."""
    s = Sheet(
        "italian_referto", "Italian referto: Piastrine 141 * x10^3/µL 150 - 400", font="dejavu"
    )
    s.new_page()
    s.line("Laboratorio Analisi Cliniche San Luca", bold=True, size=12)
    s.line("Paziente: Rossi Marco    Data prelievo: 05/03/2024    Accettazione n. 7731")
    s.gap()
    widths = (50, 20, 10, 26, 40)
    s.cells(
        zip(widths, ("Esame", "Risultato", "", "Unità", "Valori di riferimento"), strict=True),
        bold=True,
    )
    for r in ITALIAN:
        s.cells(zip(widths, (r.name, r.text, r.flag_text, r.unit, r.ref), strict=True))
        s.record(r)
    s.gap()
    s.line("* valore al di fuori dell'intervallo di riferimento")
    return s.finish()
